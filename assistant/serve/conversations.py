"""The server's conversations: one per Home Assistant `conversation_id`, each with its own
numbered history, summary and search, expiring when idle, at most a set number kept."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from assistant.between_turns import BetweenTurns
from assistant.conversation import Conversation

DEFAULT_MAX_CONVERSATIONS = 32
DEFAULT_IDLE_MINUTES = 30.0
MAX_ID_CHARS = 200
"""Home Assistant's ids are ULIDs (26 characters); anything far longer is not an id."""


class ConversationsBusy(RuntimeError):
    """Every kept conversation has a reply in progress: none can make room for another."""


@dataclass
class Kept:
    conversation: Conversation
    last_used: float
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    """One reply at a time in a conversation: a second request waits for the first."""
    between_turns: BetweenTurns = field(init=False)
    """Its summary written after a reply, while the model is free (no next prompt is
    prepared: the model answers many conversations in turn)."""

    def __post_init__(self) -> None:
        self.between_turns = BetweenTurns(self.conversation, prepare=False)


class Conversations:
    """Conversations by id, created on first use by `create`. Used from the event loop only.

    An idle conversation (no request for `idle_seconds`) is forgotten; with `most` kept and
    a new id coming, the one unused longest goes first, never one answering now.
    """

    def __init__(self, create: Callable[[], Conversation],
                 most: int = DEFAULT_MAX_CONVERSATIONS,
                 idle_seconds: float = DEFAULT_IDLE_MINUTES * 60,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if most < 1:
            raise ValueError("at least one conversation must be kept")
        if idle_seconds <= 0:
            raise ValueError("the idle time must be positive")
        self.create, self.most, self.idle_seconds, self.clock = create, most, idle_seconds, clock
        self._kept: dict[str, Kept] = {}

    def __len__(self) -> int:
        return len(self._kept)

    def __contains__(self, conversation_id: str) -> bool:
        return conversation_id in self._kept

    def get(self, conversation_id: str | None) -> Kept:
        """The conversation `conversation_id` names, new if unknown or expired; without an
        id, a conversation for this one request, not kept."""
        now = self.clock()
        self.expire(now)
        if conversation_id is None:
            return Kept(self.create(), now)
        kept = self._kept.get(conversation_id)
        if kept is None:
            if len(self._kept) >= self.most:
                self._make_room()
            kept = self._kept[conversation_id] = Kept(self.create(), now)
        kept.last_used = now
        return kept

    def expire(self, now: float | None = None) -> int:
        """Forget the conversations idle for `idle_seconds`; returns how many."""
        now = self.clock() if now is None else now
        gone = [key for key, kept in self._kept.items()
                if now - kept.last_used >= self.idle_seconds and not kept.lock.locked()]
        for key in gone:
            del self._kept[key]
        return len(gone)

    def _make_room(self) -> None:
        idle = [(kept.last_used, key) for key, kept in self._kept.items()
                if not kept.lock.locked()]
        if not idle:
            raise ConversationsBusy(
                f"all {self.most} conversations Parley keeps are answering now; try again "
                "in a moment, or start `parley serve` with a larger --max-conversations")
        del self._kept[min(idle)[1]]


def conversation_id(context: object) -> str | None:
    """The id in a Wyoming event's `context`, if it is a usable one."""
    if not isinstance(context, dict):
        return None
    value = context.get("conversation_id")
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_ID_CHARS:
        return None
    return value
