"""The conversation: numbered messages grouped into exchanges, kept in memory only."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Protocol

ROLES = ("user", "assistant", "tool")


@dataclass(frozen=True)
class Message:
    """One numbered message of a conversation."""

    seq: int
    """Position in the conversation, 1 for the first message said."""
    role: str
    """"user", "assistant" or "tool" (a tool result)."""
    content: str
    tool: str | None = None
    """For a tool result: the tool's name."""
    query: str | None = None
    """For a tool result: what the tool was asked, as one line."""
    arguments: dict | None = field(default=None, compare=False)
    """For a tool result: the call's arguments, replayed to the model."""
    at: datetime | None = field(default=None, compare=False)
    """When it was said, in local time with its UTC offset (None: not known)."""

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"unknown role {self.role!r}; expected one of {ROLES}")
        if self.seq < 1:
            raise ValueError("message numbers start at 1")


@dataclass(frozen=True)
class Exchange:
    """A user message and everything said in reply to it, up to the next user message."""

    messages: tuple[Message, ...]

    @property
    def first_seq(self) -> int:
        return self.messages[0].seq

    @property
    def last_seq(self) -> int:
        return self.messages[-1].seq


def group_exchanges(messages: Iterable[Message]) -> list[Exchange]:
    """Split messages into exchanges; each starts at a user message."""
    groups: list[list[Message]] = []
    for message in messages:
        if message.role == "user" or not groups:
            groups.append([message])
        else:
            groups[-1].append(message)
    return [Exchange(tuple(group)) for group in groups]


def local_now() -> datetime:
    """The time now in the local time zone, with its offset (so it reads right later)."""
    return datetime.now().astimezone()


class HistoryListener(Protocol):
    """Told of each change to a history as it happens (a file the conversation is saved in).

    `keep_last` is not a change: it only limits what is kept in memory.
    """

    def added(self, message: Message) -> None: ...
    def removed_from(self, seq: int) -> None: ...
    def replaced(self, message: Message) -> None: ...
    def cleared(self) -> None: ...


class History:
    """The numbered messages of one conversation, in the order they were said."""

    def __init__(self, messages: Sequence[Message] = (),
                 now: Callable[[], datetime] = local_now,
                 listener: HistoryListener | None = None) -> None:
        self._messages: list[Message] = list(messages)
        self.now = now
        self.listener = listener
        """Told of every change (None: the history lives in memory only)."""

    def add(self, role: str, content: str, **extra: object) -> Message:
        seq = self._messages[-1].seq + 1 if self._messages else 1
        extra.setdefault("at", self.now())
        message = Message(seq, role, content, **extra)  # type: ignore[arg-type]
        self._messages.append(message)
        # Read once, after the append: a listener attached meanwhile still hears of it.
        if (listener := self.listener) is not None:
            listener.added(message)
        return message

    def clear(self) -> None:
        self._messages.clear()
        if (listener := self.listener) is not None:
            listener.cleared()

    def remove_from(self, seq: int) -> None:
        """Forget messages numbered `seq` and later (a reply that was cancelled)."""
        self._messages = [m for m in self._messages if m.seq < seq]
        if (listener := self.listener) is not None:
            listener.removed_from(seq)

    def replace_content(self, seq: int, content: str) -> None:
        """Rewrite one message's text (a spoken reply the user cut short)."""
        self._messages = [replace(m, content=content) if m.seq == seq else m
                          for m in self._messages]
        listener = self.listener
        changed = next((m for m in self._messages if m.seq == seq), None)
        if listener is not None and changed is not None:
            listener.replaced(changed)

    def keep_last(self, count: int) -> None:
        """Keep only the newest `count` messages; numbers stay as they were said."""
        if len(self._messages) > count:
            self._messages = self._messages[-count:]

    @property
    def messages(self) -> tuple[Message, ...]:
        return tuple(self._messages)

    @property
    def next_seq(self) -> int:
        return self._messages[-1].seq + 1 if self._messages else 1

    def __len__(self) -> int:
        return len(self._messages)


def said_at(message: Message, now: datetime | None = None) -> str:
    """When a message was said, as people write it: "Sat 5 Dec 14:03" (with the year
    when it is not this year's); "" when the time is not known."""
    day = said_on(message, now)
    return f"{day} {message.at:%H:%M}" if message.at is not None else ""


def said_on(message: Message, now: datetime | None = None) -> str:
    """The day a message was said: "Sat 5 Dec" (with the year when it is not this
    year's); "" when the time is not known."""
    if message.at is None:
        return ""
    at = message.at
    year = f" {at.year}" if at.year != (now or local_now()).year else ""
    return f"{at:%a} {at.day} {at:%b}{year}"
