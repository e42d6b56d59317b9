"""What the voice loop listens to: half duplex, barge-in, the echo tail, the wake word.

Without barge-in Parley ignores the microphone while it speaks, and `echo_tail_ms` after,
so it does not answer its own voice; with it (a headset, or `--echo-cancel`) the user's
speech stops the reply.

With a wake word, every block goes to the wake word detector first. While Parley is
asleep the rest goes nowhere: the segmenter never sees it, so nothing is transcribed.
When the word is heard, a short chime plays and the audio after the word goes on to the
segmenter, so "okay nabu, what time is it" is one turn, heard as "what time is it".
Parley stays awake while the user speaks and for `follow_up_s` of audio after a reply, for
a follow-up without the wake word. While Parley speaks or a timer rings only the wake word
is listened for, and it stops them.
"""

from __future__ import annotations

import logging
import re
from collections import deque
from collections.abc import Callable

import numpy as np
import soxr

from assistant.voice.speech_out import SpokenReply
from assistant.voice.turns import TurnRecord, TurnSource, VoiceSettings
from audio.chime import wake_chime
from audio.echo_probe import EchoProbe, Verdict
from audio.playback import AudioOutput
from audio.segmenter import Segmenter, SpeechStarted
from audio.wakeword import SAMPLE_RATE, WakeWordDetector

log = logging.getLogger(__name__)

LOOKBACK_SAMPLES = SAMPLE_RATE * 120 // 1000
"""The request is listened to from 120 ms before the wake word was detected; measured on
18 requests in six voices, clean, 100 ms lost no word and took none of the wake word,
200 ms took part of it in two."""
HEARD_WORD_S = 5.0
"""After the wake word, the request must begin within this long (or the follow-up window,
if longer)."""


class TappedOutput:
    """The output, as the parts that play replies use it: each chunk played (but the wake
    chime) is also given to `tap`, with its rate. Everything else is the output's own."""

    def __init__(self, output: AudioOutput,
                 tap: Callable[[np.ndarray, int], None]) -> None:
        self._output, self._tap = output, tap

    def play(self, pcm: np.ndarray, sample_rate: int, cancel_echo: bool = True) -> None:
        self._output.play(pcm, sample_rate, cancel_echo)
        if cancel_echo:
            try:
                self._tap(pcm, sample_rate)
            except Exception:  # what listens must never stop what plays
                log.debug("the played audio could not be looked at", exc_info=True)

    def __getattr__(self, name: str):
        return getattr(self._output, name)


