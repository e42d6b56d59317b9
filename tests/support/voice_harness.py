"""`run_turns`: a voice loop on stand-in engines, given turns, run to the end (as Pipecat's
`run_test` runs a pipeline on frames).

A test says what the user says or types and what the model answers; it gets back the
records, the events on screen, and the engines to look into, the loop already closed:

    run = run_turns(["What time is it?", clip(1.0, HELLO)], replies=["Noon.", "Hi."])
    assert run.replies == ["Noon.", "Hi."]

Audio turns go through the real segmenter and VAD, in 30 ms frames, on a clock that
counts the microphone's samples (`MicrophoneClock`): timings are the same on any machine.
Each turn waits until the one before was answered and spoken, and the work between turns
after it done (as replay `--fast` does), so every run gives the same records.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from assistant.conversation import Conversation, ReplySettings
from assistant.events import Event
from assistant.tools import ToolRegistry, builtin_tools
from assistant.voice.loop import VoiceLoop
from assistant.voice.turns import TurnRecord, VoiceSettings
from audio.memory_out import MemorySpeaker
from audio.segmenter import Segmenter
from models.speech import SpeechToText, TextToSpeech
from tests.support.clips import silence
from tests.support.clocks import HUNG_S, MicrophoneClock
from tests.support.fakes import ScriptedChatModel, ScriptedSpeechToText, ToneTextToSpeech

TRAILING_SILENCE_S = 1.5
"""Fed after each clip, so the segmenter hears the end of speech (as replay does)."""

Turn = str | np.ndarray
"""A typed line, or a clip of 16 kHz mono int16 audio the user says."""


@dataclass
class VoiceRun:
    """What a voice loop made of the turns it was given."""

    loop: VoiceLoop
    model: ScriptedChatModel
    stt: SpeechToText
    tts: TextToSpeech
    speaker: MemorySpeaker
    shown: list[Event] = field(default_factory=list)
    """Every event rendered on screen, in order."""

    @property
    def records(self) -> list[TurnRecord]:
        return self.loop.records

    @property
    def conversation(self) -> Conversation:
        return self.loop.conversation

    @property
    def heard(self) -> list[str]:
        return [record.heard for record in self.records]

    @property
    def replies(self) -> list[str]:
        return [record.reply for record in self.records]

    def event_types(self, record: TurnRecord) -> list[str]:
        return [timed.event.event_type for timed in record.events]


def run_turns(
    turns: Sequence[Turn],
    replies: Sequence[str] = (),
    model: ScriptedChatModel | None = None,
    script: dict[int, str] | None = None,
    stt: SpeechToText | None = None,
    tts: TextToSpeech | None = None,
    settings: VoiceSettings | None = None,
    reply_settings: ReplySettings | None = None,
    tools: ToolRegistry | None = None,
    segmenter: Segmenter | None = None,
) -> VoiceRun:
    """Build a voice loop, feed it `turns` one after another, wait, close it.

    `replies` are queued on the scripted `model`; `script` says what each clip says (by
    its peak amplitude, see `ScriptedSpeechToText`). The conversation is built as voice
    mode builds it (the summary written between turns) unless `reply_settings` says
    otherwise.
    """
    model = model or ScriptedChatModel()
    model.enqueue(*replies)
    clock = MicrophoneClock()
    stt = stt or ScriptedSpeechToText(script or {})
    tts = tts or ToneTextToSpeech(10.0)
    speaker = MemorySpeaker(realtime=False)
    shown: list[Event] = []
    conversation = Conversation(model, tools or builtin_tools(),
                                reply_settings or ReplySettings(idle_summaries=True))
    loop = VoiceLoop(conversation, stt, tts, speaker, segmenter or Segmenter(),
                     settings or VoiceSettings(echo_tail_ms=0, live_transcript_s=0),
                     render=shown.append,
                     clock=clock)
    run = VoiceRun(loop, model, stt, tts, speaker, shown)
    try:
        for number, turn in enumerate(turns):
            if isinstance(turn, str):
                loop.submit_text(turn)
            else:
                clock.feed(loop.feed_audio,
                           np.concatenate([turn, silence(TRAILING_SILENCE_S)]))
                loop.stop_listening()  # a clip cut short still counts
            assert loop.wait_idle(HUNG_S), f"turn {number} was never answered"
            # The echo tail passes as the microphone goes on (the clock is its samples).
            while not loop.quiet:
                clock.feed(loop.feed_audio, silence(0.03))
        loop.end_of_input()
    finally:
        assert loop.close(HUNG_S), "the reply worker never ended"
    return run
