"""Whether Parley's own voice comes back into the microphone: judged at the start of each
reply, so that half duplex may listen through a reply's first moments where it is safe.

A user on a headset (or any microphone that does not hear the speaker) can go on talking
while Parley starts to answer, and must be heard; on open speakers the microphone hears
Parley's voice, which must never be taken for the user's. The probe tells the two apart
from the level alone: while nothing plays, it follows the room's quiet level; when a
reply starts playing, it holds back the first `probe_ms` of microphone audio and compares
the median level of its 10 ms frames with that level. Parley's voice through speakers is
far above the room's quiet (tens of dB); on a headset the microphone stays where it was.
Quiet: what was held back is heard (nothing of the user's is lost) and listening goes on.
Loud: it is Parley's echo, what was held back is dropped, and the microphone is ignored
until the reply ends (half duplex as before), unless an earlier reply proved there is no
echo: then it is the user talking.

A speaker turned down, or far from the microphone, puts Parley's voice only a few dB above
the room's quiet: too little for the level, enough for the speech detector and Whisper;
and a reply that begins with a breath of silence, its echo late behind the device's
buffer, leaves most of the probe quiet however loud it is (`benchmarks.echo --only
probe`: 28 of Parley's words heard at -30 dB, 10 at -6 dB). So where the
reply's own audio is known (`far`), the probe also looks for it in the microphone: the
cross-correlation of the two, whitened (GCC-PHAT, which keeps a delayed and filtered copy's
peak sharp whatever the room), has a peak far above its own spread when the microphone
hears the reply (16–120x on Piper's voice, down to -40 dB and in a reverberant room, with
the echo arriving 60–160 ms after the audio was handed over), and not when it hears noise
or a person (at most 10.7x in 60 trials). Such a peak is an echo whatever an earlier reply
showed. Every reply is probed; what one shows serves the next
(`echo_free`), and where it is not known yet, a reply waits out the user's first moments
before it speaks (`assistant.voice.going_on.unheard`).

A level and one correlation, not a model: no CPU to speak of, and the same audio always
gives the same verdict.
"""

from __future__ import annotations

from collections import deque
from enum import Enum

import numpy as np

from audio.pcm import level_dbfs

QUIET_BLOCKS = 50
"""The room's quiet level is the median of this many of the latest blocks heard while
nothing played and nobody spoke."""
SILENT_DBFS = -90.0
"""Digital silence, and the level assumed before anything was heard."""
WHITENING_FLOOR = 0.01
"""Frequencies this far below a signal's strongest (-40 dB) are not whitened up."""
ECHO_PEAK = 14.0
"""A correlation peak this many times the correlation's RMS is the reply heard again."""
LATEST_ECHO_MS = 400
"""The longest the reply's echo may take to arrive after its audio was handed over (the
output's buffer and the room), for the correlation: no later than the probe's end."""


class Verdict(Enum):
    WAIT = "wait"
    """Still probing: the audio is held back."""
    CLEAR = "clear"
    """No echo: the held audio, and what follows, is heard."""
    ECHO = "echo"
    """Parley's voice is in the microphone: ignore it until the reply ends."""


