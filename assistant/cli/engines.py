"""Building the conversation and the engines the settings ask for."""

from __future__ import annotations

import argparse
import logging
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from assistant import history_tool
from assistant.cli.saved import save_request
from assistant.conversation import Conversation, ReplySettings
from assistant.errors import ConfigError, ModelError
from assistant.mcp_client.config import SEPARATOR, ServerConfig, merged, read_mcp_file
from assistant.saved import saved_conversation
from assistant.timer_tool import timer_tool
from assistant.timers import Timers
from assistant.tools import ToolRegistry, builtin_tools
from models.base import ChatModel, ModelCapabilities
from models.errors import EngineError

log = logging.getLogger(__name__)

VOICE_HISTORY_MESSAGES = 400
"""A voice conversation keeps at most this many messages, with the results of its tools
(4,000 characters each): a session that lasts all day stays bounded in memory."""


def load_model(args: argparse.Namespace) -> ChatModel:
    """The chat model the settings ask for: a remote server, a GGUF, or the embedded one."""
    if args.llm_url:
        from models.openai_compat import OpenAIChatModel

        return OpenAIChatModel(args.llm_url, args.llm_name, os.environ.get("PARLEY_LLM_API_KEY"),
                               context_size=args.ctx, timeout=args.llm_timeout,
                               tool_choice=args.llm_tool_choice)
    from models.embedded import default_llm
    from models.llama import LlamaChatModel

    started = time.monotonic()
    try:
        model = LlamaChatModel(args.llm_model or default_llm(), context_size=args.ctx,
                               threads=args.threads, batch_threads=args.batch_threads)
    except EngineError as exc:
        raise ModelError(f"Cannot load the language model: {exc}. "
                         "Pass --llm-model PATH.gguf with a valid GGUF file.") from exc
    log.debug("loaded the language model %s in %.2f s", model.name, time.monotonic() - started)
    return model


def check_tool_choice(choice: str | None, tools: ToolRegistry,
                      args: argparse.Namespace | None = None) -> None:
    """A ConfigError unless --llm-tool-choice is a keyword or one of Parley's tools: a name
    the server does not know would fail every request, one Parley never offers would
    silently never be sent."""
    if choice is None:
        return
    from models.openai_compat import TOOL_CHOICE_WORDS

    names = [spec.name for spec in tools.specs()] + [history_tool.NAME]
    server = choice.split(SEPARATOR, 1)[0] if SEPARATOR in choice else None
    if args is not None and server in {s.name for s in configured_servers(args)}:
        return  # an MCP server's tool: listed once its server has started
    if choice not in (*TOOL_CHOICE_WORDS, *names):
        raise ConfigError(f"--llm-tool-choice {choice!r} is neither auto, required, none nor "
                          f"a tool's name ({', '.join(names)})")


def load_local_intents(args: argparse.Namespace):
    """The sentence templates, compiled (about 0.3 s), unless --no-local-intents."""
    if args.no_local_intents:
        return None
    from assistant.local.answers import LocalIntents

    return LocalIntents()


def recent_exchanges(args: argparse.Namespace, capabilities: ModelCapabilities) -> int | None:
    """How many earlier exchanges the model sees word for word (None: all that fit)."""
    chosen = args.model_exchanges
    if chosen == "auto":
        # A model that copies an earlier answer it sees into a new one sees none.
        return 0 if capabilities.repeats_answers_it_sees else None
    return None if chosen == "all" else chosen


