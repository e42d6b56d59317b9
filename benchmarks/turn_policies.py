"""End-of-turn policies compared offline: chosen on synthetic speech, held on human speech.

    python -m benchmarks.turn_policies

Every pause of at least 210 ms in each recording, and its end, is found by Parley's own
segmenter; at each, Smart Turn is asked at several lengths of silence and Whisper
transcribes what was said up to it, as the voice loop would. Each candidate policy then
says at which silence it would end the turn. A pause inside a sentence that the policy
ends before the user goes on is a split; at the end of a request, the silence it waits
is the user's wait before anything can start.

- choose: sentences said by Piper and espeak-ng with a pause inside them, and short
  requests said by the two voices (the policy is chosen here);
- hold: people: the pocketsphinx commands, LibriVox readings with the reader's own pauses
  and joined with pauses between them, the JFK clip's three pauses inside one sentence.

Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tests.support import paused_speech as paused
from tests.support import speech_samples as samples

SILENCES_MS = (210, 360, 510, 720, 1020, 1500)
"""Where in a pause Smart Turn is asked (whole 30 ms frames, as the segmenter counts)."""
RATE = 16000


@dataclass
class PauseSeen:
    recording: str
    kind: str
    """"inside" a sentence, "between" two, or the "end" of the recording."""
    length_ms: float
    """How long the user was silent (the end: as long as anyone waits)."""
    scores: dict[int, float]
    words: str


def pauses_in(name: str, pcm: np.ndarray, inside_at: Callable[[int], str], stt,
              turn) -> list[PauseSeen]:
    """Every pause of 210 ms or more in `pcm` and its end, as Parley's segmenter finds
    them, with Smart Turn's scores and the words heard up to each."""
    from audio.segmenter import Segmenter, SegmenterSettings, SpeechPaused, SpeechResumed

    tail = np.zeros(RATE * 2, dtype=np.int16)
    audio = np.concatenate([pcm, tail])
    segmenter = Segmenter(SegmenterSettings(end_silence_ms=1800, max_utterance_s=120))
    events = segmenter.feed(audio)
    found: list[PauseSeen] = []
    for index, event in enumerate(events):
        if not isinstance(event, SpeechPaused):
            continue
        resumed = next((e for e in events[index + 1:] if isinstance(e, SpeechResumed)), None)
        length = (resumed.sample - event.sample) * 1000 / RATE if resumed else float("inf")
        if length < SILENCES_MS[0]:
            continue
        start = event.sample - len(event.pcm)
        scores = {ms: round(float(turn.score(audio[start:event.sample + ms * RATE // 1000])), 3)
                  for ms in SILENCES_MS if ms <= length}
        kind = "end" if resumed is None else inside_at(event.sample)
        found.append(PauseSeen(name, kind, length, scores, stt.transcribe(event.pcm).text))
    return found


def kind_in(recording: paused.PausedRecording) -> Callable[[int], str]:
    def kind(sample: int) -> str:
        pause = recording.pause_at(sample)
        return "between" if pause is not None and not pause.inside else "inside"
    return kind


def everything_inside(sample: int) -> str:
    return "inside"


# -- the candidates ------------------------------------------------------------------------------

Policy = Callable[[PauseSeen], float]
"""The silence (ms) at which a policy ends the turn at this pause, if it lasts."""


def audio_only(threshold: float = 0.5) -> Policy:
    """Today's: Smart Turn asked once at 210 ms; otherwise 1,500 ms."""
    return lambda p: 210 if p.scores[210] >= threshold else 1500


def fixed(ms: float) -> Policy:
    return lambda p: ms


def with_words(recheck: tuple[int, ...] = (), threshold: float = 0.5,
               words_done_ms: float | None = None) -> Policy:
    """Smart Turn at 210 ms and at each `recheck`, vetoed by words that cannot end a
    request; words that make a whole sentence end the turn at `words_done_ms`."""
    from assistant.voice.turn_words import unfinished_because, whole_sentence

    def policy(p: PauseSeen) -> float:
        if unfinished_because(p.words):
            return 1500
        for ms in (210, *recheck):
            if ms in p.scores and p.scores[ms] >= threshold:
                return ms
            if ms not in p.scores:  # the pause ended before this check
                return 1500
        if words_done_ms is not None and whole_sentence(p.words):
            return words_done_ms
        return 1500
    return policy


CANDIDATES: dict[str, Policy] = {
    "fixed 720 ms": fixed(720),
    "fixed 1,500 ms": fixed(1500),
    "turn model at 210 ms (before)": audio_only(),
    "turn model, open words wait": with_words(),
    "turn model, open words wait, asked again at 510": with_words((510,)),
    "turn model, open words wait, threshold 0.7": with_words(threshold=0.7),
    "turn model, open words wait, whole sentence 1,020": with_words(words_done_ms=1020),
    "Parley: open words wait, whole sentence 720": with_words(words_done_ms=720),
}


def judge(policy: Policy, pauses: list[PauseSeen]) -> dict:
    splits = [p for p in pauses if p.kind == "inside" and policy(p) <= p.length_ms]
    between = [p for p in pauses if p.kind == "between" and policy(p) <= p.length_ms]
    waits = [policy(p) for p in pauses if p.kind == "end"]
    return {"splits": splits, "between": between, "waits": waits,
            "inside": sum(p.kind == "inside" for p in pauses)}


def show(title: str, pauses: list[PauseSeen]) -> None:
    from benchmarks.voice import p90

    ends = sum(p.kind == "end" for p in pauses)
    inside = sum(p.kind == "inside" for p in pauses)
    print(f"\n{title}: {inside} pauses inside sentences (210 ms or longer), {ends} ends")
    print(f"  {'policy':50s} {'split':>6s} {'between':>8s} {'wait median':>12s} {'p90':>6s}")
    for name, policy in CANDIDATES.items():
        result = judge(policy, pauses)
        waits = result["waits"]
        print(f"  {name:50s} {len(result['splits']):6d} {len(result['between']):8d} "
              f"{statistics.median(waits):10.0f} ms {p90(waits):6.0f}")


def detail(pauses: list[PauseSeen]) -> None:
    from assistant.voice.turn_words import unfinished_because

    for p in pauses:
        scores = " ".join(f"{ms}:{score:.2f}" for ms, score in p.scores.items())
        words = unfinished_because(p.words) or ""
        print(f"    {p.kind:7s} {p.length_ms:6.0f} ms  {scores:48s} {words:16s} "
              f"{p.words[-60:]!r}  ({p.recording[:30]})")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.turn_policies",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--detail", action="store_true", help="every pause, its scores and words")
    args = parser.parse_args(argv)
    if not samples.available():
        raise SystemExit(samples.missing_reason())
    from benchmarks.turn_recordings import (
        ESPEAK_PAUSED,
        PIPER_PAUSED,
        jfk_clip,
        piper_with_pause,
        short_requests,
        whisper_with_words,
    )
    from benchmarks.voice import load_engines
    from models.smart_turn import SmartTurn

    _, stt, tts = load_engines()
    turn = SmartTurn()
    words_model = whisper_with_words()
    requests = short_requests(tts)
    chosen: list[PauseSeen] = []
    for recording in [*(piper_with_pause(tts, words_model, *s) for s in PIPER_PAUSED),
                      *(paused.espeak_with_breaks(text, voice) for voice, text in ESPEAK_PAUSED)]:
        chosen += pauses_in(recording.name, recording.pcm, kind_in(recording), stt, turn)
    held: list[PauseSeen] = []
    for request in requests:
        lead = np.concatenate([paused.silence(paused.LEAD_S), request.pcm])
        pauses = pauses_in(request.name, lead, everything_inside, stt, turn)
        (chosen if request.name.startswith(("piper", "espeak")) else held).extend(pauses)
    book = samples.librivox()
    for recording in [paused.readings_with_pauses(book[0:3], [0.4, 0.9]),
                      paused.readings_with_pauses(book[3:5], [0.6]), jfk_clip()]:
        held += pauses_in(recording.name, recording.pcm, kind_in(recording), stt, turn)
    show("Chosen on: Piper and espeak-ng, requests and sentences with a pause inside", chosen)
    if args.detail:
        detail(chosen)
    show("Held on: people (commands, LibriVox readings, the JFK clip)", held)
    if args.detail:
        detail(held)


if __name__ == "__main__":
    main()
