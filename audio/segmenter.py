"""Cuts a stream of 16-bit mono PCM into utterances.

A pure state machine over fixed 10/20/30 ms frames and one speech/non-speech decision per
frame (Home Assistant's `VoiceCommandSegmenter` is the model). Time is counted in samples,
never read from a clock, so the same audio gives the same events however it is chunked
and however fast it arrives: a replayed WAV segments exactly like the live microphone did.

Every duration is handled in whole frames: pre-roll, end silence, minimum speech and the
start hysteresis are rounded up to whole frames, the maximum utterance length down, so an
utterance never exceeds `max_utterance_s`.

What ends an utterance is a fixed `end_silence_ms` of silence, or, given a `TurnPolicy`,
the turn model asked at the pause (`audio.turn_policy`): a function of the audio too, so
the same recording still gives the same utterances.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from audio.pcm import require_mono_int16
from audio.speech_events import (
    SegmenterEvent,
    SpeechPaused,
    SpeechResumed,
    SpeechStarted,
    TurnChecked,
    Utterance,
)
from audio.turn_policy import TurnPolicy, WordsCheck
from audio.vad import VAD_FRAME_MS, VAD_SAMPLE_RATES

__all__ = ["Segmenter", "SegmenterSettings", "SegmenterEvent", "SpeechStarted", "SpeechPaused",
           "SpeechResumed", "TurnChecked", "Utterance", "ECHO_CANCELLED_FLOOR_DBFS"]

ECHO_CANCELLED_FLOOR_DBFS = -50.0
"""The canceller takes the room's noise with the echo: webrtcvad hears digital silence and
over it a -62 dBFS residual as speech (2 of 3 replies stopped themselves, replay --echo
-6). Speech into a microphone is -40 to -20 dBFS; only its start must pass the floor."""


@dataclass(frozen=True)
class SegmenterSettings:
    sample_rate: int = 16000
    """Samples per second of the PCM fed in."""

    frame_ms: int = 30
    """Length of one VAD decision: 10, 20 or 30 ms."""

    aggressiveness: int = 2
    """webrtcvad aggressiveness, 0 (keeps most) to 3 (filters most non-speech)."""

    pre_roll_ms: int = 300
    """Audio kept from before speech was detected, so the first syllable is not clipped."""

    end_silence_ms: int = 700
    """Silence after speech that ends an utterance."""

    min_speech_ms: int = 250
    """Utterances with less speech than this are dropped as noise (clicks, coughs)."""

    max_utterance_s: float = 20.0
    """Longer utterances are cut here; the rest continues as a new utterance."""

    # Start hysteresis: one misjudged frame (a click, a key press) must not start speech,
    # so speech starts only once speech frames total `start_speech_ms` within the last
    # `start_window_ms`: 2 of the last 4 frames at 30 ms. A voiced syllable lasts 100-300
    # ms, so real speech passes within 60-120 ms; what came before is kept by the pre-roll.
    start_speech_ms: int = 60
    """Speech, within the start window, needed to start an utterance."""

    start_window_ms: int = 120
    """Window in which `start_speech_ms` of speech must fall."""

    start_floor_dbfs: float = -90.0
    """Quieter frames never start an utterance (they may go on one): -90 is no floor but
    webrtcvad's own; after an echo canceller `ECHO_CANCELLED_FLOOR_DBFS`."""

    def __post_init__(self) -> None:
        if self.sample_rate not in VAD_SAMPLE_RATES:
            raise ValueError(
                f"sample_rate must be 8000, 16000, 32000 or 48000 Hz (webrtcvad's rates), "
                f"got {self.sample_rate}"
            )
        if self.frame_ms not in VAD_FRAME_MS:
            raise ValueError(f"frame_ms must be 10, 20 or 30 (webrtcvad), got {self.frame_ms}")
        if isinstance(self.aggressiveness, bool) or self.aggressiveness not in (0, 1, 2, 3):
            raise ValueError(f"aggressiveness must be 0, 1, 2 or 3, got {self.aggressiveness!r}")
        for name in ("pre_roll_ms", "min_speech_ms", "start_speech_ms"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be 0 or more, got {getattr(self, name)}")
        for name in ("end_silence_ms", "start_window_ms", "max_utterance_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be more than 0, got {getattr(self, name)}")
        if not math.isfinite(self.max_utterance_s * 1000):  # its frame count must exist
            raise ValueError(f"max_utterance_s must be a finite number of seconds, got "
                             f"{self.max_utterance_s}")
        if self.start_speech_ms > self.start_window_ms:
            raise ValueError(
                f"start_speech_ms ({self.start_speech_ms}) cannot exceed "
                f"start_window_ms ({self.start_window_ms})"
            )
        # An ordinary utterance (pre-roll, detection, minimum speech, end silence) must fit
        # below the maximum, or every utterance would be cut.
        needed = self.frames(self.pre_roll_ms) + self.frames(self.start_window_ms)
        needed += self.frames(self.min_speech_ms) + self.frames(self.end_silence_ms)
        if self.max_frames < needed:
            # Whole milliseconds as seconds without a float, which a huge setting overflows.
            whole, ms = divmod(needed * self.frame_ms, 1000)
            raise ValueError(
                f"max_utterance_s ({self.max_utterance_s}) must leave room for pre_roll_ms, "
                f"start_window_ms, min_speech_ms and end_silence_ms: at least "
                f"{f'{whole}.{ms:03d}'.rstrip('0').rstrip('.')} s with these settings"
            )

    @property
    def frame_samples(self) -> int:
        return self.sample_rate * self.frame_ms // 1000

    @property
    def max_frames(self) -> int:
        return math.floor(self.max_utterance_s * 1000 / self.frame_ms)

    def frames(self, ms: float) -> int:
        """Whole frames covering `ms` (rounded up)."""
        # Floor division of the negation: exact for any whole number, however large.
        return int(-(-ms // self.frame_ms))




class Segmenter:
    """Feed PCM chunks of any length; get SpeechStarted, SpeechPaused, SpeechResumed and
    Utterance events.

    After SpeechStarted an Utterance may never come: a burst with less than
    `min_speech_ms` of speech is dropped (then `in_speech` turns False).
    """

    def __init__(
        self,
        settings: SegmenterSettings = SegmenterSettings(),
        is_speech: Callable[[bytes], bool] | None = None,
        turn: TurnPolicy | None = None,
    ) -> None:
        self.settings = s = settings
        self.turn = turn
        """The turn model's policy; None: a fixed `end_silence_ms` ends every utterance."""
        if turn is not None:  # its durations in whole frames, as every other one
            self._turn_check = max(1, s.frames(turn.settings.check_ms))
            self._turn_end = max(1, s.frames(turn.settings.max_silence_ms))
        if is_speech is None:
            from audio.vad import WebRtcVad  # lazy: webrtcvad is only needed for real audio

            is_speech = WebRtcVad(s.aggressiveness, s.sample_rate).is_speech
        self._is_speech = is_speech
        self._start_floor = (32768 * 10 ** (s.start_floor_dbfs / 20)) ** 2
        """Mean square of the quietest frame that may start an utterance."""
        self._n = s.frame_samples
        self._pre_roll = s.frames(s.pre_roll_ms)
        self._end_silence = s.frames(s.end_silence_ms)
        self._min_speech = s.frames(s.min_speech_ms)
        self._window = max(1, s.frames(s.start_window_ms))
        self._start_speech = max(1, s.frames(s.start_speech_ms))
        self._max = s.max_frames
        self._seen = 0
        self._words: WordsCheck | None = None
        self.reset()

    # -- public ---------------------------------------------------------------------------

    @property
    def in_speech(self) -> bool:
        return self._start is not None

    def speech_so_far(self) -> np.ndarray | None:
        """The utterance in progress, while the user is still speaking (no silence since):
        what a live transcript hears. None otherwise; `speech_samples` long."""
        speaking = self._start is not None and not self._silence and self._enough_speech()
        return self._heard()[: self.speech_samples] if speaking else None

    @property
    def speech_samples(self) -> int:
        return 0 if self._start is None else self._speech_end - self._start

    @property
    def voice_heard(self) -> bool:
        """In speech, or a voiced frame among the last few that may yet start it: the user
        is talking, or has just begun to (speech starts only once the hysteresis is met)."""
        if self._start is not None:
            return True
        # Read from the reply's thread while the microphone's appends: list() of a deque
        # is one step under the GIL.
        return any(speech for _, _, speech in list(self._recent)[-self._window:])

    @property
    def samples_seen(self) -> int:
        """Samples fed since construction; `reset()` does not rewind this clock."""
        return self._seen

    def feed(self, pcm: np.ndarray, words: WordsCheck | None = None) -> list[SegmenterEvent]:
        """Segment `pcm`; at a pause the turn model judges finished, `words` (if given) may
        still keep the turn open (`audio.turn_policy`)."""
        pcm = require_mono_int16(pcm, "the segmenter")
        self._words = words
        self._seen += len(pcm)
        data = np.concatenate((self._pending, pcm))  # a copy: callers may reuse their buffer
        whole = len(data) - len(data) % self._n
        events: list[SegmenterEvent] = []
        for i in range(0, whole, self._n):
            self._step(data[i : i + self._n], events)
        self._pending = data[whole:].copy()
        return events

    def flush(self) -> Utterance | None:
        """End the current utterance now (end of input, push-to-talk); None if too short."""
        utterance = None
        if self._start is not None and self._enough_speech():
            self._frames.append(self._pending)  # the unfinished frame is heard audio too
            utterance = self._utterance(self._seen, cut=False)
        self.reset()
        return utterance

    def reset(self) -> None:
        """Forget all audio and any utterance in progress (e.g. while Parley speaks)."""
        self._pending = np.zeros(0, dtype=np.int16)
        self._clock = self._seen  # start of the next frame
        # Idle: recent (start, frame, is_speech) kept for pre-roll and the start window.
        self._recent: deque[tuple[int, np.ndarray, bool]] = deque(
            maxlen=self._pre_roll + self._window
        )
        # In speech: the utterance's frames from `_start` on.
        self._start: int | None = None
        self._frames: list[np.ndarray] = []
        self._speech = 0  # speech frames in this utterance
        self._speech_end = 0
        self._silence = 0  # silent frames since the last speech frame
        self._paused = False  # a SpeechPaused was given for the current silence
        self._turn_score: float | None = None  # the turn model's last word on this pause
        self._turn_ends_after: int | None = None  # the silence, in frames, its words set
        self._continued = False  # follows a cut, so any speech at all is enough

    # -- state machine --------------------------------------------------------------------

    def _step(self, frame: np.ndarray, events: list[SegmenterEvent]) -> None:
        start, end = self._clock, self._clock + self._n
        self._clock = end
        speech = bool(self._is_speech(frame.tobytes()))
        if self._start is None:
            speech = speech and np.mean(frame.astype(np.float64) ** 2) >= self._start_floor
            self._recent.append((start, frame, speech))
            if speech:
                self._maybe_start(events)
            return

        self._frames.append(frame)
        if speech:
            if self._paused:
                self._paused = False
                self._turn_score = None
                self._turn_ends_after = None
                events.append(SpeechResumed(start, self.settings.sample_rate))
            self._speech += 1
            self._speech_end = end
            self._silence = 0
        else:
            self._silence += 1
            if self._silence == 1 and self._enough_speech():
                speech_pcm = self._heard()[: self._speech_end - self._start]
                events.append(SpeechPaused(speech_pcm, self._speech_end, self.settings.sample_rate))
                self._paused = True
            if self._turn_ends(end, events) or self._silence >= self._end_silence_now():
                if self._enough_speech():
                    events.append(self._utterance(end, cut=False))
                    self._go_idle()
                else:
                    self._drop()
                return
        if (end - self._start) // self._n >= self._max:  # utterances start on a frame
            self._cut(end, events)

    def _maybe_start(self, events: list[SegmenterEvent]) -> None:
        window = list(self._recent)[-self._window :]
        voiced = [i for i, (_, _, speech) in enumerate(window) if speech]
        if len(voiced) < self._start_speech:
            return
        first = len(self._recent) - len(window) + voiced[0]  # index in _recent
        begin = max(0, first - self._pre_roll)
        frames = list(self._recent)[begin:]
        self._start = frames[0][0]
        self._frames = [f for _, f, _ in frames]
        self._speech = len(voiced)
        self._speech_end = self._clock
        self._silence = 0
        self._recent.clear()
        events.append(SpeechStarted(window[voiced[0]][0], self.settings.sample_rate))

    def _cut(self, end: int, events: list[SegmenterEvent]) -> None:
        """At the maximum length: return what we have, continue with what follows."""
        if self._enough_speech():
            events.append(self._utterance(end, cut=True))
            silence = self._silence
            self._go_idle()
            # The rest of the speech is a new utterance right away, with no pre-roll
            # (that audio is in the part just returned) and no minimum speech (a last
            # word must not be lost). If only silence follows, it ends without an event.
            self._start = end
            self._silence = silence
            self._continued = True
            events.append(SpeechStarted(end, self.settings.sample_rate))
        else:  # 20 s with too little speech is noise, not a cut utterance
            self._drop()

    # -- the turn model -------------------------------------------------------------------

    def _turn_ends(self, end: int, events: list[SegmenterEvent]) -> bool:
        """At the pause's check point, ask the turn model; True if it says finished."""
        turn = self.turn
        if (turn is None or turn.failed or not self._enough_speech()
                or self._silence != self._turn_check or self._silence >= self._turn_end):
            return False
        pcm = self._heard()
        speech_pcm = pcm[: self._speech_end - self._start]
        checked = turn.check(pcm, end, self._speech_end, self.settings.sample_rate, speech_pcm,
                             self._words)
        if checked is None:
            return False
        self._turn_score = checked.score
        if checked.ends_after_ms is not None:
            self._turn_ends_after = max(self._turn_check, self.settings.frames(
                checked.ends_after_ms))
        events.append(checked)
        return checked.finished

    def _end_silence_now(self) -> int:
        """Silent frames that end the utterance: the turn model's bound while it is asked,
        the fixed end silence otherwise (and always for a burst too short to be a turn)."""
        if self.turn is None or self.turn.failed or not self._enough_speech():
            return self._end_silence
        return self._turn_end if self._turn_ends_after is None else self._turn_ends_after

    # -- helpers --------------------------------------------------------------------------

    def _heard(self) -> np.ndarray:
        """The utterance's audio so far, as one read-only array."""
        pcm = _read_only(np.concatenate(self._frames))
        self._frames = [pcm]  # keeps later concatenations cheap
        return pcm

    def _enough_speech(self) -> bool:
        return self._speech >= (1 if self._continued else max(1, self._min_speech))

    def _utterance(self, end: int, cut: bool) -> Utterance:
        pcm = _read_only(np.concatenate(self._frames))
        return Utterance(
            pcm=pcm,
            start_sample=self._start,
            end_sample=end,
            speech_end_sample=min(self._speech_end, end),
            cut=cut,
            sample_rate=self.settings.sample_rate,
            turn_score=None if cut else self._turn_score,
        )

    def _drop(self) -> None:
        """Too little speech: forget it, but keep its tail as pre-roll for what follows.

        (A fresh webrtcvad calls its first few frames of room noise speech; without
        this, that dropped burst would shorten the pre-roll of the first real utterance.)
        """
        audio = np.concatenate(self._frames)
        keep = min(len(audio) // self._n, self._pre_roll + self._window)
        start = self._clock - keep * self._n
        self._go_idle()
        for i in range(keep):
            # Marked non-speech: dropped noise must not help start the next utterance.
            frame = audio[len(audio) - (keep - i) * self._n :][: self._n]
            self._recent.append((start + i * self._n, frame, False))

    def _go_idle(self) -> None:
        # Pre-roll restarts empty: the audio before now belongs to the utterance just
        # returned, and must not be heard twice.
        self._recent.clear()
        self._start = None
        self._frames = []
        self._speech = self._speech_end = self._silence = 0
        self._paused = False
        self._continued = False
        self._turn_score = None
        self._turn_ends_after = None


def _read_only(pcm: np.ndarray) -> np.ndarray:
    pcm.flags.writeable = False
    return pcm
