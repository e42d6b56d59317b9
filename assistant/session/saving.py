"""`--save FILE` and `--resume FILE`: the file a chat or voice conversation is kept in.

The file is checked before anything loads, so a wrong one costs no model loading; a new
file is created once the language model has loaded (a model that fails to load leaves no
empty conversation behind).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from assistant.errors import ConfigError
from assistant.session.settings import SavingSettings
from memory.store import ConversationStore, check


@dataclass(frozen=True)
class SaveRequest:
    """Where the conversation is kept, and whether it continues one saved there."""

    path: Path
    resume: bool

    def open(self) -> ConversationStore:
        return (ConversationStore.resume(self.path) if self.resume
                else ConversationStore.create(self.path))


def save_request(settings: SavingSettings) -> SaveRequest | None:
    """What `--save`/`--resume` ask for, checked without writing anything (None: neither)."""
    save, resume = settings.save, settings.resume
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
