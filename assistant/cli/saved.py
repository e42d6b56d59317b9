"""`--save FILE` and `--resume FILE`: the file a chat or voice conversation is kept in.

The file is checked before anything loads, so a wrong one costs no model loading; a new
file is created once the language model has loaded (a model that fails to load leaves no
empty conversation behind).
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from assistant.conversation import Conversation
from assistant.errors import ConfigError
from assistant.saved import store_of
from memory.history import said_at
from memory.store import ConversationStore, check


@dataclass(frozen=True)
class SaveRequest:
    """Where the conversation is kept, and whether it continues one saved there."""

    path: Path
    resume: bool

    def open(self) -> ConversationStore:
        return (ConversationStore.resume(self.path) if self.resume
                else ConversationStore.create(self.path))


def save_request(args: argparse.Namespace) -> SaveRequest | None:
    """What `--save`/`--resume` ask for, checked without writing anything (None: neither)."""
    save, resume = getattr(args, "save", None), getattr(args, "resume", None)
    if save is not None and resume is not None:
        raise ConfigError("--save starts a new conversation file and --resume continues one; "
                          "pass one of them")
    if save is not None:
        if os.path.lexists(save):  # never overwrite: it may be a conversation, or anything
            raise ConfigError(f"{save} already exists; --resume {save} continues a saved "
                              "conversation, or give --save a new file")
        if not save.absolute().parent.is_dir():
            raise ConfigError(f"cannot create {save}: there is no folder {save.absolute().parent}")
        return SaveRequest(save, resume=False)
    if resume is not None:
        check(resume)  # a damaged, foreign or newer file: one line, and it stays untouched
        return SaveRequest(resume, resume=True)
    return None


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
