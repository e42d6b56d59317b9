"""The OpenAI chat shape of tools and messages, shared by chat templates and HTTP servers.

GGUF chat templates that know tools (Qwen, Llama 3.x, Hermes, Mistral) read the same
`tools`/`tool_calls` structures an OpenAI-compatible server takes, with two differences
the callers choose: a call's arguments (a JSON string for servers, a mapping for templates:
Qwen2.5 and Llama 3.1 print `arguments | tojson`, so a string would come out quoted), and
the tool's name on its result (Functionary-style templates print it; OpenAI documents no
such field and some servers reject it). A call's content is "" for both: OpenAI allows
null there, but llama-cpp-python's server answers null with HTTP 500, and some templates
concatenate it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from models.base import PromptMessage, ToolSpec


def tool_schemas(tools: Sequence[ToolSpec]) -> list[dict]:
    return [{"type": "function", "function": {"name": t.name, "description": t.description,
                                              "parameters": t.parameters}} for t in tools]


def call_id(number: int) -> str:
    """The id of the call replayed before message `number`: nine letters and digits (below
    100 000 messages), the only shape Mistral's templates and API accept; others take any."""
    return f"call{number:05d}"


def openai_messages(messages: Sequence[PromptMessage], arguments_as_text: bool = True,
                    call_content: str = "", result_names: bool = False) -> list[dict]:
    """Messages with each tool result preceded by the assistant's call that produced it.

    Servers take a call's arguments as a JSON string; chat templates iterate the
    arguments as a mapping, and some print the tool's name on its result, so they pass
    `arguments_as_text=False, result_names=True`.
    """
    out: list[dict] = []
    for number, message in enumerate(messages):
        if message.role != "tool":
            out.append({"role": message.role, "content": message.content})
            continue
        identifier = call_id(number)
        arguments = message.tool_arguments or {}
        out.append({"role": "assistant", "content": call_content, "tool_calls": [{
            "id": identifier, "type": "function",
            "function": {"name": message.tool_name,
                         "arguments": json.dumps(arguments) if arguments_as_text
                         else arguments}}]})
        result = {"role": "tool", "tool_call_id": identifier, "content": message.content}
        if result_names:
            result["name"] = message.tool_name
        out.append(result)
    return out
