"""Building the conversation and the engines that typed settings ask for
(`assistant.session.settings`).

A mistake in a setting is a ConfigError that names its flag, as the user typed it."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from assistant import history_tool
from assistant.conversation import Conversation, ReplySettings
from assistant.errors import ConfigError, ModelError
from assistant.mcp_client.config import SEPARATOR, ServerConfig, merged, read_mcp_file
from assistant.saved import saved_conversation
from assistant.session.saving import save_request
from assistant.session.settings import (
    ListeningSettings,
    ModelSettings,
    Settings,
    SpeechSettings,
    ToolSettings,
)
from assistant.timer_tool import timer_tool
from assistant.timers import Timers
from assistant.tools import ToolRegistry, builtin_tools
from models.base import ChatModel, ModelCapabilities
from models.errors import EngineError

if TYPE_CHECKING:
    from models.speech import SpeechToText, TextToSpeech

log = logging.getLogger(__name__)
T = TypeVar("T")

VOICE_HISTORY_MESSAGES = 400
"""A voice conversation keeps at most this many messages, with the results of its tools
(4,000 characters each): a session that lasts all day stays bounded in memory."""


@dataclass(frozen=True)
class Loaded:
    """Engines already loaded, for sessions that share them (a benchmark's runs, each a
    fresh session on the same models): what is given is not loaded again, what is not
    given is loaded as the settings say."""

    model: ChatModel | None = None
    stt: SpeechToText | None = None
    tts: TextToSpeech | None = None


def load_model(settings: ModelSettings) -> ChatModel:
    """The chat model the settings ask for: a remote server, a GGUF, or the embedded one."""
    if settings.llm_url:
        from models.openai_compat import OpenAIChatModel

        return OpenAIChatModel(settings.llm_url, settings.llm_name,
                               os.environ.get("PARLEY_LLM_API_KEY"), context_size=settings.ctx,
                               timeout=settings.llm_timeout,
                               tool_choice=settings.llm_tool_choice)
    from models.embedded import default_llm
    from models.llama import LlamaChatModel

    started = time.monotonic()
    try:
        model = LlamaChatModel(settings.llm_model or default_llm(), context_size=settings.ctx,
                               threads=settings.threads, batch_threads=settings.batch_threads)
    except EngineError as exc:
        raise ModelError(f"Cannot load the language model: {exc}. "
                         "Pass --llm-model PATH.gguf with a valid GGUF file.") from exc
    log.debug("loaded the language model %s in %.2f s", model.name, time.monotonic() - started)
    return model


def check_tool_choice(choice: str | None, tools: ToolRegistry,
                      servers: ToolSettings | None = None) -> None:
    """A ConfigError unless --llm-tool-choice is a keyword or one of Parley's tools: a name
    the server does not know would fail every request, one Parley never offers would
    silently never be sent."""
    if choice is None:
        return
    from models.openai_compat import TOOL_CHOICE_WORDS

    names = [spec.name for spec in tools.specs()] + [history_tool.NAME]
    server = choice.split(SEPARATOR, 1)[0] if SEPARATOR in choice else None
    if servers is not None and server in {s.name for s in configured_servers(servers)}:
        return  # an MCP server's tool: listed once its server has started
    if choice not in (*TOOL_CHOICE_WORDS, *names):
        raise ConfigError(f"--llm-tool-choice {choice!r} is neither auto, required, none nor "
                          f"a tool's name ({', '.join(names)})")


def load_local_intents(settings: ModelSettings):
    """The sentence templates, compiled (about 0.3 s), unless --no-local-intents."""
    if settings.no_local_intents:
        return None
    from assistant.local.answers import LocalIntents

    return LocalIntents()


def recent_exchanges(settings: ModelSettings, capabilities: ModelCapabilities) -> int | None:
    """How many earlier exchanges the model sees word for word (None: all that fit)."""
    chosen = settings.model_exchanges
    if chosen == "auto":
        # A model that copies an earlier answer it sees into a new one sees none.
        return 0 if capabilities.repeats_answers_it_sees else None
    return None if chosen == "all" else chosen


def reply_settings(settings: ModelSettings, max_messages: int | None = None,
                   model: ChatModel | None = None,
                   idle_summaries: bool = False) -> ReplySettings:
    """The limits of a reply the settings ask for, suited to what `model` is known to do
    badly (its capabilities; without it, none: the flags can be checked before it
    loads); a ConfigError says what is wrong. `idle_summaries`: the summary is written
    between turns (there is idle time)."""
    if settings.ctx < 512:
        raise ConfigError(f"--ctx {settings.ctx} is too small; use at least 512")
    if not 16 <= settings.answer_tokens <= settings.ctx // 2:
        raise ConfigError("--answer-tokens must be between 16 and half of --ctx "
                          f"({settings.ctx // 2})")
    capabilities = model.capabilities if model is not None else ModelCapabilities()
    try:
        return ReplySettings(answer_tokens=settings.answer_tokens,
                             max_tool_calls=settings.max_tool_calls, max_messages=max_messages,
                             recent_exchanges=recent_exchanges(settings, capabilities),
                             tell_date=not capabilities.confused_by_the_date,
                             idle_summaries=idle_summaries)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc


def configured_servers(settings: ToolSettings) -> list[ServerConfig]:
    """The MCP servers: the config file's [mcp-servers.NAME] tables, then the --mcp file's
    (a server of the same name in both: the --mcp file's)."""
    from_file = read_mcp_file(settings.mcp) if settings.mcp else []
    return merged(list(settings.mcp_servers), from_file)


def conversation_tools(timers: Timers) -> ToolRegistry:
    """Parley's own tools, the timer's over `timers`; MCP servers' join them (`running_mcp`)."""
    tools = builtin_tools()
    tools.register(timer_tool(timers))
    return tools


def load_conversation(settings: Settings, timers: Timers,
                      max_messages: int | None = None,
                      idle_summaries: bool = False,
                      tools: ToolRegistry | None = None,
                      model: ChatModel | None = None) -> Conversation:
    """The conversation with its model (given, or loaded as the settings say), tools (given,
    or Parley's own with the timer tool over `timers`) and local intents; the templates
    compile while the model loads. With `--save`/`--resume` it is kept in that file, which
    is checked before the model loads."""
    saving = save_request(settings.saving)
    model_settings = settings.model
    reply_settings(model_settings, max_messages)  # a mistake is said before the model loads
    tools = tools if tools is not None else conversation_tools(timers)
    check_tool_choice(model_settings.llm_tool_choice, tools, settings.tools)
    with ThreadPoolExecutor(1, thread_name_prefix="intents") as pool:
        local = pool.submit(load_local_intents, model_settings)
        model = model if model is not None else load_model(model_settings)
        limits = reply_settings(model_settings, max_messages, model, idle_summaries)
        if saving is None:
            return Conversation(model, tools, limits, local=local.result())
        return saved_conversation(saving.open(), model, tools, limits, local=local.result())


def load_voice_engines(settings: Settings, timers: Timers,
                       tools: ToolRegistry | None = None, loaded: Loaded = Loaded(),
                       idle_summaries: bool = True):
    """The voice conversation, speech-to-text and the voice, one after the other (those
    `loaded` gives are not loaded again).

    Not side by side: loading is CPU work (llama.cpp repacks the weights, onnxruntime
    optimizes the graph), and on two cores three loads in threads took 0.89 s (up to
    1.70 s) against 0.96 s in turn (`benchmarks.soak --only start`).
    """
    conversation = load_conversation(settings, timers, max_messages=VOICE_HISTORY_MESSAGES,
                                     idle_summaries=idle_summaries, tools=tools,
                                     model=loaded.model)
    stt = loaded.stt if loaded.stt is not None else load_stt(settings.speech)
    tts = loaded.tts if loaded.tts is not None else load_tts(settings.speech)
    return conversation, stt, tts


def segmenter_settings(settings: ListeningSettings, echo_cancelled: bool = False):
    from audio.segmenter import ECHO_CANCELLED_FLOOR_DBFS, SegmenterSettings

    floor = {"start_floor_dbfs": ECHO_CANCELLED_FLOOR_DBFS} if echo_cancelled else {}
    try:
        return SegmenterSettings(
            aggressiveness=settings.vad_aggressiveness, pre_roll_ms=settings.pre_roll_ms,
            end_silence_ms=settings.end_silence_ms, min_speech_ms=settings.min_speech_ms,
            max_utterance_s=settings.max_utterance_s, **floor)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc


def build_segmenter(settings: ListeningSettings, echo_cancelled: bool,
                    warn: Callable[[str], None]):
    """The segmenter, with the turn model deciding at pauses (`--end-of-turn smart`); a
    turn model that is missing or cannot load is one line, and the fixed silence decides."""
    from audio.segmenter import Segmenter
    from audio.turn_policy import TurnPolicy, TurnSettings

    segmenting = segmenter_settings(settings, echo_cancelled)
    if settings.end_of_turn != "smart":
        return Segmenter(segmenting)
    check_ms = TurnSettings.check_ms
    if settings.turn_max_silence_ms < check_ms:  # said with the flag, not TurnSettings' names
        raise ConfigError(f"--turn-max-silence-ms {settings.turn_max_silence_ms} is shorter than "
                          f"the {check_ms} ms pause at which the turn model is asked; use at "
                          f"least {check_ms}")
    try:
        turn_settings = TurnSettings(threshold=settings.turn_threshold,
                                     max_silence_ms=settings.turn_max_silence_ms)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    from models.smart_turn import TurnModelMissing, load_in_background

    try:
        score = load_in_background()
    except TurnModelMissing as exc:
        warn(f"{exc}. Turns end after {segmenting.end_silence_ms} ms of silence instead "
             "(--end-of-turn silence).")
        return Segmenter(segmenting)
    return Segmenter(segmenting, turn=TurnPolicy(score, turn_settings, on_failure=warn))


def voice_settings(settings: ListeningSettings, echo_cancelled: bool = False):
    """How the loop listens; barge-in is on by default when the echo is cancelled."""
    from assistant.voice.turns import VoiceSettings

    barge_in = echo_cancelled if settings.barge_in is None else settings.barge_in
    try:
        return VoiceSettings(push_to_talk=settings.push_to_talk, barge_in=barge_in,
                             echo_tail_ms=settings.echo_tail_ms, follow_up_s=settings.follow_up_s,
                             live_transcript_s=settings.live_transcript_s)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc


def wake_word_detector(settings: ListeningSettings, echo_cancelled: bool = False):
    """The wake word detector `--wake-word` asks for (None without it); an unknown name is
    a WakeWordError listing the names. Over Parley's cancelled voice it takes less."""
    if not settings.wake_word:
        return None
    from audio.wakeword import OVER_OWN_VOICE_CUTOFF, WakeWordDetector

    return WakeWordDetector(settings.wake_word,
                            OVER_OWN_VOICE_CUTOFF if echo_cancelled else None)


def microphone_input(settings: ListeningSettings, far_end, say, room=None):
    """What cleans the microphone's audio (`--echo-cancel`) and adds a simulated room's echo
    (replay's `--echo`); None when neither is asked for. Echo cancellation that cannot start
    is said in one line (`say`), and Parley listens half duplex."""
    from audio.echo import EchoCanceller, EchoCancelUnavailable, MicrophoneInput

    canceller = None
    if settings.echo_cancel:
        try:
            canceller = EchoCanceller()
        except EchoCancelUnavailable as exc:
            say(f"Echo cancellation cannot start: {exc}. Parley stops listening while it "
                "speaks (half duplex).")
    if canceller is None and room is None:
        return None
    return MicrophoneInput(far_end, canceller, room)


def load_stt(settings: SpeechSettings):
    """The speech-to-text engine the settings ask for."""
    from models.whisper_stt import WhisperSpeechToText

    return _speech_engine("speech-to-text", lambda: WhisperSpeechToText(
        settings.stt_model, threads=settings.stt_threads))


def load_tts(settings: SpeechSettings):
    """The voice the settings ask for."""
    from models.piper_tts import PiperTextToSpeech

    return _speech_engine("the voice", lambda: PiperTextToSpeech(
        settings.voice, threads=settings.tts_threads))


def _speech_engine(what: str, load: Callable[[], T]) -> T:
    """`load()`, timed in the debug log; an engine that cannot load is a ModelError, whose
    message already says which flag to pass."""
    started = time.monotonic()
    try:
        engine = load()
    except EngineError as exc:
        raise ModelError(str(exc)) from exc
    log.debug("loaded %s in %.2f s", what, time.monotonic() - started)
    return engine
