"""Stand-in engines for unit tests of the logic around them."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from models.base import (
    CancelToken,
    ChatModel,
    Chunk,
    PromptMessage,
    ToolSpec,
    UsageChunk,
)
from models.toolcalls import ToolCallScanner


class ScriptedChatModel(ChatModel):
    """Answers from a queue; records every prompt (and the tools offered) it is given.

    Replies are raw model output, so `<tool_call>` text goes through the same
    parser as a real model's output. Tokens are counted as one per 4 characters.
    """

    name = "scripted"

    def __init__(self, context_size: int = 8192, chunk_size: int = 5) -> None:
        self.context_size = context_size
        self.queue: list[str | Exception] = []
        self.prompts: list[list[PromptMessage]] = []
        self.offered: list[list[str]] = []
        self.chunk_size = chunk_size

    def enqueue(self, *replies: str | Exception) -> None:
        self.queue.extend(replies)

    def count_tokens(self, message: PromptMessage) -> int:
        return 4 + len(message.content) // 4

    def overhead_tokens(self, tools: Sequence[ToolSpec]) -> int:
        return 3 + sum(20 + len(t.description) // 4 for t in tools)

    def stream(
        self,
        messages: Sequence[PromptMessage],
        tools: Sequence[ToolSpec],
        max_tokens: int,
        cancel: CancelToken | None = None,
    ) -> Iterator[Chunk]:
        self.prompts.append(list(messages))
        self.offered.append([t.name for t in tools])
        reply = self.queue.pop(0) if self.queue else "OK."
        if isinstance(reply, Exception):
            raise reply
        scanner = ToolCallScanner()
        for start in range(0, len(reply), self.chunk_size):
            if cancel is not None and cancel.cancelled:
                break
            yield from scanner.feed(reply[start:start + self.chunk_size])
        yield from scanner.finish()
        total = sum(self.count_tokens(m) for m in messages)
        yield UsageChunk(total, total, len(reply) // 4)


def texts(events: list, kind: type) -> list[str]:
    return [getattr(e, "text", getattr(e, "content", "")) for e in events if isinstance(e, kind)]


