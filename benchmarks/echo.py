"""Echo cancellation benchmark: Parley's own voice coming back from the speakers.

    python -m benchmarks.echo

Parley's replies (the Piper voice) are played into simulated rooms: a direct echo 60 ms
later at -6 dB, the same at -12 dB, and a reverberant room (RT60 0.3 s, -6 dB), each with
room noise at -60 dBFS. Through the real segmenter, Whisper and WebRTC's AEC3, as
`--echo-cancel` runs them, it prints:

- echo reduction: how much quieter Parley's voice is after the canceller, in dB, over
  the whole session and after its first 2 s;
- own words heard: what listening during the replies transcribes of Parley's own voice,
  without the canceller (a microphone beside the speaker) and with it;
- barge-in: people talking over a reply at 0 dB (as loud as the echo): heard or not, how
  soon after they began, and their words' error rate;
- the wake word over Parley's voice: "Okay Nabu." said 1 s into a reply, as loud as its
  echo and 6 dB louder, heard at okay_nabu's own cutoff and at the one Parley uses while
  it speaks with the canceller on; and the highest score Parley's cancelled voice alone
  reaches; CPU: the canceller's share of one core;
- the echo probe (half duplex, no canceller): each reply's start judged an echo or not,
  from -6 to -40 dB and on a headset, what of Parley's voice is heard where it is judged
  clear, and whether a person on a headset going on 0.1–1.0 s into a reply is heard.

Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import re
import statistics
import time

import numpy as np

from audio.echo import FRAME, EchoCanceller
from audio.echo_probe import EchoProbe, Verdict
from audio.segmenter import (
    ECHO_CANCELLED_FLOOR_DBFS,
    Segmenter,
    SegmenterSettings,
    SpeechStarted,
    Utterance,
)
from audio.wakeword import OVER_OWN_VOICE_CUTOFF, WakeWordDetector, find_wake_word
from tests.support import espeak
from tests.support import speech_samples as samples
from tests.support.spoken import speech_at

RATE = 16000
BLOCK = 480
REPLIES = (
    "It is a quarter past three in the afternoon.",
    "Sure. I set a timer for ten minutes, and I will tell you when it is done.",
    "Seven times six is forty two. Is there anything else I can do for you?",
    "The sea covers most of the planet, and it is home to countless creatures, from tiny "
    "plankton to the blue whale.",
    "I found two messages about the billing port. You said it moved to 8443 on Monday.",
    "Good morning! Today is Saturday, the fifth of December.",
)
ROOMS = {"direct -6 dB": (-6.0, False), "direct -12 dB": (-12.0, False),
         "reverberant -6 dB": (-6.0, True)}


def parley_replies() -> list[np.ndarray]:
    from models.piper_tts import PiperTextToSpeech

    tts = PiperTextToSpeech(None)
    return [speech_at(tts, text, RATE).astype(np.float64) for text in REPLIES]


def room_response(gain_db: float, reverberant: bool) -> np.ndarray:
    """The room's impulse response: the direct path 60 ms later, and a decaying tail."""
    response = np.zeros(int(0.06 * RATE) + 1)
    response[-1] = 1.0
    if reverberant:
        rng = np.random.default_rng(5)
        t = np.arange(int(0.4 * RATE)) / RATE
        tail = rng.normal(0, 1, len(t)) * np.exp(-6.9 * t / 0.3) * 0.08  # -60 dB at 0.3 s
        response = np.concatenate([response, tail])
    return response * 10 ** (gain_db / 20)


def through_room(far: np.ndarray, response: np.ndarray, rng) -> np.ndarray:
    echo = np.convolve(far, response)[:len(far)]
    return echo + rng.normal(0, 32768 * 10 ** (-60 / 20), len(far))


