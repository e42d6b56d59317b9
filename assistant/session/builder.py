"""One session from typed settings, for every front end: the timers, Parley's tools and
the MCP servers', the conversation, and for voice the engines and the loop with its input
and output, made in the order they need each other.

The MCP servers start first, so that they come up while the models load. A front end
adds only what is its own: a terminal, a replay's session file, a server's clients.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from assistant.conversation import Conversation
from assistant.session import engines
from assistant.session.engines import Loaded
from assistant.session.mcp import running_mcp
from assistant.session.settings import Settings
from assistant.timers import Timers
from assistant.tools import ToolRegistry

if TYPE_CHECKING:
    from assistant.events import Event
    from assistant.mcp_client.tools import McpTools
    from assistant.voice.approval import AnsweredBy
    from assistant.voice.loop import VoiceLoop
    from assistant.voice.turns import VoiceSettings
    from audio.echo import FarEnd, MicrophoneInput, RoomEcho
    from audio.playback import AudioOutput
    from audio.segmenter import Segmenter
    from models.speech import SpeechToText, TextToSpeech

Warn = Callable[[str], None]
"""Says a problem that does not stop the session in one line (a server that failed)."""


@dataclass
class Session:
    """A conversation with its timers, its tools and the MCP servers that add to them."""

    settings: Settings
    conversation: Conversation
    timers: Timers
    tools: ToolRegistry
    mcp: McpTools | None


@dataclass
class VoiceSession(Session):
    """A session that is heard and answers aloud."""

    stt: SpeechToText
    tts: TextToSpeech
    loop: VoiceLoop
    microphone: MicrophoneInput | None
    """What cleans the microphone's audio (echo cancellation, a simulated room), if any:
    the front end feeds the loop through it."""
    output: AudioOutput


@contextmanager
def chat_session(settings: Settings, warn: Warn, *, idle_summaries: bool = False,
                 clock: Callable[[], float] = time.monotonic,
                 loaded: Loaded | None = None) -> Iterator[Session]:
    """A typed conversation. `idle_summaries`: the summary is written between turns (the
    user types at a terminal), not inside the reply that needs it. `loaded`: a model loaded
    once for many sessions (a benchmark's), used instead of loading one."""
    timers = Timers(clock)
    tools = engines.conversation_tools(timers)
    try:
        with running_mcp(settings.tools, tools, warn) as mcp:
            conversation = engines.load_conversation(settings, timers,
                                                     idle_summaries=idle_summaries,
                                                     tools=tools,
                                                     model=loaded.model if loaded else None)
            yield Session(settings, conversation, timers, tools, mcp)
    finally:
        timers.close()


@contextmanager
def voice_session(settings: Settings, output: Callable[[FarEnd | None], AudioOutput],
                  warn: Warn, *, clock: Callable[[], float] = time.monotonic,
                  room: RoomEcho | None = None,
                  render: Callable[[Event], None] | None = None,
                  keep_records: bool = True, keep_audio: bool = False,
                  adjust: Callable[[VoiceSettings, bool], VoiceSettings] = (
                      lambda chosen, in_real_time: chosen),
                  loading: Callable[[], AbstractContextManager[Any]] = nullcontext,
                  answered_by: AnsweredBy | None = None,
                  loaded: Loaded | None = None, segmenter: Segmenter | None = None,
                  idle_summaries: bool = True,
                  show_all_between_turns: bool = False) -> Iterator[VoiceSession]:
    """A spoken conversation. `output(far_end)` makes what plays the replies (given where
    the echo canceller hears them, if it runs); `room` adds a simulated room's echo to the
    input (replay's `--echo`); `adjust(settings, in_real_time)` changes how the loop
    listens (replay rings a timer once), told whether the input is cleaned or echoed (it
    then comes in real time); `loading` wraps the models' loading (a line on screen, a
    Ctrl-C held until they are loaded). A tool that asks first asks aloud, in the reply, and
    the user's answer is heard (or `answered_by` gives it: a replay's session file).
    `show_all_between_turns`: `render` sees the summary begin as well as its outcome (a web
    page shows it being written).

    For a benchmark: `loaded` gives engines loaded once for many sessions (those it gives
    are not loaded); `segmenter` is used as it is instead of the one the listening settings
    ask for (a turn model timed call by call); `idle_summaries=False` writes the summary
    inside the reply that needs it (a voice session has the time between turns, and
    writes it there)."""
    from assistant.voice.loop import VoiceLoop
    from audio.echo import FarEnd

    listening = settings.listening
    far_end = FarEnd()
    microphone = engines.microphone_input(listening, far_end, warn, room)
    echo_cancelled = microphone is not None and microphone.canceller is not None
    voice = adjust(engines.voice_settings(listening, echo_cancelled), microphone is not None)
    wake_word = engines.wake_word_detector(listening, echo_cancelled)
    if segmenter is None:
        segmenter = engines.build_segmenter(listening, echo_cancelled, warn)
    timers = Timers(clock)
    tools = engines.conversation_tools(timers)
    loop = None
    try:
        with running_mcp(settings.tools, tools, warn) as mcp:
            with loading():
                conversation, stt, tts = engines.load_voice_engines(
                    settings, timers, tools, loaded or Loaded(), idle_summaries)
            played = output(far_end if microphone is not None else None)
            loop = VoiceLoop(conversation, stt, tts, played, segmenter, voice, render,
                             clock=clock, keep_audio=keep_audio, keep_records=keep_records,
                             wake_word=wake_word, timers=timers, answered_by=answered_by,
                             show_all_between_turns=show_all_between_turns)
            yield VoiceSession(settings, conversation, timers, tools, mcp, stt, tts, loop,
                               microphone, played)
    finally:
        timers.close()
        if loop is not None:
            loop.close()
