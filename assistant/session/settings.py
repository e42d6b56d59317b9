"""Parley's settings as typed values, one dataclass per concern.

The command line fills them from flags, `PARLEY_*` variables and the config file
(`assistant.cli.settings`, whose table takes its defaults from here); a benchmark, a test
or another front end makes them directly. Each field is named as its flag is
(`--stt-threads` is `SpeechSettings.stt_threads`). The values are checked where they are
used (`assistant.session.engines`), so that a mistake is said with its flag's name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from assistant.mcp_client.config import ServerConfig


@dataclass(frozen=True)
class ModelSettings:
    """The language model and the limits of a reply."""

    llm_model: Path | None = None
    """A GGUF file; None: the embedded model (unless `llm_url`)."""
    llm_url: str | None = None
    """An OpenAI-compatible server instead of a local model."""
    llm_name: str = "default"
    llm_tool_choice: str | None = None
    llm_timeout: float = 120.0
    ctx: int = 8192
    threads: int | None = None
    batch_threads: int | None = None
    answer_tokens: int = 1024
    max_tool_calls: int = 4
    model_exchanges: int | str = "auto"
    """Earlier exchanges the model sees word for word: a number, "all" or "auto"."""
    no_local_intents: bool = False


@dataclass(frozen=True)
class ToolSettings:
    """The MCP servers whose tools join Parley's own."""

    mcp: Path | None = None
    """A file of servers (`--mcp`)."""
    mcp_servers: tuple[ServerConfig, ...] = ()
    """The config file's `[mcp-servers.NAME]` tables."""
    server_stderr: bool = False
    """Show what the servers write to stderr (`--debug`)."""


@dataclass(frozen=True)
class SavingSettings:
    """Where the conversation is kept: nothing is written unless one is given."""

    save: Path | None = None
    resume: Path | None = None


@dataclass(frozen=True)
class SpeechSettings:
    """Speech-to-text and the voice."""

    stt_model: Path | None = None
    voice: Path | None = None
    stt_threads: int = 2
    tts_threads: int = 2


@dataclass(frozen=True)
class ListeningSettings:
    """How the microphone is heard: devices, the segmenter, the end of a turn, the wake word
    and the echo."""

    push_to_talk: bool = False
    input_device: str | None = None
    output_device: str | None = None
    vad_aggressiveness: int = 2
    pre_roll_ms: int = 300
    end_of_turn: str = "smart"
    turn_threshold: float = 0.5
    turn_max_silence_ms: int = 1500
    end_silence_ms: int = 700
    min_speech_ms: int = 250
    max_utterance_s: float = 20.0
    wake_word: str | None = None
    follow_up_s: float = 6.0
    echo_cancel: bool = False
    barge_in: bool | None = None
    """None: on when the echo is cancelled."""
    live_transcript_s: float = 1.0
    echo_tail_ms: int = 300


@dataclass(frozen=True)
class ServeSettings:
    """`parley serve`'s address and how many conversations it keeps, for how long."""

    uri: str = "tcp://127.0.0.1:10700"
    max_conversations: int = 32
    conversation_minutes: float = 30.0


@dataclass(frozen=True)
class Settings:
    """Everything a session is built from (`assistant.session.builder`)."""

    model: ModelSettings = field(default_factory=ModelSettings)
    tools: ToolSettings = field(default_factory=ToolSettings)
    saving: SavingSettings = field(default_factory=SavingSettings)
    speech: SpeechSettings = field(default_factory=SpeechSettings)
    listening: ListeningSettings = field(default_factory=ListeningSettings)
    serve: ServeSettings = field(default_factory=ServeSettings)
    debug: bool = False


PARTS: dict[str, type] = {"model": ModelSettings, "tools": ToolSettings,
                          "saving": SavingSettings, "speech": SpeechSettings,
                          "listening": ListeningSettings, "serve": ServeSettings}
"""The settings' parts by their field in `Settings`."""


def default_of(name: str) -> object:
    """The default of the setting called `name` (as its flag is, `stt_threads`)."""
    for part in (*PARTS.values(), Settings):
        if name in part.__dataclass_fields__:
            return part.__dataclass_fields__[name].default
    raise KeyError(name)