def cancel(near: np.ndarray, far: np.ndarray) -> tuple[np.ndarray, float]:
    """The canceller over the whole stream in 30 ms blocks; (clean, CPU seconds)."""
    canceller = EchoCanceller()
    near16 = np.clip(near, -32768, 32767).astype(np.int16)
    far16 = np.clip(far, -32768, 32767).astype(np.int16)
    out = np.empty_like(near16)
    started = time.process_time()
    for i in range(0, len(near16) - BLOCK + 1, BLOCK):
        out[i:i + BLOCK] = canceller.process(near16[i:i + BLOCK], far16[i:i + BLOCK])
    cpu = time.process_time() - started
    # The canceller returns each block a frame late: put the cleaned audio back in place.
    end = len(near16) // BLOCK * BLOCK
    return np.concatenate([out[FRAME:end], np.zeros(FRAME, dtype=np.int16)]), cpu


def level(pcm: np.ndarray) -> float:
    return 10 * np.log10(np.mean(np.asarray(pcm, np.float64) ** 2) + 1e-9)


def utterances(pcm: np.ndarray, floor: bool) -> list[Utterance | SpeechStarted]:
    settings = SegmenterSettings(start_floor_dbfs=ECHO_CANCELLED_FLOOR_DBFS) if floor \
        else SegmenterSettings()
    segmenter = Segmenter(settings)
    pcm = np.clip(pcm, -32768, 32767).astype(np.int16)
    events = []
    for i in range(0, len(pcm), BLOCK):
        events += [e for e in segmenter.feed(pcm[i:i + BLOCK])
                   if isinstance(e, Utterance | SpeechStarted)]
    end = segmenter.flush()
    return events + ([end] if end is not None else [])


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9']+", text.lower())


