"""`parley replay` through the real `main()`, with stand-in engines: the JSON document it
prints (or writes to `--out`), and clips timed into a reply with `during_reply_ms`."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pytest

from assistant.cli.main import main
from audio.files import write_wav
from tests.support.clips import clip
from tests.support.command_line import without_user_settings
from tests.support.conversations import distinct_sentences, long_answer
from tests.support.fakes import ScriptedChatModel, ScriptedSpeechToText, ToneTextToSpeech

RATE = 16000
HELLO, OVER = 4000, 12000
SCRIPT = {HELLO: "Hello there, Parley.", OVER: "Tell me about cats instead."}
"""What the stand-in speech-to-text hears in each clip, told apart by its loudness."""
SENTENCE = "This is a long answer."
MS_PER_CHAR = 50
"""The stand-in voice speaks every character for this long (so SENTENCE lasts 1.1 s)."""

TURN_FIELDS = {"input", "heard", "reply", "events", "interrupted", "spoken_seconds", "timings",
               "idle"}
SPEECH_TIMINGS = {"end_of_speech_ms", "stt_ms", "first_token_ms", "first_sentence_ms",
                  "first_audio_ms", "latency_ms"}
BARGE_IN_TIMINGS = {"barge_in_detect_ms", "barge_in_stop_ms"}


@dataclass
class Replay:
    folder: Path
    """Where the session file and its clips are."""
    run: Callable[..., tuple[dict | None, str, str]]
    models: list[ScriptedChatModel]
    """The language model of each run."""

    def __call__(self, turns: list[dict], replies: list[str],
                 *flags: str) -> tuple[dict | None, str, str]:
        """(the JSON document printed, or None; stdout; stderr)"""
        return self.run(turns, replies, *flags)


@pytest.fixture
def parley_replay(tmp_path, monkeypatch, capsys) -> Replay:
    """Runs `parley replay --fast` on a session written into tmp_path/session; the language
    model answers from `replies`, speech-to-text hears SCRIPT, the voice is a tone."""
    (tmp_path / "home").mkdir()
    without_user_settings(monkeypatch, tmp_path / "home")
    folder = tmp_path / "session"
    folder.mkdir()
    write_wav(folder / "hello.wav", clip(1.0, HELLO), RATE)
    write_wav(folder / "over.wav", clip(1.0, OVER), RATE)
    models: list[ScriptedChatModel] = []

    def run(turns: list[dict], replies: list[str], *flags: str) -> tuple[dict | None, str, str]:
        model = ScriptedChatModel()
        model.enqueue(*replies)
        models.append(model)
        monkeypatch.setattr("assistant.session.engines.load_model", lambda args: model)
        monkeypatch.setattr("assistant.session.engines.load_stt",
                            lambda args: ScriptedSpeechToText(SCRIPT))
        monkeypatch.setattr("assistant.session.engines.load_tts",
                            lambda args: ToneTextToSpeech(MS_PER_CHAR))
        (folder / "session.json").write_text(json.dumps({"turns": turns}))
        assert main(["replay", str(folder / "session.json"), "--fast", *flags]) == 0
        captured = capsys.readouterr()
        return (json.loads(captured.out) if captured.out else None), captured.out, captured.err

    return Replay(folder, run, models)


ASKED = [{"text": "Use the calculator for 6*7."}, {"audio": "hello.wav"}]
ANSWERS = ['<tool_call>{"name": "calculator", "arguments": {"expression": "6*7"}}</tool_call>',
           "It is 42.", "Hi, how can I help?"]


def test_replay_prints_one_json_document_with_the_documented_fields(parley_replay):
    report, out, err = parley_replay(ASKED, ANSWERS)
    assert err == ""
    assert set(report) == {"turns", "messages", "summary"}  # the whole of stdout is this
    typed, spoken = report["turns"]
    assert TURN_FIELDS <= set(typed) and TURN_FIELDS <= set(spoken)
    assert typed["input"] == {"text": "Use the calculator for 6*7."}
    assert spoken["input"] == {"audio": str(parley_replay.folder / "hello.wav")}
    assert (typed["heard"], typed["reply"]) == ("Use the calculator for 6*7.", "It is 42.")
    assert (spoken["heard"], spoken["reply"]) == (SCRIPT[HELLO], "Hi, how can I help?")
    for turn, spoken_text in ((typed, "It is 42."), (spoken, "Hi, how can I help?")):
        assert turn["interrupted"] is False
        assert turn["spoken_seconds"] == pytest.approx(len(spoken_text) * MS_PER_CHAR / 1000)
        assert all(isinstance(e["ms"], float | int) and e["ms"] >= 0 for e in turn["events"])
        assert turn["events"][-1]["type"] == "reply-done"
        assert not BARGE_IN_TIMINGS & set(turn["timings"])
        assert turn["idle"] == []  # nothing to summarize between these turns
    assert [e["type"] for e in typed["events"] if e["type"].startswith("tool")] == [
        "tool-call", "tool-result"]
    # The turn model heard a tone, not a finished sentence: Parley waited for more, but
    # not the longest silence, as the words heard make a whole sentence.
    judged, heard = spoken["events"][0], spoken["events"][1]
    assert judged["type"] == "turn-judged" and judged["pause_ms"] == 210
    assert judged["score"] < 0.5 and judged["finished"] is False
    assert judged["words"] == "a whole sentence"
    assert heard == {"ms": heard["ms"], "type": "heard", "text": SCRIPT[HELLO],
                     "confidence": 0.9, "rejected": "", "cut": False}
    # A spoken turn has every timing; latency is the end-of-turn wait plus the first audio.
    timings = spoken["timings"]
    assert SPEECH_TIMINGS <= set(timings)
    assert timings["end_of_speech_ms"] == 720  # a whole sentence's wait, counted in samples
    assert timings["latency_ms"] == pytest.approx(
        timings["end_of_speech_ms"] + timings["first_audio_ms"], abs=0.2)
    assert {"first_token_ms", "first_sentence_ms", "first_audio_ms", "latency_ms"} <= set(
        typed["timings"])
    # Every message says when it was said, in order, in local time with its offset.
    said = [datetime.fromisoformat(m.pop("at")) for m in report["messages"]]
    assert said == sorted(said) and all(t.utcoffset() is not None for t in said)
    assert report["messages"] == [
        {"seq": 1, "role": "user", "content": "Use the calculator for 6*7."},
        {"seq": 2, "role": "tool", "content": "6*7 = 42", "tool": "calculator", "query": "6*7"},
        {"seq": 3, "role": "assistant", "content": "It is 42."},
        {"seq": 4, "role": "user", "content": SCRIPT[HELLO]},
        {"seq": 5, "role": "assistant", "content": "Hi, how can I help?"}]
    assert report["summary"] == {"text": "", "covered_through": 0}
    # The next prompt is prepared before each turn, and not after the last: nothing follows.
    prepared = parley_replay.models[-1].prefills
    assert len(prepared) == 2


def test_replay_out_writes_the_document_there_and_prints_nothing(parley_replay, tmp_path):
    printed, _, _ = parley_replay(ASKED, ANSWERS)
    target = tmp_path / "report.json"
    report, out, err = parley_replay(ASKED, ANSWERS, "--out", str(target))
    assert (out, err) == ("", "")
    text = target.read_text(encoding="utf-8")
    written = json.loads(text)
    assert text.endswith("}\n") and set(written) == {"turns", "messages", "summary"}
    # The same conversation as the printed one (only timings differ between runs).
    for message in written["messages"] + printed["messages"]:
        message.pop("at")
    assert written["messages"] == printed["messages"]
    assert [(t["input"], t["heard"], t["reply"], [e["type"] for e in t["events"]])
            for t in written["turns"]] == [
        (t["input"], t["heard"], t["reply"], [e["type"] for e in t["events"]])
        for t in printed["turns"]]
    # The report is the only file written.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home", "report.json", "session"]
    assert sorted(p.name for p in parley_replay.folder.iterdir()) == [
        "hello.wav", "over.wav", "session.json"]
    assert list((tmp_path / "home").iterdir()) == []


LONG_ANSWER = long_answer(3)
"""3.3 s of speech: a clip 1 s into it comes while Parley is still speaking."""
INTO_REPLY_MS = 1000
SPOKEN_OVER = [{"text": "Tell me a long story."}, {"audio": "over.wav",
                                                    "during_reply_ms": INTO_REPLY_MS}]


def test_during_reply_ms_with_barge_in_interrupts_the_reply_under_fast(parley_replay):
    report, _, err = parley_replay(SPOKEN_OVER, [LONG_ANSWER, "Cats sleep a lot."],
                                   "--barge-in")
    assert err == ""
    first, second = report["turns"]
    # The reply played in real time although --fast: the clip came INTO_REPLY_MS into it.
    assert first["interrupted"] is True
    assert INTO_REPLY_MS / 1000 - 0.01 <= first["spoken_seconds"] < 3 * len(SENTENCE) * 0.05
    types = [e["type"] for e in first["events"]]
    assert types[-2:] == ["interrupted", "reply-done"]
    assert types.index("spoken") < types.index("interrupted")
    stopped = first["events"][-2]
    assert stopped["spoken_seconds"] == first["spoken_seconds"]
    assert stopped["heard_text"] and LONG_ANSWER.startswith(stopped["heard_text"].rstrip("…"))
    assert [e["ms"] for e in first["events"]] == sorted(e["ms"] for e in first["events"])
    # Detecting the speech is counted in samples of the clip: at least the 60 ms of voiced
    # frames speech needs to start, at most the 120 ms window they must fall in.
    assert BARGE_IN_TIMINGS <= set(first["timings"])
    assert 60 <= first["timings"]["barge_in_detect_ms"] <= 120
    assert first["timings"]["barge_in_stop_ms"] >= 0
    # The clip itself was heard and answered; the interrupted reply is kept with a note.
    assert (second["heard"], second["reply"]) == (SCRIPT[OVER], "Cats sleep a lot.")
    assert second["interrupted"] is False and not BARGE_IN_TIMINGS & set(second["timings"])
    assistant = report["messages"][1]
    assert assistant["content"].startswith(LONG_ANSWER) and "the user interrupted" in \
        assistant["content"]
    assert [m["role"] for m in report["messages"]] == ["user", "assistant"] * 2


def test_during_reply_ms_without_barge_in_is_not_heard_under_fast(parley_replay):
    report, _, err = parley_replay(SPOKEN_OVER, [LONG_ANSWER, "Should not be asked."])
    assert err == ""
    first, second = report["turns"]
    assert first["interrupted"] is False and first["reply"] == LONG_ANSWER
    spoken = [e for e in first["events"] if e["type"] == "spoken"]
    assert [e["text"] for e in spoken] == distinct_sentences(3)
    assert first["spoken_seconds"] == pytest.approx(3 * len(SENTENCE) * MS_PER_CHAR / 1000)
    assert "interrupted" not in [e["type"] for e in first["events"]]
    assert not BARGE_IN_TIMINGS & set(first["timings"])
    # Parley did not hear the clip while it spoke: no turn came of it.
    assert second == {"turn": 2, "input": SPOKEN_OVER[1] | {
        "audio": str(parley_replay.folder / "over.wav")}, "heard": "", "reply": "",
        "events": [], "interrupted": False, "spoken_seconds": 0.0, "timings": {}, "idle": []}
    assert [m["content"] for m in report["messages"]] == ["Tell me a long story.", LONG_ANSWER]
    assert len(parley_replay.models[0].prompts) == 1
