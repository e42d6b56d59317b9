"""The end of a turn decided by a turn model: when it is asked, what its answer does, and
what happens when it fails. A scripted VAD (nonzero frames are speech) and a stand-in
model whose scores are given, or computed from the audio."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assistant.voice.speech_out import SpokenReply
from audio.memory_out import MemorySpeaker
from audio.segmenter import (
    Segmenter,
    SegmenterSettings,
    SpeechPaused,
    SpeechResumed,
    SpeechStarted,
    TurnChecked,
    Utterance,
)
from audio.turn_policy import TurnPolicy, TurnSettings, Words
from models.base import CancelToken
from tests.support.fakes import ToneTextToSpeech

F = 480  # samples in a 30 ms frame at 16 kHz
# In frames: pre-roll 10, the model asked at 7 silent frames (210 ms), the turn ended at
# 50 (1,500 ms) whatever it says; the fixed end silence is 24 (720 ms).


class ScriptedTurnModel:
    """Gives the scores it was handed, in order, and keeps the audio it was asked about."""

    def __init__(self, *scores: float) -> None:
        self.scores = list(scores)
        self.asked: list[np.ndarray] = []

    def __call__(self, pcm: np.ndarray) -> float:
        self.asked.append(pcm.copy())
        return self.scores.pop(0)


def audio_of(*runs: tuple[bool, int], seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    parts = []
    for speech, frames in runs:
        values = rng.integers(1, 2000, frames * F) if speech else np.zeros(frames * F)
        parts.append(values.astype(np.int16))
    return np.concatenate(parts)


def segmenter(model, failures: list[str] | None = None, **turn) -> Segmenter:
    on_failure = failures.append if failures is not None else None
    policy = TurnPolicy(model, TurnSettings(**turn), on_failure=on_failure)
    return Segmenter(SegmenterSettings(), is_speech=lambda frame: any(frame), turn=policy)


def test_a_finished_turn_ends_at_the_first_check_not_after_the_fixed_silence():
    model = ScriptedTurnModel(0.93)
    audio = audio_of((False, 40), (True, 30), (False, 80))
    events = segmenter(model).feed(audio)

    assert [type(e) for e in events] == [SpeechStarted, SpeechPaused, TurnChecked, Utterance]
    checked, utterance = events[2], events[3]
    assert (checked.sample, checked.speech_end_sample) == (77 * F, 70 * F)
    assert checked.silence_ms == 210 and checked.score == 0.93 and checked.finished
    # The turn ends where the model was asked: 210 ms after the speech, not 720 ms.
    assert (utterance.speech_end_sample, utterance.end_sample) == (70 * F, 77 * F)
    assert utterance.turn_score == 0.93
    # It judged the turn from its start (pre-roll included) to the moment it was asked.
    assert np.array_equal(model.asked[0], audio[30 * F : 77 * F])


def test_an_unfinished_turn_waits_for_the_longest_silence_and_is_asked_once():
    model = ScriptedTurnModel(0.2)
    events = segmenter(model).feed(audio_of((False, 40), (True, 30), (False, 80)))

    assert [type(e) for e in events] == [SpeechStarted, SpeechPaused, TurnChecked, Utterance]
    assert not events[2].finished
    assert events[3].end_sample == (70 + 50) * F  # 1,500 ms of silence
    assert events[3].turn_score == 0.2
    assert len(model.asked) == 1


def test_the_user_going_on_after_an_unfinished_verdict_keeps_one_turn():
    model = ScriptedTurnModel(0.1, 0.8)
    audio = audio_of((False, 40), (True, 30), (False, 30), (True, 20), (False, 60))
    events = segmenter(model).feed(audio)

    kinds = [type(e) for e in events]
    assert kinds == [SpeechStarted, SpeechPaused, TurnChecked, SpeechResumed, SpeechPaused,
                     TurnChecked, Utterance]
    first, second, utterance = events[2], events[5], events[6]
    assert (first.finished, second.finished) == (False, True)
    # One utterance holds both stretches of speech, so one message, not two.
    assert (utterance.start_sample, utterance.speech_end_sample) == (30 * F, 120 * F)
    assert utterance.turn_score == 0.8
    # The second verdict was given on the whole turn, first stretch included.
    assert len(model.asked[1]) == (120 + 7 - 30) * F


def test_a_pause_shorter_than_the_check_does_not_ask_the_model():
    model = ScriptedTurnModel(0.9)
    events = segmenter(model).feed(audio_of((False, 40), (True, 30), (False, 5), (True, 20),
                                            (False, 6)))
    assert not any(isinstance(e, TurnChecked) for e in events)
    assert model.asked == []


def test_a_sound_too_short_to_be_speech_is_never_judged():
    model = ScriptedTurnModel()
    events = segmenter(model).feed(audio_of((False, 40), (True, 4), (False, 60)))
    assert [type(e) for e in events] == [SpeechStarted]
    assert model.asked == []


def test_a_lower_threshold_ends_a_turn_a_higher_one_waits():
    audio = audio_of((False, 40), (True, 30), (False, 80))
    eager = segmenter(ScriptedTurnModel(0.4), threshold=0.3).feed(audio)
    patient = segmenter(ScriptedTurnModel(0.4), threshold=0.5).feed(audio)
    assert eager[-1].end_sample == 77 * F
    assert patient[-1].end_sample == 120 * F


def test_words_that_cannot_end_a_request_keep_a_finished_sounding_turn_open():
    """"Set a timer for…" sounds finished to the turn model; its words do not end a
    request, so the turn waits for the longest silence, and the user who goes on is heard
    in the same utterance."""
    asked: list[tuple[int, int]] = []

    def words(speech_pcm: np.ndarray, speech_end: int) -> Words:
        asked.append((len(speech_pcm), speech_end))
        return Words("ends on “for”") if len(asked) == 1 else Words()

    audio = audio_of((False, 40), (True, 30), (False, 30), (True, 20), (False, 60))
    events = segmenter(ScriptedTurnModel(0.95, 0.97)).feed(audio, words)

    checks = [e for e in events if isinstance(e, TurnChecked)]
    assert [(c.finished, c.words) for c in checks] == [(False, "ends on “for”"), (True, None)]
    (utterance,) = [e for e in events if isinstance(e, Utterance)]
    assert (utterance.start_sample, utterance.speech_end_sample) == (30 * F, 120 * F)
    # The words were asked about the speech up to each pause, without the pause.
    assert asked == [((70 - 30) * F, 70 * F), ((120 - 30) * F, 120 * F)]


def test_open_words_alone_wait_for_the_longest_silence():
    events = segmenter(ScriptedTurnModel(0.99)).feed(
        audio_of((False, 40), (True, 30), (False, 80)), lambda pcm, end: Words("trails off"))
    assert events[-1].end_sample == (70 + 50) * F
    assert events[-2].words == "trails off" and not events[-2].finished


def test_a_whole_sentence_the_voice_sounded_unfinished_in_ends_after_720_ms():
    whole = lambda pcm, end: Words(whole=True)  # noqa: E731
    events = segmenter(ScriptedTurnModel(0.1)).feed(
        audio_of((False, 40), (True, 30), (False, 80)), whole)
    checked, utterance = events[-2], events[-1]
    assert not checked.finished and checked.words == "a whole sentence"
    assert checked.ends_after_ms == 720
    assert utterance.end_sample - utterance.speech_end_sample == 24 * F
    # The user who goes on within it keeps the turn: the next pause is judged afresh.
    events = segmenter(ScriptedTurnModel(0.1, 0.1)).feed(
        audio_of((False, 40), (True, 30), (False, 20), (True, 20), (False, 80)), whole)
    (utterance,) = [e for e in events if isinstance(e, Utterance)]
    assert utterance.speech_end_sample == 110 * F


def test_a_failing_model_is_reported_once_and_the_fixed_silence_takes_over():
    failures: list[str] = []

    def broken(pcm: np.ndarray) -> float:
        raise RuntimeError("onnxruntime: bad input")

    seg = segmenter(broken, failures)
    audio = audio_of((False, 40), (True, 30), (False, 40), (True, 30), (False, 40))
    events = seg.feed(audio)

    assert len(failures) == 1
    assert "turn model failed" in failures[0] and "fixed silence" in failures[0]
    ends = [e.end_sample - e.speech_end_sample for e in events if isinstance(e, Utterance)]
    assert ends == [24 * F, 24 * F]  # nothing said is lost; each turn ends at 720 ms
    assert not any(isinstance(e, TurnChecked) for e in events)


def test_a_score_that_is_not_a_number_does_not_end_the_turn():
    events = segmenter(ScriptedTurnModel(float("nan"))).feed(
        audio_of((False, 40), (True, 30), (False, 80)))
    assert events[2].score == 0.0 and not events[2].finished


def score_of_the_audio(pcm: np.ndarray) -> float:
    """A stand-in that, like the real model, depends on nothing but the audio."""
    return int(np.abs(pcm[-8 * F:].astype(np.int64)).sum()) % 100 / 100


def summary(events) -> list[tuple]:
    return [(type(e).__name__, getattr(e, "sample", None), getattr(e, "end_sample", None),
             getattr(e, "score", None)) for e in events]


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(1, 3000), min_size=1, max_size=40), st.integers(0, 5))
def test_the_same_audio_gives_the_same_turns_however_it_is_chunked(sizes, seed):
    audio = audio_of((False, 20), (True, 25), (False, 12), (True, 15), (False, 60),
                     (True, 20), (False, 60), seed=seed)
    whole = segmenter(score_of_the_audio).feed(audio)
    seg, chunked, at = segmenter(score_of_the_audio), [], 0
    while at < len(audio):
        size = sizes[len(chunked) % len(sizes)]
        chunked += seg.feed(audio[at:at + size])
        at += size
    assert summary(chunked) == summary(whole)


@pytest.mark.parametrize("turn, message", [
    ({"threshold": 0.0}, "threshold"), ({"threshold": 1.5}, "threshold"),
    ({"threshold": float("nan")}, "threshold"), ({"check_ms": 0}, "check_ms"),
    ({"max_silence_ms": 100}, "cannot exceed"),
])
def test_bad_turn_settings_say_which(turn, message):
    with pytest.raises(ValueError, match=message):
        TurnSettings(**turn)


def test_a_reply_does_not_start_talking_while_the_user_is_speaking():
    """Half duplex hears nothing while Parley talks: a reply that is ready while the user
    goes on must wait for them, so their words are heard whole (and answered next)."""
    talking = threading.Event()
    talking.set()
    speaker = MemorySpeaker()
    reply = SpokenReply(ToneTextToSpeech(), speaker, CancelToken(),
                        user_speaking=talking.is_set)
    reply.say("Hello there.")
    reply.close()
    assert not reply.first_audio.wait(0.3)  # the user still talks: nothing played
    assert speaker.played_seconds == 0
    talking.clear()  # the user's utterance ended
    assert reply.first_audio.wait(10)
    reply.join()
    assert [s.text for s in reply.sentences] == ["Hello there."]
    assert reply.floor_wait_s >= 0.3


def test_a_reply_stopped_while_waiting_for_the_user_never_plays():
    speaker, cancel = MemorySpeaker(), CancelToken()
    reply = SpokenReply(ToneTextToSpeech(), speaker, cancel, user_speaking=lambda: True)
    reply.say("Hello there.")
    reply.close()
    assert not reply.first_audio.wait(0.2)
    cancel.cancel()
    assert reply.first_audio.wait(10)
    assert speaker.played_seconds == 0 and reply.sentences == []


def test_the_first_voiced_frame_counts_as_the_user_talking_before_speech_has_started():
    """Speech starts only after 2 voiced frames in 4; a reply ready in between must not
    start over the user's first word."""
    seg = Segmenter(SegmenterSettings(), is_speech=lambda frame: any(frame))
    seg.feed(audio_of((False, 20)))
    assert not seg.voice_heard
    seg.feed(audio_of((True, 1)))
    assert seg.voice_heard and not seg.in_speech
    seg.feed(audio_of((True, 1)))
    assert seg.voice_heard and seg.in_speech
    seg.feed(audio_of((True, 20), (False, 40)))
    assert not seg.in_speech and not seg.voice_heard