def own_voice(replies, stt) -> None:
    gap = np.zeros(int(1.5 * RATE))
    far = np.concatenate([part for reply in replies for part in (reply, gap)])
    active = np.array([level(far[i:i + BLOCK]) > 40 for i in range(0, len(far) - BLOCK + 1,
                                                                     BLOCK)])
    print(f"\nParley's voice: {len(replies)} replies, {len(far) / RATE:.0f} s, played into "
          "each room (and listened to all the while)")
    print(f"  {'room':<20}{'reduction':>10}{'after 2 s':>11}{'words heard, without':>23}"
          f"{'with':>7}{'CPU':>8}")
    for name, (gain, reverberant) in ROOMS.items():
        rng = np.random.default_rng(1)
        near = through_room(far, room_response(gain, reverberant), rng)
        clean, cpu = cancel(near, far)
        blocks = np.arange(len(clean) // BLOCK)
        mask = np.repeat(active[:len(blocks)], BLOCK)
        settled = mask & (np.arange(len(clean)) > 2 * RATE)
        reduction = level(near[:len(clean)][mask]) - level(clean[mask])
        steady = level(near[:len(clean)][settled]) - level(clean[settled])
        heard = {}
        for label, pcm, floor in (("without", near, False), ("with", clean, True)):
            said = [stt.transcribe(u.speech_pcm).text for u in utterances(pcm, floor)
                    if isinstance(u, Utterance)]
            heard[label] = sum(len(words(text)) for text in said)
        print(f"  {name:<20}{reduction:>8.1f} dB{steady:>8.1f} dB{heard['without']:>16} words"
              f"{heard['with']:>7}{100 * cpu / (len(clean) / RATE):>7.2f}%")
    print(f"  ({sum(len(words(t)) for t in REPLIES)} words were spoken in all)")


def talkers() -> list[tuple[np.ndarray, str]]:
    people = [(s.pcm.astype(np.float64), s.transcript) for s in samples.librivox()]
    for text in ("What time is it?", "Stop, that is enough.", "Set a timer for five minutes."):
        people.append((espeak.espeak(text).astype(np.float64), text))
    return people


def barge_in(replies, stt) -> None:
    import jiwer

    people = talkers()
    warm_up = replies[0]  # the canceller has heard one reply before anyone talks over one
    print(f"\nBarge-in: {len(people)} people (LibriVox and espeak-ng) talking over a reply, "
          "1 s into it, as loud as its echo; the reply stops where they are heard")
    print(f"  {'room':<20}{'':<9}{'heard':>7}{'too early':>11}{'after (ms)':>12}"
          f"{'word errors':>13}")
    clean_errors = [min(1.0, jiwer.wer(" ".join(words(text)), " ".join(
        words(stt.transcribe(voice.astype(np.int16)).text)) or "-")) for voice, text in people]
    for name, (gain, reverberant) in ROOMS.items():
        response = room_response(gain, reverberant)
        for label in ("without", "with"):
            heard = early = 0
            delays, errors = [], []
            for index, (voice, text) in enumerate(people):
                reply = replies[1 + index % (len(replies) - 1)]
                far, voice, onset = talking_over(warm_up, reply, voice, gain, tail_s=3)
                first = listen(far, voice, onset, response, label, index, len(warm_up))
                starts = [e.sample + len(warm_up) for e in first
                          if isinstance(e, SpeechStarted)]
                early += any(start < onset - RATE // 10 for start in starts)
                after = [start for start in starts if start >= onset - RATE // 10]
                if not after:
                    continue
                heard += 1
                delays.append((after[0] - onset) * 1000 / RATE)
                # Parley stops the reply there; the device's buffer (0.1 s) still plays.
                stopped = far.copy()
                stopped[after[0] + RATE // 10:] = 0
                events = listen(stopped, voice, onset, response, label, index, len(warm_up))
                said = " ".join(stt.transcribe(u.speech_pcm).text for u in events
                                if isinstance(u, Utterance)
                                and u.end_sample + len(warm_up) > onset)
                errors.append(min(1.0, jiwer.wer(" ".join(words(text)),
                                                 " ".join(words(said)) or "-")))
            delay = f"{statistics.median(delays):.0f}" if delays else "-"
            error = f"{100 * statistics.mean(errors):.0f}%" if errors else "-"
            print(f"  {name if label == 'without' else '':<20}{label:<9}"
                  f"{heard:>4}/{len(people)}{early:>8}/{len(people)}{delay:>12}{error:>13}")
    print(f"  word errors: Whisper on the same people alone, with no reply: "
          f"{100 * statistics.mean(clean_errors):.0f}%")
    print("  too early: speech was detected before the person began (Parley's own voice)")


def talking_over(warm_up, reply, voice, gain_db: float, tail_s: int):
    """Someone talking 1 s into `reply`, which follows `warm_up` (so the canceller has
    heard Parley before) and a second of quiet: (the far end, `voice` as loud as the
    reply's echo in a room of `gain_db`, where it begins)."""
    lead = len(warm_up) + RATE  # the reply starts here
    far = np.concatenate([warm_up, np.zeros(RATE), reply, np.zeros(tail_s * RATE)])
    loudness = speech_rms(reply) * 10 ** (gain_db / 20)
    return far, voice * loudness / speech_rms(voice), lead + RATE


def speech_rms(pcm: np.ndarray) -> float:
    return float(np.sqrt(np.mean(pcm[np.abs(pcm) > 300] ** 2)))


def microphone(far, voice, onset, response, seed) -> tuple[np.ndarray, np.ndarray]:
    """What the microphone hears: (the room's echo of `far` alone, and with `voice` from
    `onset`)."""
    echo = through_room(far, response, np.random.default_rng(seed))
    near = echo.copy()
    near[onset:onset + len(voice)] += voice[:len(near) - onset]
    return echo, near


def listen(far, voice, onset, response, label, seed, skip):
    """The segmenter's events on what the microphone gives Parley: the room's echo of
    `far` plus `voice` from `onset`, through the canceller (`label` "with") or not."""
    near = microphone(far, voice, onset, response, seed)[1]
    pcm = cancel(near, far)[0] if label == "with" else near
    return utterances(pcm[skip:], floor=label == "with")


def wake_word_over_voice(replies) -> None:
    from benchmarks.wake import SPEEDS, piper_clips

    clips = [espeak.espeak("Okay Nabu.", voice, speed).astype(np.float64)
             for voice in espeak.VOICES for speed in SPEEDS]
    clips += [clip.astype(np.float64) for clip in piper_clips(["Okay Nabu."])]
    own = find_wake_word("okay_nabu").cutoff
    print(f"\nThe wake word over Parley's voice: \"Okay Nabu.\" in {len(clips)} voices and "
          "speeds, 1 s into a reply, through the canceller")
    print(f"  {'room':<20}{'louder':>7}{f'cutoff {own:g}':>12}"
          f"{f'{OVER_OWN_VOICE_CUTOFF:g}':>8}{'echo alone':>12}")
    for name, (gain, reverberant) in ROOMS.items():
        response = room_response(gain, reverberant)
        for louder in (0, 6):
            best, alone = [], 0.0
            for index, voice in enumerate(clips):
                reply = np.concatenate([replies[1 + index % 5], replies[1 + (index + 1) % 5]])
                far, voice, onset = talking_over(replies[0], reply, voice, gain + louder,
                                                 tail_s=2)
                echo, near = microphone(far, voice, onset, response, index)
                scores = np.array(WakeWordDetector("okay_nabu").scores(cancel(near, far)[0]))
                best.append(scores[onset // 160:(onset + len(voice) + RATE) // 160].max())
                alone = max(alone, *WakeWordDetector("okay_nabu").scores(cancel(echo, far)[0]))
            best_scores = np.array(best)
            print(f"  {name if louder == 0 else '':<20}{f'+{louder} dB':>7}"
                  f"{f'{np.sum(best_scores > own)}/{len(clips)}':>12}"
                  f"{f'{np.sum(best_scores > OVER_OWN_VOICE_CUTOFF)}/{len(clips)}':>8}"
                  f"{alone:>12.3f}")


PROBE_ROOMS = {"headset (no echo)": None, **ROOMS, "direct -20 dB": (-20.0, False),
               "direct -30 dB": (-30.0, False), "direct -40 dB": (-40.0, False)}
"""A headset, the rooms above, and speakers turned down or far from the microphone."""
GOING_ON_S = (0.1, 0.2, 0.3, 0.6, 1.0)
"""Where into a reply the person on the headset goes on talking."""
FIRST_MOMENTS_S = 1.5
"""How long into a reply half duplex listens, at most, for a user who goes on."""


def room_noise(rng, seconds: float) -> np.ndarray:
    return rng.normal(0, 32768 * 10 ** (-60 / 20), int(seconds * RATE))


OUTPUT_LATENCY_S = 0.1
"""The sound device's buffer (what `Speaker` asks for): the echo comes this much later."""


def int16(pcm: np.ndarray) -> np.ndarray:
    return np.clip(pcm, -32768, 32767).astype(np.int16)


def probed(probe: EchoProbe, quiet: np.ndarray, microphone_pcm: np.ndarray,
           far: np.ndarray | None) -> tuple[Verdict, np.ndarray]:
    """A reply as Parley plays it: the room's quiet heard before it, then the microphone
    while it plays, in 30 ms blocks; the reply's own audio (`far`) shown to the probe
    as it is handed to the output, unless None. The verdict, and what is heard in the
    first moments (nothing where it is judged an echo)."""
    for at in range(0, len(quiet) - BLOCK + 1, BLOCK):
        probe.quiet(int16(quiet[at:at + BLOCK]))
    if far is not None:
        probe.far(int16(far))
    first = microphone_pcm[:int(FIRST_MOMENTS_S * RATE)]
    verdict, heard = Verdict.WAIT, []
    for at in range(0, len(first), BLOCK):
        verdict, blocks = probe.playing(int16(first[at:at + BLOCK]))
        heard += blocks
    heard += probe.ended()
    return verdict, np.concatenate(heard) if heard else np.zeros(0, np.int16)


def said_in(pcm: np.ndarray, stt) -> str:
    return " ".join(stt.transcribe(u.speech_pcm).text for u in utterances(pcm, floor=False)
                    if isinstance(u, Utterance))


def echo_probe(replies, stt) -> None:
    print(f"\nThe echo probe (half duplex): {len(replies)} replies played into each room after "
          "1.5 s of its quiet, the echo arriving after the device's 0.1 s and the room's "
          "delay, judged from the first 400 ms; what is heard of the first "
          f"{FIRST_MOMENTS_S:g} s where they are judged clear. By the level alone, and "
          "with the reply's own audio looked for in the microphone (Parley's)")
    print(f"  {'room':<20}{'the level alone':>26}{'with the reply':>28}")
    print(f"  {'':<20}{'echo':>8}{'clear':>7}{'own words':>11}{'echo':>10}{'clear':>7}"
          f"{'own words':>11}")
    lead = np.zeros(int(OUTPUT_LATENCY_S * RATE))
    for name, room in PROBE_ROOMS.items():
        row = ""
        for shown in (False, True):
            rng, probe = np.random.default_rng(3), EchoProbe()
            verdicts, own = [], 0
            for reply in replies:
                mic = (room_noise(rng, len(reply) / RATE) if room is None else through_room(
                    np.concatenate([lead, reply]), room_response(*room), rng))
                verdict, heard = probed(probe, room_noise(rng, 1.5), mic,
                                        reply[:RATE] if shown else None)
                verdicts.append(verdict)
                if verdict is Verdict.CLEAR and room is not None:
                    own += len(words(said_in(heard, stt)))
            row += (f"{verdicts.count(Verdict.ECHO):>{8 if not shown else 10}}"
                    f"{verdicts.count(Verdict.CLEAR):>7}{own:>11}")
        print(f"  {name:<20}{row}")
    print(f"  ({sum(len(words(t)) for t in REPLIES)} words spoken in all; 'own words': "
          "Parley's voice transcribed where the probe let the microphone be heard)")
    headset(replies, stt)


def headset(replies, stt) -> None:
    import jiwer

    people = talkers()
    print(f"\nOn a headset, {len(people)} people (LibriVox and espeak-ng) go on talking "
          "into a reply's first moments, after one reply showed the microphone does not "
          "hear Parley; 'whole': their words as Whisper hears them alone")
    print(f"  {'into the reply':<16}{'whole':>7}{'word errors':>13}")

    def error(text: str, said: str) -> float:
        return min(1.0, jiwer.wer(" ".join(words(text)), " ".join(words(said)) or "-"))
    alone = [error(text, stt.transcribe(int16(voice)).text) for voice, text in people]
    for onset_s in GOING_ON_S:
        whole, errors = 0, []
        for index, (voice, text) in enumerate(people):
            rng, probe = np.random.default_rng(10 + index), EchoProbe()
            reply = replies[index % len(replies)][:RATE]
            probed(probe, room_noise(rng, 1.5), room_noise(rng, 2.0), reply)  # one before
            onset = int(onset_s * RATE)
            mic = room_noise(rng, onset_s + len(voice) / RATE + 1.0)
            mic[onset:onset + len(voice)] += voice * 3000 / speech_rms(voice)
            # What the first moments hold back and hear, then the rest as the turn goes on.
            verdict, heard = probed(probe, room_noise(rng, 1.5), mic, reply)
            rest = mic[int(FIRST_MOMENTS_S * RATE):] if verdict is Verdict.CLEAR else []
            errors.append(error(text, said_in(np.concatenate([heard, int16(rest)]), stt)))
            whole += errors[-1] <= alone[index]
        print(f"  {f'{onset_s:g} s':<16}{whole:>4}/{len(people)}"
              f"{100 * statistics.mean(errors):>12.0f}%")
    print(f"  word errors: Whisper on the same people alone: {100 * statistics.mean(alone):.0f}%")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.echo",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=("own-voice", "barge-in", "wake-word", "probe"))
    args = parser.parse_args(argv)
    missing = espeak.missing_reason() or (None if samples.available()
                                          else samples.missing_reason())
    if missing:
        raise SystemExit(f"bench: {missing}")
    replies = parley_replies()
    if args.only in (None, "own-voice", "barge-in", "probe"):  # the wake word needs none
        from models.whisper_stt import WhisperSpeechToText

        stt = WhisperSpeechToText(None)
    if args.only in (None, "own-voice"):
        own_voice(replies, stt)
    if args.only in (None, "barge-in"):
        barge_in(replies, stt)
    if args.only in (None, "wake-word"):
        wake_word_over_voice(replies)
    if args.only in (None, "probe"):
        echo_probe(replies, stt)


if __name__ == "__main__":
    main()
