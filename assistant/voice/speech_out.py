"""Speaking one reply: sentences in as they are generated, audio out as each is synthesized."""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from assistant.errors import AssistantError
from assistant.events import Stage
from assistant.voice.turns import TurnRecord
from assistant.workers import Worker
from audio.errors import AudioError
from models.base import CancelToken
from models.errors import EngineError
from models.speech import SpokenAudio, TextToSpeech

log = logging.getLogger(__name__)
FLOOR_WAIT_S = 25.0
"""At most this long a reply waits for the user to stop talking (an utterance is cut at
20 s, and the turn model's longest wait follows it)."""
FLOOR_POLL_S = 0.02
STALL_MARGIN_S = 5.0
"""How much longer than the reply's audio playback may take before the speaker counts as hung."""


class SpeakerStalled(AssistantError):
    """The speaker took no audio for longer than the reply lasts."""

    stage = Stage.TTS


@dataclass
class SpokenSentence:
    text: str
    seconds: float


@dataclass(frozen=True)
class Say:
    """A sentence to synthesize and play."""

    text: str


@dataclass(frozen=True)
class Sound:
    """A sound (a timer's chime)."""

    audio: SpokenAudio


@dataclass(frozen=True)
class Mark:
    """Set once everything queued before it has been handed to the output."""

    reached: threading.Event


@dataclass(frozen=True)
class End:
    """No more will come."""


Step = Say | Sound | Mark | End
"""What a reply's speaking worker takes, in order."""