class EchoProbe:
    """Feed it the microphone's blocks: `quiet()` while nothing plays and nobody speaks,
    `playing()` while a reply plays; `ended()` when it stops."""

    def __init__(self, sample_rate: int = 16000, probe_ms: int = 400, skip_ms: int = 100,
                 rise_db: float = 12.0) -> None:
        self.sample_rate = sample_rate
        self.probe_samples = sample_rate * probe_ms // 1000
        """Microphone audio held back at the start of a reply before it is judged."""
        self.skip_samples = sample_rate * skip_ms // 1000
        """The start of the probe left out of the judgment: the echo takes the output's
        latency to arrive, and until then the microphone is as quiet as before."""
        self.rise_db = rise_db
        """How far above the room's quiet the probe must be to count as an echo."""
        self.echo_free: bool | None = None
        """What the last judged reply showed: no echo (True), an echo (False), not known."""
        self._quiet: deque[float] = deque(maxlen=QUIET_BLOCKS)
        self._held: list[np.ndarray] = []
        self._verdict: Verdict | None = None
        self._far: list[np.ndarray] = []
        """The start of the reply's own audio (at `sample_rate`), when it is known."""
        self._far_judged = False
        """The audio in `_far` belongs to a reply already judged: the next starts anew."""

    @property
    def quiet_dbfs(self) -> float:
        return float(np.median(self._quiet)) if self._quiet else SILENT_DBFS

    def quiet(self, pcm: np.ndarray) -> None:
        """A block heard while nothing played and nobody spoke: the room's own level."""
        if len(pcm):
            self._quiet.append(max(SILENT_DBFS, level_dbfs(pcm)))

    @property
    def wants_far(self) -> bool:
        """More of the reply's own audio would be looked at (`far`)."""
        return self._far_judged or sum(len(b) for b in self._far) < self.probe_samples

    def far(self, pcm: np.ndarray) -> None:
        """Audio of the reply handed to the output (at `sample_rate`): what the microphone
        hears of it is an echo. Only the reply's start is kept."""
        if self._far_judged:
            self._far, self._far_judged = [], False
        if self.wants_far:
            self._far.append(np.asarray(pcm))

    def playing(self, pcm: np.ndarray) -> tuple[Verdict, list[np.ndarray]]:
        """A block heard while a reply plays: the verdict, and the audio to hear now (what
        was held back and this block, once clear)."""
        if self._verdict is Verdict.CLEAR:
            return Verdict.CLEAR, [pcm]
        if self._verdict is Verdict.ECHO:
            return Verdict.ECHO, []
        self._held.append(pcm)
        held = np.concatenate(self._held)
        if len(held) < self.probe_samples:
            return Verdict.WAIT, []
        probed = held[self.skip_samples:self.probe_samples]
        loud = self._median_dbfs(probed) > self.quiet_dbfs + self.rise_db
        self._far_judged = True
        if self.echo_peak(probed) >= ECHO_PEAK or (loud and self.echo_free is not True):
            self.echo_free = False
            self._verdict = Verdict.ECHO
            self._held = []
            return Verdict.ECHO, []
        if not loud:
            self.echo_free = True
        self._verdict = Verdict.CLEAR
        released, self._held = self._held, []
        return Verdict.CLEAR, released

    def echo_peak(self, probed: np.ndarray) -> float:
        """How far the whitened cross-correlation of the microphone (`probed`, from
        `skip_samples` into the reply) and the reply's own audio peaks above its RMS, over
        the delays an echo can have; 0 where the reply's audio is not known."""
        far = np.concatenate(self._far)[:self.probe_samples] if self._far else np.zeros(0)
        if not len(far) or not np.any(far) or not np.any(probed):
            return 0.0
        size = 1 << (len(probed) + len(far)).bit_length()
        correlation = np.fft.irfft(_whitened(probed, size) * np.conj(_whitened(far, size)),
                                   size)
        # The microphone's window starts `skip_samples` into the reply: an echo that came
        # sooner sits at a negative delay, at the end of the circular correlation.
        latest = self.sample_rate * LATEST_ECHO_MS // 1000 - self.skip_samples
        delays = np.concatenate([correlation[size - self.skip_samples:], correlation[:latest]])
        spread = float(np.sqrt(np.mean(correlation ** 2)))
        return float(np.max(np.abs(delays))) / spread if spread else 0.0

    def _median_dbfs(self, pcm: np.ndarray) -> float:
        """The median level of its 10 ms frames: Parley's echo fills most of them from the
        moment it arrives, where a user who begins to speak late in the probe fills few."""
        size = self.sample_rate // 100
        frames = [pcm[at:at + size] for at in range(0, len(pcm) - size + 1, size)]
        return float(np.median([max(SILENT_DBFS, level_dbfs(f)) for f in frames]))

    def ended(self) -> list[np.ndarray]:
        """The reply stopped playing: judge the next one afresh. What was held back and
        not judged yet (a reply shorter than the probe) is given back, to be heard."""
        held = self._held if self._verdict is None else []
        self._held, self._verdict = [], None
        return held


def _whitened(pcm: np.ndarray, size: int) -> np.ndarray:
    """`pcm`'s spectrum with every frequency brought to the same magnitude (PHAT), but for
    those 40 dB or more below its strongest, which are turned down instead: where a signal
    has nothing (a test tone, the band a voice leaves empty) its noise must not count as
    agreement."""
    spectrum = np.fft.rfft(pcm.astype(np.float64), size)
    magnitude = np.abs(spectrum)
    return spectrum / (magnitude + WHITENING_FLOOR * magnitude.max() + 1e-12)