class Listener:
    """Decides what of the microphone's audio is heard, and when Parley is awake.

    It knows nothing of replies but what it is told: the one being spoken (`speech`), that
    one ended (`reply_ended`); the loop acts on what it says (`ignoring_microphone`,
    `barges_in`, the wake word heard)."""

    def __init__(self, settings: VoiceSettings, clock: Callable[[], float],
                 output: AudioOutput, segmenter: Segmenter,
                 wake_word: WakeWordDetector | None, sample_rate: int) -> None:
        self.settings = settings
        self.clock = clock
        self.output = output
        self.segmenter = segmenter
        self.wake_word = wake_word
        self.sample_rate = sample_rate
        """The voice's sample rate, for the wake chime."""
        self.listening = not settings.push_to_talk
        """Push-to-talk: Enter was pressed and the turn has not ended."""
        self.quiet_until = 0.0
        """Clock time the echo tail after Parley last spoke ends."""
        self.speech_started_at = float("-inf")
        """Clock time the user's speech last began."""
        self._silence_passed = 0
        """Samples of silence that passed without being fed (replay's waits)."""
        self._awake_until: float = float("-inf")
        """Where in the audio heard (the wake word detector's samples) the window in which
        no wake word is needed ends."""
        self._recent_audio: deque[np.ndarray] = deque()
        self._chime_ends = float("-inf")
        self.echo_probe = EchoProbe()
        """Half duplex: whether the microphone hears Parley, judged as each reply starts."""

    @property
    def hears_over_parley(self) -> bool:
        """The user is heard while Parley speaks: barge-in (a headset, an echo canceller),
        or a reply showed that the microphone does not hear Parley (`EchoProbe`)."""
        if self.wake_word is not None:
            return False
        return self.settings.barge_in or self.echo_probe.echo_free is True

    def played(self, pcm: np.ndarray, sample_rate: int) -> None:
        """A chunk of a reply went to the output: the echo probe looks for it in the
        microphone (half duplex; with barge-in or a wake word the probe is not used)."""
        if self.settings.barge_in or self.wake_word is not None or not self.echo_probe.wants_far:
            return
        if sample_rate != SAMPLE_RATE:
            pcm = soxr.resample(pcm, sample_rate, SAMPLE_RATE)
        self.echo_probe.far(pcm)

    def hear(self, pcm: np.ndarray, speech: SpokenReply | None, may_continue: bool,
             in_speech: bool) -> list[np.ndarray] | None:
        """What of the microphone's `pcm` the segmenter hears now: None while it is
        ignored, the blocks to hear otherwise (none while the start of a reply is probed
        for its echo). `may_continue`: the last turn's reply is in its first moments, and
        speech continues that turn; half duplex then listens through it, unless the
        microphone hears Parley's own voice (`EchoProbe`)."""
        if not self.listening:
            return None
        if not self.settings.barge_in and self.wake_word is None and self.parley_speaking():
            # Every reply is probed (what it shows serves the next ones); what it held
            # back is heard only in the first moments of the user's turn.
            verdict, blocks = self.echo_probe.playing(pcm)
            if may_continue and verdict is not Verdict.ECHO:
                return blocks
            return None if self.ignoring_microphone(speech) else [pcm]
        blocks = [*self.echo_probe.ended(), pcm]  # a reply shorter than the probe: heard
        # Where the microphone hears Parley, its echo tail is ignored as ever.
        if self.ignoring_microphone(speech, may_continue
                                    and self.echo_probe.echo_free is not False):
            return None
        if not in_speech and not self.parley_speaking():
            self.echo_probe.quiet(pcm)
        return blocks

    def ignoring_microphone(self, speech: SpokenReply | None,
                            may_continue: bool = False) -> bool:
        """Parley does not listen to itself (`speech`, the reply being spoken) unless
        barge-in is on, or the reply is in its first moments (`may_continue`), when the
        user who goes on continues their turn. With a wake word, only the wake word is
        listened for while Parley speaks: a colleague's voice or the radio must not stop
        it."""
        if (self.settings.barge_in or may_continue) and self.wake_word is None:
            return False
        playing = self.parley_speaking()
        # A reply the user stopped is no longer heard.
        if playing or (speech is not None and not speech.stopped
                       and speech.first_audio_at is not None):
            self.quiet_until = self.clock() + self.settings.echo_tail_ms / 1000
            return True
        return self.clock() < self.quiet_until

    def parley_speaking(self) -> bool:
        # The wake chime is not Parley talking: the request follows straight after it.
        return self.output.speaking and self.clock() >= self._chime_ends

    def barges_in(self, speech: SpokenReply | None) -> bool:
        """The user's speech began: True if it stops `speech`, the reply being heard."""
        if not self.settings.barge_in or self.wake_word is not None:
            return False
        return speech is not None and speech.first_audio_at is not None and not speech.stopped

    @staticmethod
    def time_barge_in(record: TurnRecord, event: SpeechStarted, detected_at_sample: int,
                      started: float, stopped: float) -> None:
        """How long detecting the user's voice took, and stopping the reply after it."""
        detect_ms = max(0, detected_at_sample - event.sample) * 1000 / SAMPLE_RATE
        record.timings.barge_in_detect_ms = round(detect_ms, 1)
        record.timings.barge_in_stop_ms = round((stopped - started) * 1000, 1)

    def reply_ended(self, record: TurnRecord, speech: SpokenReply, played: bool) -> None:
        """Ignore the room's echo of a reply that `played` to its end (a reply the user
        stopped was cut off at once), and open the follow-up window."""
        if played and not speech.stopped:
            self.quiet_until = self.clock() + self.settings.echo_tail_ms / 1000
        if self.wake_word is not None and record.source in (TurnSource.AUDIO, TurnSource.TEXT):
            self._stay_awake(self.settings.follow_up_s)

    def answer_expected(self, seconds: float) -> None:
        """Parley asked a question (it has just played) and listens for the answer while
        its reply waits: the echo tail is ignored, then the microphone is heard; with a
        wake word, for `seconds` of audio the answer needs none."""
        self.quiet_until = max(self.quiet_until,
                               self.clock() + self.settings.echo_tail_ms / 1000)
        if self.wake_word is not None:
            self._stay_awake(seconds)

    def through_wake_word(self, pcm: np.ndarray) -> tuple[np.ndarray | None, float | None]:
        """What of `pcm` to listen to: all of it while awake, what follows the wake word
        when it is heard in it (with when it was, in seconds of audio), None while asleep."""
        detector = self.wake_word
        assert detector is not None
        start = detector.samples_seen
        heard = detector.feed(pcm, speaking=self.parley_speaking())
        recent = self._recent_audio
        recent.append(pcm)
        while sum(map(len, recent)) - len(recent[0]) >= LOOKBACK_SAMPLES:
            recent.popleft()
        if heard is not None:
            at_s = (start + heard) / SAMPLE_RATE
            log.debug("heard the wake word %s at %.2f s", detector.name, at_s)
            # From a little before the detection: the model takes its time to be sure, and
            # over noise or Parley's voice the first word of the request had begun.
            before = np.concatenate(list(recent))
            cut = len(before) - len(pcm) + heard - LOOKBACK_SAMPLES
            return before[max(0, cut):], at_s
        if self.segmenter.in_speech or start + self._silence_passed < self._awake_until:
            return pcm, None
        return None, None

    def woke(self) -> None:
        """The wake word was heard (and what Parley was saying stopped): listen afresh."""
        # Stopped at once: no echo tail to wait out (it would swallow the request's start).
        self.quiet_until = float("-inf")
        self._stay_awake(max(HEARD_WORD_S, self.settings.follow_up_s))

    def _stay_awake(self, seconds: float) -> None:
        """Listen without the wake word for the next `seconds` of audio heard. Counted in
        audio, not on the clock: live they are the same, and a replay fed faster than
        real time, or a machine too busy to keep up, gets the same window."""
        assert self.wake_word is not None
        heard = self.wake_word.samples_seen + self._silence_passed
        self._awake_until = heard + round(seconds * SAMPLE_RATE)

    def silence_passed(self, seconds: float) -> None:
        """Time passed with no audio fed (replay's `wait_s`): it counts as silence heard."""
        self._silence_passed += round(seconds * SAMPLE_RATE)

    def chime(self) -> None:
        """The short sound that says Parley heard its name."""
        rate = self.sample_rate
        chime = wake_chime(rate)
        # Until it has played through the device's buffer (Speaker.latency), about.
        self._chime_ends = self.clock() + len(chime) / rate + 0.25
        # Not given to the echo canceller: until it has learnt the room (the first seconds
        # Parley plays), it cancels everything heard over a sound, and the user's first
        # word came straight after the chime ("tell me…" heard as "and me…"). Left in, the
        # chime's echo is a short beep before the request, which Whisper ignores.
        self.output.play(chime, rate, cancel_echo=False)

    def without_wake_word(self, text: str) -> str:
        """The transcript without the wake word, if its end slipped in ahead of the
        request ("Nabu, what time is it?" → "What time is it?"; "Okay Nabu." → "")."""
        if self.wake_word is None:
            return text
        words = self.wake_word.word.phrase.lower().split()
        tails = [r"\W*".join(map(re.escape, words[index:])) for index in range(len(words))]
        match = re.match(rf"\W*(?:{'|'.join(tails)})\b[\s,.!?]*", text, re.IGNORECASE)
        if match is None:
            return text
        rest = text[match.end():]
        return rest[:1].upper() + rest[1:]
