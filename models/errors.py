"""The engines' one error root: whatever fails in `models/` is an `EngineError`.

The core turns it into a clear message for the user; anything else that escapes an
engine is a bug, logged with its traceback.
"""


class EngineError(RuntimeError):
    """An engine could not be loaded, could not be reached, or failed; the message says why."""


class ContextExceeded(EngineError):
    """The prompt leaves no room in the model's context for an answer."""
