"""What a conversation remembers: its numbered history and its running summary, and who is
told when they change (the file it is saved in, when the user asked for one)."""

from __future__ import annotations

from typing import Protocol

from memory.history import History, Message
from memory.summary import RunningSummary


class StateListener(Protocol):
    """Told of a conversation's changes as they happen (`assistant.saved.SavesConversation`).

    It hears of its history's changes by following the `History` (`follow`), and of the
    summary's from the state (`summary_changed`).
    """

    def follow(self, history: History) -> None:
        """`history` is the conversation's now: take in its messages not taken yet, and
        hear of each change to it from now on."""

    def summary_changed(self, summary: RunningSummary) -> None: ...

    def let_go(self, history: History, first_seq: int) -> None:
        """A fork's `history`, followed once confirmed, is not the conversation's after all
        (cleared meanwhile): stop following it and forget its messages from `first_seq`."""


class ConversationState:
    """A conversation's history and summary; the summary changes through `set_summary`
    only, so the listener hears of every change."""

    def __init__(self, history: History | None = None,
                 summary: RunningSummary | None = None,
                 listener: StateListener | None = None) -> None:
        self.history = history if history is not None else History()
        self._summary = summary if summary is not None else RunningSummary()
        self.listener = listener
        """Told of every change (None: the conversation lives in memory only)."""
        if listener is not None:
            listener.follow(self.history)

    @property
    def summary(self) -> RunningSummary:
        return self._summary

    def set_summary(self, summary: RunningSummary) -> None:
        changed = summary != self._summary
        self._summary = summary
        if changed and self.listener is not None:
            self.listener.summary_changed(summary)

    def clear(self) -> None:
        """Forget the whole conversation, its summary included."""
        self.history.clear()
        self.set_summary(RunningSummary())

    def fork(self) -> ConversationState:
        """A scratch copy (a speculative reply): the same messages and summary, heard by
        no listener until it is confirmed (`confirm`) or adopted (`adopt`)."""
        return ConversationState(History(self.history.messages, self.history.now),
                                 self._summary)

    def confirm(self, fork: ConversationState) -> None:
        """The fork's reply is this conversation's now, though adopted only once it is
        done: the listener follows the fork's history from here (its messages are saved
        as they come)."""
        if self.listener is not None:
            self.listener.follow(fork.history)

    def adopt(self, fork: ConversationState, forked_from: tuple[Message, ...]) -> bool:
        """Take the fork's history and summary as this conversation's own, the listener
        hearing of what the fork added; False (nothing taken) if this conversation changed
        since `forked_from` (a /clear meanwhile)."""
        if self.history.messages != forked_from:
            if self.listener is not None:
                self.listener.let_go(fork.history,
                                     forked_from[-1].seq + 1 if forked_from else 1)
            return False
        self.history = fork.history
        self.set_summary(fork.summary)
        if self.listener is not None:
            self.listener.follow(self.history)
        return True
