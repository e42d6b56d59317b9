"""Headless replay: a recorded session goes through the same path as the microphone.

A session file is JSON: `{"turns": [{"text": "…"}, {"audio": "clip.wav"},
{"audio": "stop.wav", "during_reply_ms": 800}, {"wait_s": 60}]}` (or just the list of
turns). Audio paths are relative to the session file; `wait_s` lets time pass (timers go
off), in real time, or skipped on a virtual clock with `--fast`. Audio turns are fed
through the segmenter, speech-to-text, the core and text-to-speech exactly as live audio
is, from a file source at real-time pace (or as fast as possible), into an in-memory
speaker.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from assistant.confirmation import Confirmation
from assistant.errors import AssistantError
from assistant.events import Stage
from assistant.voice.loop import VoiceLoop
from assistant.voice.turns import TimedEvent, TurnRecord, TurnSource
from audio.echo import MicrophoneInput
from audio.files import AudioFileError, frames_of, read_audio

SAMPLE_RATE = 16000
MAX_WAIT_S = 48 * 3600
"""A wait_s turn lasts at most two days (timers last at most one)."""
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
    wait_s: float | None = None
    confirm: tuple[bool, ...] = ()
    """The user's answers, in order, to the questions this turn's reply asks before a tool
    changes something ("confirm": "yes", or a list)."""

    def describe(self) -> dict:
        if self.text is not None:
            data: dict = {"text": self.text}
        elif self.wait_s is not None:
            return {"wait_s": self.wait_s}
        else:
            data = {"audio": str(self.audio_path)}
        if self.during_reply_ms is not None:
            data["during_reply_ms"] = self.during_reply_ms
        if self.confirm:
            data["confirm"] = ["yes" if answer else "no" for answer in self.confirm]
        return data


class SessionAnswers:
    """Replay's yes or no before a tool changes something: what the session file says on
    the turn whose reply asks (the question is said first, as live). A question it gives
    no answer for is not answered: the tool is not run.

    Each turn's answers are kept for the replies of that turn: a reply still playing when
    the next turn starts (`during_reply_ms`) that asks then is answered from its own
    turn's answers, never from the next one's."""

    def __init__(self) -> None:
        self._records: list[TurnRecord] = []
        """The loop's records, in order: a turn owns those that began while it was current."""
        self._turns: list[tuple[int, deque[bool]]] = []
        """Per turn: the number of records before it, and its answers not yet given."""
        self._lock = threading.Lock()

    def turn_started(self, turn: ReplayTurn, records: list[TurnRecord]) -> None:
        """`turn` is fed now; `records` are the loop's, the replies that ask among them."""
        with self._lock:
            self._records = records
            self._turns.append((len(records), deque(turn.confirm)))

    def __call__(self, confirmation: Confirmation, asking: TurnRecord) -> str | None:
        """The answer as the user would say it ("yes", "no"), None if the file has none."""
        with self._lock:
            position = next((i for i in range(len(self._records) - 1, -1, -1)
                             if self._records[i] is asking), len(self._records))
            answers = next((left for first, left in reversed(self._turns)
                            if first <= position), deque())
            if not answers:
                return None
            return "yes" if answers.popleft() else "no"


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
    except (ValueError, RecursionError) as exc:  # Python's own limits, not a syntax error
        raise SessionError(f"{path} cannot be read: it has a number with too many digits or "
                           "is nested too deeply.") from exc
    turns = data.get("turns") if isinstance(data, dict) else data
    if not isinstance(turns, list) or not turns:
        raise SessionError(f'{path}: expected {{"turns": [...]}} with at least one turn.')
    out = []
    for number, turn in enumerate(turns, start=1):
        where = f"{path}, turn {number}"
        kinds = [kind for kind in ("text", "audio", "wait_s") if isinstance(turn, dict)
                 and kind in turn]
        if len(kinds) != 1:
            raise SessionError(f'{where}: a turn is {{"text": "…"}}, {{"audio": "clip.wav"}} '
                               'or {"wait_s": seconds}.')
        unknown = set(turn) - {"text", "audio", "during_reply_ms", "wait_s", "confirm"}
        if unknown:
            raise SessionError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}.")
        during = turn.get("during_reply_ms")
        # Bounded like wait_s: replay sleeps on it, and a huge number overflows the sleep.
        if during is not None and (isinstance(during, bool) or not isinstance(during, int)
                                   or not 0 <= during <= MAX_WAIT_S * 1000):
            raise SessionError(f"{where}: during_reply_ms must be a whole number of ms from 0 "
                               f"to {MAX_WAIT_S * 1000:,}.")
        confirm = _answers(turn.get("confirm", []), where)
        if "wait_s" in turn:
            if confirm:
                raise SessionError(f"{where}: confirm goes on the turn whose reply asks.")
            wait = turn["wait_s"]
            if isinstance(wait, bool) or not isinstance(wait, int | float) or \
                    not 0 <= wait <= MAX_WAIT_S or during is not None:
                raise SessionError(f"{where}: wait_s must be a number of seconds from 0 to "
                                   f"{MAX_WAIT_S:,}, on its own.")
            out.append(ReplayTurn(number, wait_s=float(wait)))
            continue
        if "text" in turn:
            if not isinstance(turn["text"], str) or not turn["text"].strip():
                raise SessionError(f"{where}: text must be a non-empty string.")
            if during is not None:
                raise SessionError(f"{where}: during_reply_ms applies to audio turns only.")
            out.append(ReplayTurn(number, text=turn["text"], confirm=confirm))
            continue
        try:
            clip = (path.parent / str(turn["audio"])).resolve()
        except ValueError as exc:  # a NUL character: no file can have that name
            raise SessionError(f"{where}: {turn['audio']!r} is not a file name.") from exc
        try:
            pcm = read_audio(clip, SAMPLE_RATE)
        except AudioFileError as exc:
            raise SessionError(f"{where}: {exc}") from exc
        out.append(ReplayTurn(number, audio_path=clip, pcm=pcm, during_reply_ms=during,
                              confirm=confirm))
    return out


