"""A conversation's state (`memory.conversation_state`): its listener hears of each summary
change, follows the history it has, and hears nothing of a fork until it is the
conversation's."""

from __future__ import annotations

from memory.conversation_state import ConversationState
from memory.history import History
from memory.summary import RunningSummary

ONE = RunningSummary(("- (#1–#2) The user said one.",), 2)


class Recording:
    """A listener that notes what it is told."""

    def __init__(self) -> None:
        self.told: list[tuple] = []

    def follow(self, history: History) -> None:
        self.told.append(("follow", history))

    def summary_changed(self, summary: RunningSummary) -> None:
        self.told.append(("summary", summary))

    def let_go(self, history: History, first_seq: int) -> None:
        self.told.append(("let_go", history, first_seq))


def started() -> tuple[ConversationState, Recording]:
    listener = Recording()
    state = ConversationState(listener=listener)
    state.history.add("user", "one")
    state.history.add("assistant", "OK.")
    listener.told.clear()
    return state, listener


def test_the_listener_follows_the_history_from_the_start_and_hears_each_summary_change():
    listener = Recording()
    state = ConversationState(listener=listener)
    assert listener.told == [("follow", state.history)]
    state.set_summary(ONE)
    state.set_summary(ONE)  # the same again: nothing changed, nothing to write
    assert listener.told[1:] == [("summary", ONE)] and state.summary == ONE
    state.clear()
    assert listener.told[-1] == ("summary", RunningSummary())
    assert state.summary == RunningSummary() and not state.history.messages


def test_a_fork_is_heard_of_only_once_confirmed_or_adopted():
    state, listener = started()
    forked_from = state.history.messages
    fork = state.fork()
    assert fork.listener is None and fork.history is not state.history
    fork.history.add("user", "two")
    fork.set_summary(ONE)
    assert listener.told == []  # a speculative reply: maybe never the conversation's
    state.confirm(fork)
    assert listener.told == [("follow", fork.history)]
    assert state.adopt(fork, forked_from)
    assert state.history is fork.history and state.summary == ONE
    assert listener.told[1:] == [("summary", ONE), ("follow", fork.history)]


def test_a_fork_of_a_conversation_cleared_meanwhile_is_let_go_from_its_first_message():
    state, listener = started()
    forked_from = state.history.messages
    fork = state.fork()
    fork.history.add("user", "two")
    state.clear()
    listener.told.clear()
    assert not state.adopt(fork, forked_from)
    assert listener.told == [("let_go", fork.history, 3)]
    assert state.history.messages == () and state.summary == RunningSummary()
