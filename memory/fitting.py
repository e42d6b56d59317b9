"""Prompt fitting: which messages go into the prompt when not all of them fit.

Old research (tool results of earlier replies) goes first, then whole earlier
exchanges oldest first, then the current reply's own oldest research. The current
user message is always kept; if it alone does not fit, that is an error the user
must hear about rather than a silent cut.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from memory.history import Message, group_exchanges


class CurrentMessageTooLong(ValueError):
    """The current message alone does not fit in the room left for the prompt."""

    def __init__(self, needed: int, room: int) -> None:
        super().__init__(f"needs {needed} tokens, {room} available")
        self.needed = needed
        self.room = room


@dataclass(frozen=True)
class FitResult:
    """The messages that fit, in order, and what was left out."""

    kept: tuple[Message, ...]
    dropped: tuple[int, ...]
    """Numbers of the messages left out."""
    tokens: int
    """Tokens of the kept messages."""


def fit_history(
    messages: Sequence[Message],
    current_seq: int,
    count: Callable[[Message], int],
    room: int,
) -> FitResult:
    """Choose the messages that fit in `room` tokens.

    `current_seq` is the number of the user message being answered: it and
    everything after it (this reply's research) form the current exchange.
    """
    sizes = {m.seq: count(m) for m in messages}
    total = sum(sizes.values())
    dropped: set[int] = set()

    def over() -> bool:
        return total > room

    def drop(message: Message) -> None:
        nonlocal total
        if message.seq not in dropped:
            dropped.add(message.seq)
            total -= sizes[message.seq]

    earlier = [m for m in messages if m.seq < current_seq]
    current = [m for m in messages if m.seq >= current_seq]
    for message in earlier:
        if not over():
            break
        if message.role == "tool":
            drop(message)
    for exchange in group_exchanges(earlier):
        if not over():
            break
        for message in exchange.messages:
            drop(message)
    for message in current:
        if not over():
            break
        if message.role == "tool":
            drop(message)
    if over():
        needed = sum(sizes[m.seq] for m in current if m.seq not in dropped)
        raise CurrentMessageTooLong(needed, room)
    kept = tuple(m for m in messages if m.seq not in dropped)
    return FitResult(kept, tuple(sorted(dropped)), total)