def _answers(value: object, where: str) -> tuple[bool, ...]:
    """A turn's "confirm": "yes" or "no", or a list of them, one a question in order."""
    answers = value if isinstance(value, list) else [value]
    if not all(isinstance(a, str) and a.strip().lower() in ("yes", "no") for a in answers):
        raise SessionError(f'{where}: confirm is "yes" or "no", or a list of them (one for '
                           "each question the reply asks, in order).")
    return tuple(a.strip().lower() == "yes" for a in answers)


class SkippableClock:
    """The monotonic clock, plus the time `wait_s` turns skipped under `--fast`."""

    def __init__(self) -> None:
        self.skipped = 0.0

    def __call__(self) -> float:
        return time.monotonic() + self.skipped

    def skip(self, seconds: float) -> None:
        self.skipped += seconds


class _Input:
    """Feeds replay's audio into the loop. With a simulated `microphone` (`--echo`), audio
    never stops, as a live microphone's does not: silence, carrying the echo of what Parley
    says, is fed at real-time pace while replay waits between turns.

    The next turn comes once the previous reply has been spoken. In real time the work
    between turns (the summary written ahead, the next prompt's beginning) goes on while
    the session's time passes, and a turn that comes first cancels it, as live. As fast as
    possible there is no such time, so it is given all it needs: the next turn waits for
    it, and a replay gives the same results every time.
    """

    FRAME = SAMPLE_RATE * 30 // 1000

    def __init__(self, loop: VoiceLoop, microphone: MicrophoneInput | None,
                 virtual_time: bool) -> None:
        self.loop = loop
        self.microphone = microphone
        self.ready = loop.wait_idle if virtual_time else loop.wait_replied

    def feed(self, frame: np.ndarray) -> None:
        if self.microphone is not None:
            frame = self.microphone.process(frame)
        self.loop.feed_audio(frame)

    def until(self, done: Callable[[], bool], timeout_s: float) -> None:
        """Keep the microphone going (if simulated) until `done()`, or `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        started, fed = time.monotonic(), 0
        silence = np.zeros(self.FRAME, dtype=np.int16)
        while not done() and time.monotonic() < deadline:
            if self.microphone is None:
                time.sleep(0.005)
                continue
            fed += self.FRAME
            time.sleep(max(0.0, started + fed / SAMPLE_RATE - time.monotonic()))
            self.feed(silence)

    def wait(self, seconds: float) -> None:
        """Let `seconds` pass (the microphone, if simulated, going on meanwhile)."""
        if self.microphone is None:
            time.sleep(seconds)
        else:
            self.until(lambda: False, seconds)

    def until_idle(self, timeout_s: float) -> None:
        """Until every turn is answered and its echo has died away."""
        if self.microphone is None:
            self.ready(timeout_s)
            self.loop.wait_quiet()
        else:
            self.until(lambda: self.ready(0) and self.loop.quiet
                       and not self.loop.output.speaking, timeout_s)


def replay(loop: VoiceLoop, turns: list[ReplayTurn], fast: bool = False,
           timeout_s: float = 600.0, skip: Callable[[float], None] | None = None,
           microphone: MicrophoneInput | None = None,
           answers: SessionAnswers | None = None) -> list[list[TurnRecord]]:
    """Play the session into `loop`; returns, per session turn, the turns it produced.

    A turn's records are those that began while it was the current one: a timer that
    goes off during a reply belongs to the turn of that reply. With `fast`, `skip(s)`
    moves the timers' clock on instead of waiting. With `microphone` (a simulated room,
    real-time only), every clip and the silence between them goes through it.
    """
    source = _Input(loop, microphone, virtual_time=fast and microphone is None)
    starts: list[int] = []
    for turn in turns:
        if turn.wait_s is not None:
            source.until_idle(timeout_s)
            starts.append(len(loop.records))
            if fast and skip is not None:
                skip(turn.wait_s)
            else:
                source.wait(turn.wait_s)
            if microphone is None:  # a simulated room fed the silence itself
                loop.silence_passed(turn.wait_s)
            continue
        replies = [record for record in loop.records if record.source is not TurnSource.WAKE]
        if turn.during_reply_ms is not None and replies:
            _wait_for_audio_of(source, replies[-1], turn.during_reply_ms, timeout_s)
        else:
            source.until_idle(timeout_s)
        starts.append(len(loop.records))
        if answers is not None:
            answers.turn_started(turn, loop.records)
        if turn.text is not None:
            loop.submit_text(turn.text)
        else:
            assert turn.pcm is not None
            silence = np.zeros(int(TRAILING_SILENCE_S * SAMPLE_RATE), dtype=np.int16)
            for frame in frames_of(np.concatenate([turn.pcm, silence]), SAMPLE_RATE,
                                   realtime=not fast or microphone is not None):
                source.feed(frame)
            loop.stop_listening()  # end of input: a clip cut short still counts
    loop.end_of_input()
    source.until_idle(timeout_s)
    loop.wait_idle(timeout_s)  # the last turn's records are complete
    ends = [*starts[1:], len(loop.records)]
    return [loop.records[start:end] for start, end in zip(starts, ends, strict=True)]


def _wait_for_audio_of(source: _Input, record: TurnRecord, delay_ms: int,
                       timeout_s: float) -> None:
    """Start the next clip `delay_ms` into the previous reply's audio (a barge-in)."""
    source.until(lambda: record.first_audio_seen() or record.finished.is_set(), timeout_s)
    if record.first_audio_seen():
        due = record.started + (record.timings.first_audio_ms or 0) / 1000 + delay_ms / 1000
        source.until(lambda: source.loop.clock() >= due, timeout_s)


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
             **({"at": m.at.isoformat(timespec="seconds")} if m.at else {}),
             **({"tool": m.tool, "query": m.query} if m.tool else {})}
            for m in conversation.history.messages],
        "summary": {"text": conversation.summary.text,
                    "covered_through": conversation.summary.covered_through},
    }


