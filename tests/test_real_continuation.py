"""A user who goes on after a pause at which Parley had already begun to answer: heard
whole, as one message, in half duplex and with barge-in (`parley replay`, real engines)."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from audio.files import write_wav
from tests.support import espeak, paused_speech
from tests.support.nodisk import run_parley

pytestmark = pytest.mark.real

RATE = 16000
GOES_ON_AFTER_S = 0.9
"""The pause after "Tell me a story.": the turn model calls the request finished at
210 ms, and the reply is under way (being heard, written or begun) when the user goes
on: well inside the reply's first moments however fast it began, and with room for a
busy machine feeding the replay late (at 1.4 and 1.8 s, a reply that began quickly could
be past them when the user's words arrived)."""


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    if espeak.missing_reason():
        pytest.skip(espeak.missing_reason())
    folder = tmp_path_factory.mktemp("clips")
    lead = np.zeros(RATE // 2, dtype=np.int16)
    pause = np.zeros(round(GOES_ON_AFTER_S * RATE), dtype=np.int16)
    write_wav(folder / "went_on.wav", np.concatenate([
        lead, espeak.espeak("Tell me a story."), pause,
        espeak.espeak("About a dog, please."), lead]), RATE)
    return folder / "went_on.wav"


def replay(tmp_path, clip, *flags: str, first: str | None = None) -> dict:
    """`clip` replayed, after a typed `first` turn if given."""
    session = tmp_path / "session.json"
    turns = [{"audio": str(clip)}] if first is None else [{"text": first}, {"audio": str(clip)}]
    session.write_text(json.dumps({"turns": turns}))
    result = run_parley(tmp_path, b"", "replay", str(session), "--ctx", "2048",
                        "--answer-tokens", "32", *flags)
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    return json.loads(result.stdout)


@pytest.mark.parametrize("flags", [(), ("--barge-in",)], ids=["half duplex", "barge-in"])
def test_words_said_after_the_reply_began_continue_the_same_turn(tmp_path, clip, flags):
    # A session under way: its first reply has shown that the microphone does not hear
    # Parley, so the next one starts as soon as it is ready.
    document = replay(tmp_path, clip, *flags, first="Hello!")
    _, turn = document["turns"]
    kinds = [event["type"] for event in turn["events"]]
    # The reply to "Tell me a story." was under way, then taken back when the user went on.
    assert "turn-continued" in kinds, [kind for kind in kinds if kind != "text-delta"]
    assert "interrupted" not in kinds
    # One message holds what was said before and after the pause, and it was answered.
    users = [m["content"] for m in document["messages"] if m["role"] == "user"]
    assert len(users) == 2 and users[0] == "Hello!", users
    assert "story" in users[1].lower() and "please" in users[1].lower(), users
    assert turn["heard"] == users[1]
    assert [m["role"] for m in document["messages"]][-1] == "assistant"


def test_on_speakers_parleys_own_voice_never_continues_the_turn(tmp_path, clip):
    """Replay's simulated room sends the reply back into the microphone: half duplex must
    not take Parley's own voice for the user going on."""
    alone = clip.parent / "story.wav"
    if not alone.exists():
        lead = np.zeros(RATE // 2, dtype=np.int16)
        write_wav(alone, np.concatenate([lead, espeak.espeak("Tell me a story."),
                                         np.zeros(RATE * 3, dtype=np.int16)]), RATE)
    document = replay(tmp_path, alone, "--echo", "-6")
    (turn,) = document["turns"]
    kinds = [event["type"] for event in turn["events"]]
    assert "turn-continued" not in kinds and "interrupted" not in kinds, kinds
    users = [m["content"] for m in document["messages"] if m["role"] == "user"]
    assert users == [turn["heard"]] and "story" in users[0].lower()
    assert turn["spoken_seconds"] > 0


def test_words_show_while_spoken_and_the_message_is_what_the_whole_utterance_says(tmp_path):
    # Real-time pace, so Whisper's passes run while the sentence is still being said.
    if espeak.missing_reason():
        pytest.skip(espeak.missing_reason())
    lead = np.zeros(RATE // 2, dtype=np.int16)
    clip = tmp_path / "long.wav"
    write_wav(clip, np.concatenate([lead, espeak.espeak(
        "Please tell me a short story about a brave little dog who lived by the sea."),
        lead]), RATE)
    live = replay(tmp_path, clip)["turns"][0]["events"]
    plain = replay(tmp_path, clip, "--live-transcript-s", "0")["turns"][0]["events"]
    partials = [e for e in live if e["type"] == "heard-partial"]
    assert len(partials) >= 2, live
    kept = [p["text"] for p in partials]
    assert all(later.startswith(earlier) for earlier, later in itertools.pairwise(kept)), kept
    assert [e["ms"] for e in partials] == sorted(e["ms"] for e in partials)
    # Shown before the final transcript (on a busy machine a pass may end in the moments
    # the end of the turn is being decided: after the last audio, still before the words).
    heard_ms = next(e["ms"] for e in live if e["type"] == "heard")
    assert partials[0]["ms"] < 0 and all(e["ms"] < heard_ms for e in partials)
    assert "little dog" in " ".join(p["text"] + " " + p["tentative"] for p in partials)
    [heard] = [e for e in live if e["type"] == "heard"]
    assert live.index(partials[-1]) < live.index(heard)
    # The message is what the utterance says transcribed whole, as without the passes.
    assert not [e for e in plain if e["type"] == "heard-partial"]
    assert heard["text"] == next(e for e in plain if e["type"] == "heard")["text"]


def test_speech_whisper_cannot_make_out_at_a_pause_is_not_lost_when_the_user_goes_on(tmp_path):
    # "Please add eggs, butter and" alone gives Whisper no words it is sure of, though the
    # turn model calls the pause finished (0.87): the turn must wait, not end with nothing.
    if espeak.missing_reason():
        pytest.skip(espeak.missing_reason())
    recording = paused_speech.espeak_with_breaks(
        "Please add eggs, butter and |0.7s| some flour to the shopping list.", "en-gb-x-rp")
    clip = tmp_path / "eggs.wav"
    write_wav(clip, np.concatenate([recording.pcm, np.zeros(RATE // 2, dtype=np.int16)]), RATE)
    document = replay(tmp_path, clip)
    users = [m["content"].lower() for m in document["messages"] if m["role"] == "user"]
    assert len(users) == 1 and "eggs" in users[0] and "flour" in users[0], users
    judged = [e for e in document["turns"][0]["events"] if e["type"] == "turn-judged"]
    assert judged[0]["words"] == "no words made out" and not judged[0]["finished"], judged