def reply_settings(args: argparse.Namespace, max_messages: int | None = None,
                   model: ChatModel | None = None,
                   idle_summaries: bool = False) -> ReplySettings:
    """The limits of a reply the settings ask for, suited to what `model` is known to do
    badly (its capabilities; without it, none: the flags can be checked before it
    loads); a ConfigError says what is wrong. `idle_summaries`: the summary is written
    between turns (there is idle time)."""
    if args.ctx < 512:
        raise ConfigError(f"--ctx {args.ctx} is too small; use at least 512")
    if not 16 <= args.answer_tokens <= args.ctx // 2:
        raise ConfigError(f"--answer-tokens must be between 16 and half of --ctx ({args.ctx // 2})")
    capabilities = model.capabilities if model is not None else ModelCapabilities()
    try:
        return ReplySettings(answer_tokens=args.answer_tokens,
                             max_tool_calls=args.max_tool_calls, max_messages=max_messages,
                             recent_exchanges=recent_exchanges(args, capabilities),
                             tell_date=not capabilities.confused_by_the_date,
                             idle_summaries=idle_summaries)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc


def configured_servers(args: argparse.Namespace) -> list[ServerConfig]:
    """The MCP servers: the config file's [mcp-servers.NAME] tables, then the --mcp file's
    (a server of the same name in both: the --mcp file's)."""
    from_file = read_mcp_file(args.mcp) if args.mcp else []
    return merged(list(getattr(args, "mcp_servers", [])), from_file)


def conversation_tools(timers: Timers) -> ToolRegistry:
    """Parley's own tools, the timer's over `timers`; MCP servers' join them (`running_mcp`)."""
    tools = builtin_tools()
    tools.register(timer_tool(timers))
    return tools


def load_conversation(args: argparse.Namespace, timers: Timers,
                      max_messages: int | None = None,
                      idle_summaries: bool = False,
                      tools: ToolRegistry | None = None) -> Conversation:
    """The conversation with its model, tools (given, or Parley's own with the timer tool
    over `timers`) and local intents; the templates compile while the model loads. With
    `--save`/`--resume` it is kept in that file, which is checked before the model loads."""
    saving = save_request(args)
    reply_settings(args, max_messages)  # a mistake in the flags is said before the model loads
    tools = tools if tools is not None else conversation_tools(timers)
    check_tool_choice(args.llm_tool_choice, tools, args)
    with ThreadPoolExecutor(1, thread_name_prefix="intents") as pool:
        local = pool.submit(load_local_intents, args)
        model = load_model(args)
        settings = reply_settings(args, max_messages, model, idle_summaries)
        if saving is None:
            return Conversation(model, tools, settings, local=local.result())
        return saved_conversation(saving.open(), model, tools, settings, local=local.result())


def load_voice_engines(args: argparse.Namespace, timers: Timers,
                       tools: ToolRegistry | None = None):
    """The voice conversation, speech-to-text and the voice, one after the other.

    Not side by side: loading is CPU work (llama.cpp repacks the weights, onnxruntime
    optimizes the graph), and on two cores three loads in threads took 0.89 s (up to
    1.70 s) against 0.96 s in turn (`benchmarks.soak --only start`).
    """
    # Voice has the time between turns: the summary is written in it, not in replies.
    conversation = load_conversation(args, timers, max_messages=VOICE_HISTORY_MESSAGES,
                                     idle_summaries=True, tools=tools)
    return conversation, load_stt(args), load_tts(args)


def segmenter_settings(args: argparse.Namespace, echo_cancelled: bool = False):
    from audio.segmenter import ECHO_CANCELLED_FLOOR_DBFS, SegmenterSettings

    floor = {"start_floor_dbfs": ECHO_CANCELLED_FLOOR_DBFS} if echo_cancelled else {}
    try:
        return SegmenterSettings(
            aggressiveness=args.vad_aggressiveness, pre_roll_ms=args.pre_roll_ms,
            end_silence_ms=args.end_silence_ms, min_speech_ms=args.min_speech_ms,
            max_utterance_s=args.max_utterance_s, **floor)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc


def build_segmenter(args: argparse.Namespace, echo_cancelled: bool,
                    warn: Callable[[str], None]):
    """The segmenter, with the turn model deciding at pauses (`--end-of-turn smart`); a
    turn model that is missing or cannot load is one line, and the fixed silence decides."""
    from audio.segmenter import Segmenter
    from audio.turn_policy import TurnPolicy, TurnSettings

    settings = segmenter_settings(args, echo_cancelled)
    if args.end_of_turn != "smart":
        return Segmenter(settings)
    check_ms = TurnSettings.check_ms
    if args.turn_max_silence_ms < check_ms:  # said with the flag, not TurnSettings' names
        raise ConfigError(f"--turn-max-silence-ms {args.turn_max_silence_ms} is shorter than "
                          f"the {check_ms} ms pause at which the turn model is asked; use at "
                          f"least {check_ms}")
    try:
        turn_settings = TurnSettings(threshold=args.turn_threshold,
                                     max_silence_ms=args.turn_max_silence_ms)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    from models.smart_turn import TurnModelMissing, load_in_background

    try:
        score = load_in_background()
    except TurnModelMissing as exc:
        warn(f"{exc}. Turns end after {settings.end_silence_ms} ms of silence instead "
             "(--end-of-turn silence).")
        return Segmenter(settings)
    return Segmenter(settings, turn=TurnPolicy(score, turn_settings, on_failure=warn))


def voice_settings(args: argparse.Namespace, push_to_talk: bool = False,
                   echo_cancelled: bool = False):
    """How the loop listens; barge-in is on by default when the echo is cancelled."""
    from assistant.voice.turns import VoiceSettings

    barge_in = echo_cancelled if args.barge_in is None else args.barge_in
    try:
        return VoiceSettings(push_to_talk=push_to_talk, barge_in=barge_in,
                             echo_tail_ms=args.echo_tail_ms, follow_up_s=args.follow_up_s,
                             live_transcript_s=args.live_transcript_s)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc


def wake_word_detector(args: argparse.Namespace, echo_cancelled: bool = False):
    """The wake word detector `--wake-word` asks for (None without it); an unknown name is
    a WakeWordError listing the names. Over Parley's cancelled voice it takes less."""
    if not args.wake_word:
        return None
    from audio.wakeword import OVER_OWN_VOICE_CUTOFF, WakeWordDetector

    return WakeWordDetector(args.wake_word,
                            OVER_OWN_VOICE_CUTOFF if echo_cancelled else None)


def microphone_input(args: argparse.Namespace, far_end, say, room=None):
    """What cleans the microphone's audio (`--echo-cancel`) and adds a simulated room's echo
    (replay's `--echo`); None when neither is asked for. Echo cancellation that cannot start
    is said in one line (`say`), and Parley listens half duplex."""
    from audio.echo import EchoCanceller, EchoCancelUnavailable, MicrophoneInput

    canceller = None
    if args.echo_cancel:
        try:
            canceller = EchoCanceller()
        except EchoCancelUnavailable as exc:
            say(f"Echo cancellation cannot start: {exc}. Parley stops listening while it "
                "speaks (half duplex).")
    if canceller is None and room is None:
        return None
    return MicrophoneInput(far_end, canceller, room)


def load_stt(args: argparse.Namespace):
    """The speech-to-text engine the settings ask for."""
    from models.whisper_stt import WhisperSpeechToText

    started = time.monotonic()
    try:
        stt = WhisperSpeechToText(args.stt_model, threads=args.stt_threads)
    except EngineError as exc:
        raise ModelError(str(exc)) from exc
    log.debug("loaded speech-to-text in %.2f s", time.monotonic() - started)
    return stt


def load_tts(args: argparse.Namespace):
    """The voice the settings ask for."""
    from models.piper_tts import PiperTextToSpeech

    started = time.monotonic()
    try:
        tts = PiperTextToSpeech(args.voice, threads=args.tts_threads)
    except EngineError as exc:
        raise ModelError(str(exc)) from exc
    log.debug("loaded the voice in %.2f s", time.monotonic() - started)
    return tts


def device(spec: str | None) -> str | int | None:
    """A device setting: an index, or a part of a name."""
    return int(spec) if spec is not None and spec.isdigit() else spec

