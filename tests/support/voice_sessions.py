"""A voice loop on stand-in engines (scripted speech-to-text, tone text-to-speech, memory
speaker) around the real segmenter and VAD, and replayed sessions through it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from assistant.conversation import Conversation, ReplySettings
from assistant.tools import builtin_tools
from assistant.voice.loop import VoiceLoop
from assistant.voice.replay import load_session, replay, session_json
from assistant.voice.turns import VoiceSettings
from audio.files import write_wav
from audio.memory_out import MemorySpeaker
from audio.segmenter import Segmenter, SegmenterSettings
from tests.support.clips import RATE
from tests.support.fakes import ScriptedSpeechToText, ToneTextToSpeech

HELLO, TIME, STOP = 4000, 8000, 12000
"""Peaks of the clips (`tests.support.clips.clip`) that say what SCRIPT gives for them."""
SCRIPT = {HELLO: "Hello there, Parley.", TIME: "What is six times seven?",
          STOP: "Stop, that is enough."}


def write_session(folder: Path, turns: list[dict], clips: dict[str, np.ndarray]) -> Path:
    """A replay session file in `folder`, with each clip written beside it as a WAV file."""
    for name, pcm in clips.items():
        write_wav(folder / name, pcm, RATE)
    path = folder / "session.json"
    path.write_text(json.dumps({"turns": turns}))
    return path


def make_loop(model, barge_in=False, max_utterance_s=20.0, ms_per_char=50.0,
              realtime=False, settings=None, keep_audio=False, stt=None, clock=None,
              speculative_reply=True):
    """A voice loop on `model` that hears SCRIPT (unless given `stt`): (loop, stt, tts)."""
    conversation = Conversation(model, builtin_tools(), settings or ReplySettings())
    stt = stt or ScriptedSpeechToText(SCRIPT)
    tts = ToneTextToSpeech(ms_per_char)
    segmenter = Segmenter(SegmenterSettings(max_utterance_s=max_utterance_s))
    timing = {} if clock is None else {"clock": clock}
    loop = VoiceLoop(conversation, stt, tts, MemorySpeaker(realtime=realtime, **timing),
                     # No live passes, as `parley replay --fast` runs none: how many
                     # run would depend on the machine's speed.
                     segmenter, VoiceSettings(barge_in=barge_in, echo_tail_ms=100,
                                              live_transcript_s=0,
                                              speculative_reply=speculative_reply),
                     keep_audio=keep_audio, **timing)
    return loop, stt, tts


def run_session(tmp_path, model, turns, clips, fast=True, **loop_options):
    """`turns` replayed through `make_loop(model, **loop_options)`: (replay's JSON document,
    loop, stt, tts)."""
    path = write_session(tmp_path, turns, clips)
    loop, stt, tts = make_loop(model, **loop_options)
    session = load_session(path)
    try:
        produced = replay(loop, session, fast=fast, timeout_s=60)
    finally:
        loop.close()
    return session_json(loop, session, produced), loop, stt, tts
