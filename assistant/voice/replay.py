"""Headless replay: a recorded session goes through the same path as the microphone.

A session file is JSON: `{"turns": [{"text": "…"}, {"audio": "clip.wav"},
{"audio": "stop.wav", "during_reply_ms": 800}]}` (or just the list of turns). Audio
paths are relative to the session file. Audio turns are fed through the segmenter,
speech-to-text, the core and text-to-speech exactly as live audio is, from a file source
at real-time pace (or as fast as possible), into an in-memory speaker.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from assistant.errors import AssistantError
from assistant.events import Stage
from assistant.voice.loop import VoiceLoop
from assistant.voice.turns import TurnRecord
from audio.files import AudioFileError, frames_of, read_audio

SAMPLE_RATE = 16000
TRAILING_SILENCE_S = 1.5
"""Silence fed after each clip, so the segmenter hears the end of speech as it would live."""


class SessionError(AssistantError):
    """A session file cannot be replayed; the message names the file and the turn."""

    stage = Stage.REPLAY


@dataclass(frozen=True)
class ReplayTurn:
    index: int
    text: str | None = None
    audio_path: Path | None = None
    pcm: np.ndarray | None = None
    during_reply_ms: int | None = None

    def describe(self) -> dict:
        if self.text is not None:
            return {"text": self.text}
        data: dict = {"audio": str(self.audio_path)}
        if self.during_reply_ms is not None:
            data["during_reply_ms"] = self.during_reply_ms
        return data


def load_session(path: Path) -> list[ReplayTurn]:
    """Read and check a session file, reading every clip up front.

    Every problem names the file and the turn, before anything is replayed.
    """
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise SessionError(f"Cannot read the session file {path}: {exc.strerror}.") from exc
    try:
        data = json.loads(raw.decode("utf-8", errors="replace"))
    except json.JSONDecodeError as exc:
        raise SessionError(f"{path} is not valid JSON ({exc}).") from exc
    turns = data.get("turns") if isinstance(data, dict) else data
    if not isinstance(turns, list) or not turns:
        raise SessionError(f'{path}: expected {{"turns": [...]}} with at least one turn.')
    out = []
    for number, turn in enumerate(turns, start=1):
        where = f"{path}, turn {number}"
        if not isinstance(turn, dict) or ("text" in turn) == ("audio" in turn):
            raise SessionError(f'{where}: a turn is {{"text": "…"}} or {{"audio": "clip.wav"}}.')
        unknown = set(turn) - {"text", "audio", "during_reply_ms"}
        if unknown:
            raise SessionError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}.")
        during = turn.get("during_reply_ms")
        if during is not None and (not isinstance(during, int) or during < 0):
            raise SessionError(f"{where}: during_reply_ms must be a whole number of ms >= 0.")
        if "text" in turn:
            if not isinstance(turn["text"], str) or not turn["text"].strip():
                raise SessionError(f"{where}: text must be a non-empty string.")
            if during is not None:
                raise SessionError(f"{where}: during_reply_ms applies to audio turns only.")
            out.append(ReplayTurn(number, text=turn["text"]))
            continue
        clip = (path.parent / str(turn["audio"])).resolve()
        try:
            pcm = read_audio(clip, SAMPLE_RATE)
        except AudioFileError as exc:
            raise SessionError(f"{where}: {exc}") from exc
        out.append(ReplayTurn(number, audio_path=clip, pcm=pcm, during_reply_ms=during))
    return out


def replay(loop: VoiceLoop, turns: list[ReplayTurn], fast: bool = False,
           timeout_s: float = 600.0) -> list[list[TurnRecord]]:
    """Play the session into `loop`; returns, per session turn, the turns it produced."""
    produced: list[list[TurnRecord]] = []
    for turn in turns:
        before = len(loop.records)
        if turn.during_reply_ms is not None and loop.records:
            _wait_for_audio_of(loop.records[-1], turn.during_reply_ms, timeout_s)
        else:
            loop.wait_idle(timeout_s)
            loop.wait_quiet()
        if turn.text is not None:
            loop.submit_text(turn.text)
        else:
            assert turn.pcm is not None
            silence = np.zeros(int(TRAILING_SILENCE_S * SAMPLE_RATE), dtype=np.int16)
            for frame in frames_of(np.concatenate([turn.pcm, silence]), SAMPLE_RATE,
                                   realtime=not fast):
                loop.feed_audio(frame)
            loop.stop_listening()  # end of input: a clip cut short still counts
        produced.append(loop.records[before:])
    loop.wait_idle(timeout_s)
    return produced


def _wait_for_audio_of(record: TurnRecord, delay_ms: int, timeout_s: float) -> None:
    """Start the next clip `delay_ms` into the previous reply's audio (a barge-in)."""
    deadline = time.monotonic() + timeout_s
    while not record.first_audio_seen() and not record.finished.is_set():
        if time.monotonic() > deadline:
            return
        time.sleep(0.005)
    if record.first_audio_seen():
        due = record.started + (record.timings["first_audio_ms"] or 0) / 1000 + delay_ms / 1000
        time.sleep(max(0.0, due - time.monotonic()))


def session_json(loop: VoiceLoop, turns: list[ReplayTurn],
                 produced: list[list[TurnRecord]]) -> dict:
    """The replay's one JSON document: turns, numbered messages and the summary."""
    out_turns = []
    for turn, records in zip(turns, produced, strict=True):
        out_turns.append({"turn": turn.index, "input": turn.describe(), **_merge(records)})
    conversation = loop.conversation
    return {
        "turns": out_turns,
        "messages": [
            {"seq": m.seq, "role": m.role, "content": m.content,
             **({"tool": m.tool, "query": m.query} if m.tool else {})}
            for m in conversation.history.messages],
        "summary": {"text": conversation.summary.text,
                    "covered_through": conversation.summary.covered_through},
    }


def _merge(records: list[TurnRecord]) -> dict:
    """One session turn usually makes one heard turn; a cut or split clip makes several."""
    if not records:
        return {"heard": "", "reply": "", "events": [], "interrupted": False,
                "spoken_seconds": 0.0, "timings": {}}
    first = records[0]
    events = [dict(event, part=number) if len(records) > 1 else event
              for number, record in enumerate(records) for event in record.events]
    return {
        "heard": " ".join(r.heard for r in records if r.heard),
        "reply": " ".join(r.reply for r in records if r.reply),
        "events": events,
        "interrupted": any(r.interrupted for r in records),
        "spoken_seconds": round(sum(r.spoken_seconds for r in records), 2),
        "timings": dict(first.timings),
    }
