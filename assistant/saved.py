"""A conversation that keeps itself in a file as it goes (`--save FILE`, `--resume FILE`)."""

from __future__ import annotations

import time
from collections.abc import Callable

from assistant.conversation import Conversation, ReplySettings
from assistant.local.answers import LocalIntents
from assistant.tools import ToolRegistry
from memory.history import History, Message
from memory.store import ConversationStore
from memory.summary import RunningSummary
from models.base import ChatModel


class SavedConversation(Conversation):
    """A `Conversation` whose every change reaches its file as it happens.

    The history tells the store of each message as it is added (the user's before the
    model runs, a reply when it is added), removed or rewritten; the summary is saved
    whenever it changes. A fork (a speculative reply) writes nothing until it is confirmed
    as the turn's reply (`confirm_fork`); from then on its messages are saved as they come.
    Trimming to `max_messages` (voice) limits memory only: the file keeps everything.
    """

    def __init__(self, store: ConversationStore, model: ChatModel,
                 tools: ToolRegistry | None = None, settings: ReplySettings | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 local: LocalIntents | None = None) -> None:
        super().__init__(model, tools, settings, clock, local)
        # What it continues: the newest messages memory keeps, and the summary as it was.
        self.history = History(store.messages(self.settings.max_messages), self.history.now,
                               listener=store)
        self._summary = store.summary()
        self.store = store

    @property  # type: ignore[override]
    def summary(self) -> RunningSummary:
        return self._summary

    @summary.setter
    def summary(self, summary: RunningSummary) -> None:
        changed = summary != getattr(self, "_summary", None)
        self._summary = summary
        store: ConversationStore | None = getattr(self, "store", None)  # None while built
        if changed and store is not None:
            store.save_summary(summary)

    def confirm_fork(self, twin: Conversation) -> None:
        # The user's message is in the fork: saved now, the reply as it is added.
        self.store.follow(twin.history)

    def adopt(self, twin: Conversation, forked_from: tuple[Message, ...]) -> bool:
        if super().adopt(twin, forked_from):
            self.store.follow(self.history)  # whatever the fork added before it was confirmed
            return True
        if twin.history.listener is self.store:
            # Confirmed, but the conversation was cleared meanwhile: the fork's messages
            # are not this conversation's, so they leave the file too.
            twin.history.listener = None
            self.store.removed_from(forked_from[-1].seq + 1 if forked_from else 1)
        return False
