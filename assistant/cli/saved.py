"""`--save FILE` and `--resume FILE`: the file a chat or voice conversation is kept in.

The file is checked before anything loads, so a wrong one costs no model loading; a new
file is created once the language model has loaded (a model that fails to load leaves no
empty conversation behind).
"""

from __future__ import annotations

from rich.console import Console

from assistant.conversation import Conversation
from assistant.saved import store_of
from memory.history import said_at


def announce(conversation: Conversation, console: Console) -> None:
    """Say which file the conversation is kept in (and what it continues); a failure to
    save later is shown on the same console, once."""
    store = store_of(conversation)
    if store is None:
        return
    # On a line of its own: it may come while a reply's text is being shown.
    store.on_error = lambda line: console.print(f"\n! {line}", style="bold red", soft_wrap=True)
    total = store.count()
    if not total:
        console.print(f"· Saving this conversation to {store.path}.", style="dim",
                      soft_wrap=True)
        return
    kept = len(conversation.history)
    loaded = f" (the newest {kept} in memory)" if kept < total else ""
    last = said_at(conversation.history.messages[-1]) if kept else ""
    when = f", the last {last}" if last else ""
    plural = "s" if total != 1 else ""
    console.print(f"· Resumed {store.path}: {total} message{plural}{loaded}{when}.",
                  style="dim", soft_wrap=True)


def close_saved(conversation: Conversation) -> None:
    """Close the conversation's file, if it has one (its -wal folds back into it)."""
    if (store := store_of(conversation)) is not None:
        store.close()
