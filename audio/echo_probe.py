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
echo: then it is the user talking. Every reply is probed; what one shows serves the next
(`echo_free`), and where it is not known yet, a reply waits out the user's first moments
before it speaks (`assistant.voice.going_on.unheard`).

A level, not a model: no CPU to speak of, and the same audio always gives the same verdict.
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

    @property
    def quiet_dbfs(self) -> float:
        return float(np.median(self._quiet)) if self._quiet else SILENT_DBFS

    def quiet(self, pcm: np.ndarray) -> None:
        """A block heard while nothing played and nobody spoke: the room's own level."""
        if len(pcm):
            self._quiet.append(max(SILENT_DBFS, level_dbfs(pcm)))

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
        loud = self._median_dbfs(held[self.skip_samples:self.probe_samples]) > (
            self.quiet_dbfs + self.rise_db)
        if loud and self.echo_free is not True:
            self.echo_free = False
            self._verdict = Verdict.ECHO
            self._held = []
            return Verdict.ECHO, []
        if not loud:
            self.echo_free = True
        self._verdict = Verdict.CLEAR
        released, self._held = self._held, []
        return Verdict.CLEAR, released

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
