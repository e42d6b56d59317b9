"""One error family; every message says what to do next."""


class AssistantError(Exception):
    """Base of Parley's errors. `str()` is the message shown to the user."""

    stage = "assistant"


class ConfigError(AssistantError):
    stage = "config"


class ModelError(AssistantError):
    """The chat model could not be loaded or did not answer."""

    stage = "model"


class PromptError(AssistantError):
    """The prompt cannot be built (a message too large for the context)."""

    stage = "prompt"


class ToolError(AssistantError):
    stage = "tool"