class SpokenReply:
    """Synthesizes and plays one reply's sentences on its own worker, in order.

    The first sentence is spoken as soon as it is complete, while the model is still
    writing the next ones. `stop()` drops what is queued and stops the output mid-sentence.
    """

    def __init__(
        self,
        tts: TextToSpeech,
        output,
        cancel: CancelToken,
        on_sentence: Callable[[SpokenSentence], None] | None = None,
        on_error: Callable[[str], None] | None = None,
        on_audio: Callable[[SpokenAudio], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        user_speaking: Callable[[], bool] | None = None,
    ) -> None:
        self.tts = tts
        self.output = output
        self.cancel = cancel
        self.on_sentence = on_sentence or (lambda sentence: None)
        self.on_error = on_error or (lambda message: None)
        self.on_audio = on_audio or (lambda chunk: None)
        self.clock = clock
        self.user_speaking = user_speaking or (lambda: False)
        """Whether the user is talking now: the reply's first audio waits until they stop,
        so Parley never starts talking over them (and, half duplex, every word they say
        is heard)."""
        self.floor_wait_s = 0.0
        """How long the first audio waited for the user to finish."""
        self.sentences: list[SpokenSentence] = []
        self.first_audio_at: float | None = None
        """Clock time at which the first audio was handed to the output."""
        self.stopped = False
        self.first_audio = threading.Event()
        """Set when the first audio is out (or speaking ended without any)."""
        self._queue: queue.Queue[Step] = queue.Queue()
        output.reset_counter()
        self._worker = Worker(self._run, "speak")

    def say(self, sentence: str) -> None:
        self._queue.put(Say(sentence))

    def play_sound(self, sound: SpokenAudio) -> None:
        """A sound (a timer's chime) in turn with the sentences."""
        self._queue.put(Sound(sound))

    def close(self) -> None:
        """No more sentences will come."""
        self._queue.put(End())

    def wait_played(self) -> None:
        """Wait until everything said so far has played (a question, before its answer is
        listened for), or the reply was stopped, or speaking failed (the reply then stands
        as text). A hung speaker is waited for no longer than `join` would."""
        said = threading.Event()
        self._queue.put(Mark(said))  # set by the worker once the sentences before it are out
        while not said.wait(FLOOR_POLL_S):
            if self._worker.done or self.stopped or self.cancel.cancelled:
                return
        left = sum(s.seconds for s in self.sentences) - self.output.played_seconds
        self.output.wait(timeout=max(0.0, left) + STALL_MARGIN_S)

    def stop(self) -> None:
        """The user spoke over it: drop the rest and silence the output now."""
        self.stopped = True
        self.output.stop()

    def join(self) -> None:
        """Wait until everything said was played, or the reply was stopped.

        A speaker that stops taking audio (a hung sound server) must not leave Parley deaf
        for ever: past the reply's length and a margin it is stopped and reported.
        """
        self._worker.wait()
        if self.stopped:
            return
        left = sum(s.seconds for s in self.sentences) - self.output.played_seconds
        if not self.output.wait(timeout=max(0.0, left) + STALL_MARGIN_S):
            self.output.stop()  # not the user's interruption: the reply stands as said
            raise SpeakerStalled("The speaker stopped playing; check the output device "
                                 "(`parley devices`).")

    @property
    def spoken_seconds(self) -> float:
        return self.output.played_seconds

    def heard_text(self) -> str:
        """The part of the reply that had played when it stopped (word-accurate estimate)."""
        left = self.spoken_seconds
        heard: list[str] = []
        for sentence in self.sentences:
            if left >= sentence.seconds - 0.05:
                heard.append(sentence.text)
                left -= sentence.seconds
                continue
            if left > 0 and sentence.seconds > 0:
                words = sentence.text.split()
                count = int(len(words) * left / sentence.seconds)
                if count:
                    heard.append(" ".join(words[:count]) + "…")
            break
        return " ".join(heard)

    def _wait_for_floor(self) -> None:
        """Wait while the user talks (bounded): they went on after their turn ended, and
        what they say now is heard whole and answered next."""
        started = time.monotonic()
        waited = False
        while (self.user_speaking() and not self.stopped and not self.cancel.cancelled
               and time.monotonic() - started < FLOOR_WAIT_S):
            waited = True
            time.sleep(FLOOR_POLL_S)
        self.floor_wait_s = time.monotonic() - started if waited else 0.0
        if waited:
            log.debug("the reply's first audio waited %.2f s for the user to stop talking",
                      self.floor_wait_s)

    def _run(self) -> None:
        try:
            self._speak_all()
        finally:
            self.first_audio.set()  # nobody waits for audio that will not come

    def _speak_all(self) -> None:
        while True:
            step = self._queue.get()
            if self.stopped or self.cancel.cancelled:
                return
            match step:
                case End():
                    return
                case Mark():  # `wait_played`: what came before is out
                    step.reached.set()
                case Sound():
                    self.output.play(step.audio.pcm, step.audio.sample_rate)
                    self.on_audio(step.audio)
                case Say():
                    try:
                        if not self._speak(step.text):
                            return
                    except Exception as exc:  # speech failed: the text reply still stands
                        if not isinstance(exc, EngineError | AudioError):
                            log.exception("speaking a sentence failed")
                        self.on_error(f"Speech output failed ({exc}); the reply is shown "
                                      "as text.")
                        return

    def _speak(self, text: str) -> bool:
        """Synthesize and play one sentence; False if the reply was stopped meanwhile."""
        spoken: SpokenSentence | None = None
        started = self.clock()
        for chunk in self.tts.synthesize(text):
            if self.stopped or self.cancel.cancelled:
                return False
            seconds = chunk.seconds
            log.debug("synthesized %.2f s of audio for %d characters in %.0f ms",
                      seconds, len(text), (self.clock() - started) * 1000)
            if self.first_audio_at is None:
                self._wait_for_floor()
                if self.stopped or self.cancel.cancelled:
                    return False
                self.first_audio_at = self.clock()
            self.output.play(chunk.pcm, chunk.sample_rate)
            self.on_audio(chunk)
            if spoken is None:  # a sentence may come back in several chunks
                spoken = SpokenSentence(text, seconds)
                self.sentences.append(spoken)
                self.on_sentence(spoken)
            else:
                spoken.seconds += seconds
            # Set once the sentence is shown as spoken: the reply that waits for it goes
            # on after, so its events come in one order on every run.
            self.first_audio.set()
        return True


@dataclass(frozen=True)
class NowSpeaking:
    """The reply being answered and spoken: what an interruption stops, and what a question
    to the user is said through."""

    record: TurnRecord
    cancel: CancelToken
    speech: SpokenReply
