"""`parley web`: one conversation in the browser, shared by every tab.

`room` is the conversation and its replies, without any web framework (importing
`assistant` never needs Starlette); `app` is the Starlette application over it; `server`
runs it with uvicorn. The page is static files in `static/`.
"""
