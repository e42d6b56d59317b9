"""A chat model behind an OpenAI-compatible HTTP server (llama.cpp's server, vLLM, Ollama)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence

import httpx

from models.base import (
    CancelToken,
    ChatModel,
    Chunk,
    ModelCapabilities,
    PromptMessage,
    ToolCallChunk,
    ToolSpec,
    UsageChunk,
)
from models.errors import EngineError
from models.openai_format import openai_messages, tool_schemas
from models.toolcalls import ToolCallScanner, parse_call

TOOL_CHOICE_WORDS = ("auto", "required", "none")
"""OpenAI's `tool_choice` keywords; any other choice names the tool the server must call."""

# Without a tokenize endpoint, count a token per 3 characters: English averages about
# 4 characters a token, so this overestimates and the prompt still fits.
CHARS_PER_TOKEN_ESTIMATE = 3
MESSAGE_OVERHEAD = 6


class RemoteModelError(EngineError):
    """The server is down, slow, or did not answer like an OpenAI-compatible server."""


class OpenAIChatModel(ChatModel):
    capabilities = ModelCapabilities(native_tools=True)
    """Tools go in the request's `tools` field; the server keeps its own prompt cache, which
    Parley can neither fill ahead nor keep aside."""

    def __init__(self, url: str, model_name: str = "default", api_key: str | None = None,
                 context_size: int = 8192, timeout: float = 120.0,
                 tool_choice: str | None = None) -> None:
        self.url = url.rstrip("/")
        self.tool_choice = tool_choice
        """Sent as `tool_choice` with the tools: a keyword, or the name of the tool the
        server must call (llama-cpp-python's server calls a tool only when named)."""
        self.name = model_name
        self.context_size = context_size
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._api_key = api_key
        self._client = httpx.Client(headers=headers,
                                    timeout=httpx.Timeout(timeout, connect=5.0))
        self._timeout = timeout
        self._tokenizer: str | None = None  # "extras", "llama.cpp", or "estimate"
        self._counts: dict[str, int] = {}

    # -- token counting ----------------------------------------------------------
    def _root(self) -> str:
        return self.url[:-3] if self.url.endswith("/v1") else self.url

    def _count_text(self, text: str) -> int:
        if text in self._counts:
            return self._counts[text]
        count = None
        if self._tokenizer in (None, "extras"):  # llama-cpp-python's server
            count = self._try_tokenize(f"{self._root()}/extras/tokenize", {"input": text},
                                       "extras")
        if count is None and self._tokenizer in (None, "llama.cpp"):  # llama.cpp's server
            count = self._try_tokenize(f"{self._root()}/tokenize", {"content": text},
                                       "llama.cpp")
        if count is None:
            self._tokenizer = "estimate"
            count = len(text) // CHARS_PER_TOKEN_ESTIMATE + 1
        self._counts[text] = count
        return count

    def _try_tokenize(self, url: str, body: dict, kind: str) -> int | None:
        """The server's count, or None when it has no such endpoint. A server that cannot
        be reached or does not answer in time fails here, as it would for the reply:
        trying each endpoint with a wait of its own would keep the user waiting several
        times --llm-timeout, and settling on estimates would last the whole session."""
        try:
            response = self._client.post(url, json=body)
        except httpx.TransportError as exc:
            raise self._failure(exc) from exc
        try:
            tokens = response.json().get("tokens") if response.status_code == 200 else None
        except (ValueError, AttributeError):
            tokens = None
        if isinstance(tokens, list):
            self._tokenizer = kind
            return len(tokens)
        return None

    @property
    def counts_exactly(self) -> bool:
        return self._tokenizer in ("extras", "llama.cpp")

    def count_tokens(self, message: PromptMessage) -> int:
        extra = json.dumps(message.tool_arguments) if message.tool_arguments else ""
        return MESSAGE_OVERHEAD + self._count_text(message.content + extra)

    def overhead_tokens(self, tools: Sequence[ToolSpec]) -> int:
        if not tools:
            return MESSAGE_OVERHEAD
        return MESSAGE_OVERHEAD + self._count_text(json.dumps(tool_schemas(tools)))

    # -- generation --------------------------------------------------------------
    def stream(self, messages: Sequence[PromptMessage], tools: Sequence[ToolSpec],
               max_tokens: int, cancel: CancelToken | None = None) -> Iterator[Chunk]:
        body: dict = {"model": self.name, "messages": openai_messages(messages),
                      "max_tokens": max_tokens, "stream": True,
                      "stream_options": {"include_usage": True}}
        if tools:
            body["tools"] = tool_schemas(tools)
            choice = self._tool_choice(tools)
            if choice is not None:
                body["tool_choice"] = choice
        scanner = ToolCallScanner(tools=tools)
        calls: dict[int, dict] = {}
        usage = None
        completion = 0
        try:
            with self._client.stream("POST", f"{self.url}/chat/completions", json=body) as resp:
                if resp.status_code != 200:
                    detail = resp.read().decode("utf-8", "replace")[:200]
                    raise RemoteModelError(self._hide(
                        f"the model server at {self.url} answered HTTP {resp.status_code}: "
                        f"{detail}"))
                for data in self._events(resp.iter_lines()):
                    if cancel is not None and cancel.cancelled:
                        break
                    if data.get("usage"):
                        usage = data["usage"]
                    for choice in data.get("choices") or []:
                        delta = choice.get("delta") or {}
                        if delta.get("content"):
                            completion += 1
                            yield from scanner.feed(delta["content"])
                        for call in delta.get("tool_calls") or []:
                            slot = calls.setdefault(call.get("index", 0), {"name": "", "args": ""})
                            function = call.get("function") or {}
                            # llama-cpp-python repeats the whole name in every delta;
                            # others send it once (or in pieces).
                            name = function.get("name") or ""
                            if name != slot["name"]:
                                slot["name"] += name
                            slot["args"] += function.get("arguments") or ""
        except httpx.HTTPError as exc:
            raise self._failure(exc) from exc
        yield from scanner.finish()
        for slot in calls.values():
            body_text = json.dumps({"name": slot["name"], "arguments": slot["args"] or "{}"})
            chunk = parse_call(body_text)
            yield chunk if chunk.name or chunk.error else ToolCallChunk("", {}, "empty call")
        # Servers that send no usage in streams: count the prompt ourselves.
        prompt_tokens = int((usage or {}).get("prompt_tokens") or (
            self.overhead_tokens(tools) + sum(self.count_tokens(m) for m in messages)))
        yield UsageChunk(prompt_tokens, prompt_tokens,
                         int((usage or {}).get("completion_tokens", completion)))

    def _tool_choice(self, tools: Sequence[ToolSpec]) -> str | dict | None:
        """The `tool_choice` of a request offering `tools`; a named tool not among them
        (conversation_history before there is a history) is not asked for."""
        if self.tool_choice is None or self.tool_choice in TOOL_CHOICE_WORDS:
            return self.tool_choice
        if any(tool.name == self.tool_choice for tool in tools):
            return {"type": "function", "function": {"name": self.tool_choice}}
        return None

    # -- failures ----------------------------------------------------------------
    def _failure(self, exc: httpx.HTTPError) -> RemoteModelError:
        if isinstance(exc, httpx.ConnectError):
            return RemoteModelError(f"cannot reach the model server at {self.url}; is it "
                                    "running?")
        if isinstance(exc, httpx.TimeoutException):
            return RemoteModelError(f"the model server at {self.url} did not answer within "
                                    f"{self._timeout:g} s")
        return RemoteModelError(self._hide(f"the model server at {self.url} failed: {exc}"))

    def _hide(self, text: str) -> str:
        """`text` without the API key: some servers and proxies quote the key they refused,
        and what the server says is shown to the user."""
        return text.replace(self._api_key, "***") if self._api_key else text

    def _events(self, lines: Iterator[str]) -> Iterator[dict]:
        """The JSON events of an OpenAI-style server-sent stream, up to `[DONE]`."""
        url = self.url
        for line in lines:
            line = line.strip()
            if not line or line.startswith(":"):  # keep-alive comments (": ping")
                continue
            field, _, payload = line.partition(":")
            payload = payload.strip()
            if field == "error":  # llama.cpp's server reports a failure mid-stream this way
                raise RemoteModelError(self._hide(
                    f"the model server at {url} reported: {_error_text(payload)}"))
            if field in ("event", "id", "retry"):  # SSE fields no OpenAI event needs
                continue
            if field != "data":
                raise RemoteModelError(self._hide(
                    f"the server at {url} did not answer with an OpenAI-compatible stream "
                    f"(got {line[:80]!r})"))
            if payload == "[DONE]":
                return
            try:
                data = json.loads(payload)
            except json.JSONDecodeError as exc:
                raise RemoteModelError(self._hide(
                    f"the server at {url} sent a stream event that is not JSON "
                    f"({payload[:80]!r})")) from exc
            if not isinstance(data, dict):
                raise RemoteModelError(f"the server at {url} sent an unexpected event")
            if "error" in data:
                raise RemoteModelError(self._hide(
                    f"the model server at {url} reported: {_error_text(data['error'])}"))
            yield data


def _error_text(error: object) -> str:
    """The message of an OpenAI-style error (`{"message": …}`, or that as JSON text)."""
    if isinstance(error, str):
        try:
            error = json.loads(error)
        except json.JSONDecodeError:
            return error[:300]
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return error["message"][:300]
    return str(error)[:300]
