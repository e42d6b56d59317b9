"""The user-facing errors; every message says what to do next.

Each layer has one root: `models.errors.EngineError` (an engine could not load or
answer), `audio.errors.AudioError` (a device or an audio file), `memory.store.StoreError`
(a conversation file for --save or --resume), and `AssistantError` here. The command line
shows any of them as one line; anything else is a bug, logged with its traceback.
"""

from assistant.events import Stage
from audio.errors import AudioError
from memory.store import StoreError
from models.errors import EngineError


class AssistantError(Exception):
    """Base of Parley's own errors. `str()` is the message shown to the user."""

    stage: Stage = Stage.INTERNAL


class ConfigError(AssistantError):
    """A setting (flag, environment variable, config file) is invalid."""

    stage = Stage.CONFIG


class ModelError(AssistantError):
    """A model (language or speech) could not be loaded."""

    stage = Stage.MODEL


USER_ERRORS: tuple[type[Exception], ...] = (AssistantError, AudioError, EngineError,
                                             StoreError)
"""What the command line reports as one clear line, without a traceback."""