def _merge(records: list[TurnRecord]) -> dict:
    """One session turn usually makes one heard turn; a cut or split clip makes several."""
    if not records:
        return {"heard": "", "reply": "", "events": [], "interrupted": False,
                "spoken_seconds": 0.0, "timings": {}, "idle": []}
    first = records[0]
    # A turn the user continued is said again, whole, in the next record.
    answered = [r for r in records if not r.continued] or records
    events = [_event_json(event, number, len(records))
              for number, record in enumerate(records) for event in record.events]
    idle = [_event_json(event, number, len(records))
            for number, record in enumerate(records) for event in record.idle]
    return {
        "heard": " ".join(r.heard for r in answered if r.heard),
        "reply": " ".join(r.reply for r in answered if r.reply),
        "events": events,
        "interrupted": any(r.interrupted for r in records),
        "spoken_seconds": round(sum(r.spoken_seconds for r in records), 2),
        "timings": next((t for t in (r.timings.as_json() for r in answered) if t),
                        first.timings.as_json()),
        "idle": idle,
    }


def _event_json(timed: TimedEvent, part: int, parts: int) -> dict:
    """An event in a session turn's JSON; of a turn heard in parts, with its part."""
    return {**timed.as_json(), "part": part} if parts > 1 else timed.as_json()
