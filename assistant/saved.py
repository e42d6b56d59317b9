"""A conversation that keeps itself in a file as it goes (`--save FILE`, `--resume FILE`)."""

from __future__ import annotations

import time
from collections.abc import Callable

from assistant.conversation import Conversation, ReplySettings
from assistant.local.answers import LocalIntents
from assistant.tools import ToolRegistry
from memory.conversation_state import ConversationState
from memory.history import History
from memory.store import ConversationStore
from memory.summary import RunningSummary
from models.base import ChatModel


class SavesConversation:
    """The listener that keeps a conversation's file up to date, every change as it happens.

    The store follows the history: each message is written as it is added (the user's
    before the model runs, a reply when it is added), removed or rewritten; the summary is
    written whenever it changes. A fork (a speculative reply) writes nothing until it is
    confirmed as the turn's reply; from then on its messages are saved as they come.
    Trimming to `max_messages` (voice) limits memory only: the file keeps everything.
    """

    def __init__(self, store: ConversationStore) -> None:
        self.store = store

    def follow(self, history: History) -> None:
        self.store.follow(history)

    def summary_changed(self, summary: RunningSummary) -> None:
        self.store.save_summary(summary)

    def let_go(self, history: History, first_seq: int) -> None:
        if history.listener is self.store:
            # Confirmed, but the conversation was cleared meanwhile: the fork's messages
            # are not this conversation's, so they leave the file too.
            history.listener = None
            self.store.removed_from(first_seq)


def saved_conversation(store: ConversationStore, model: ChatModel,
                       tools: ToolRegistry | None = None,
                       settings: ReplySettings | None = None,
                       clock: Callable[[], float] = time.monotonic,
                       local: LocalIntents | None = None) -> Conversation:
    """A `Conversation` kept in `store`'s file, continuing what it holds: the newest
    messages memory keeps, and the summary as it was."""
    settings = settings or ReplySettings()
    state = ConversationState(History(store.messages(settings.max_messages)), store.summary(),
                              SavesConversation(store))
    return Conversation(model, tools, settings, clock, local, state)


def store_of(conversation: Conversation) -> ConversationStore | None:
    """The file `conversation` is kept in (None: it lives in memory only)."""
    listener = conversation.state.listener
    return listener.store if isinstance(listener, SavesConversation) else None
