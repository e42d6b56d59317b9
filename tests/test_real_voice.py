"""`parley replay` with the real embedded engines on recordings of human speech."""

import json

import jiwer
import pytest

from audio.files import write_wav
from tests.support import speech_samples as samples
from tests.support.nodisk import changes_outside, run_parley, written_outside

pytestmark = pytest.mark.real


@pytest.fixture(scope="module")
def book():
    if not samples.available():
        pytest.skip(samples.missing_reason())
    return samples.librivox()


def test_replay_hears_real_speech_answers_and_writes_only_what_was_asked(tmp_path, book):
    first, second = book[0], book[1]
    write_wav(tmp_path / "one.wav", first.pcm, samples.SAMPLE_RATE)
    write_wav(tmp_path / "two.wav", second.pcm, samples.SAMPLE_RATE)
    (tmp_path / "session.json").write_text(json.dumps({"turns": [
        {"audio": "one.wav"}, {"text": "Say that again in other words."},
        {"audio": "two.wav"}]}))
    report_path, audio_dir = tmp_path / "report.json", tmp_path / "spoken"
    result = run_parley(tmp_path, b"", "replay", str(tmp_path / "session.json"), "--fast",
                        "--ctx", "2048", "--answer-tokens", "96",
                        "--out", str(report_path), "--audio-out", str(audio_dir), trace=True)
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    assert result.stdout == b""  # the report went to --out, not to the terminal
    report = json.loads(report_path.read_text())
    turns = report["turns"]
    for turn, sample in ((turns[0], first), (turns[2], second)):
        error = jiwer.wer(samples.words(sample.transcript), samples.words(turn["heard"]))
        assert error < 0.35, (turn["heard"], sample.transcript)  # tiny.en: a word or two off
        assert turn["reply"] and turn["spoken_seconds"] > 0.5
        timings = turn["timings"]
        assert timings["latency_ms"] > timings["end_of_speech_ms"] > 0
    assert [m["seq"] for m in report["messages"]] == list(range(1, 7))
    assert sorted(p.name for p in audio_dir.iterdir()) == [
        "turn-001.wav", "turn-002.wav", "turn-003.wav"]
    # Nothing else of the conversation was written, here or anywhere else.
    made = {p.name for p in tmp_path.iterdir()} - {"trace"}
    assert made == {"one.wav", "two.wav", "session.json", "report.json", "spoken"}
    assert written_outside(tmp_path) == []


def test_replay_without_out_prints_its_report_and_writes_nothing_at_all(tmp_path, book):
    write_wav(tmp_path / "one.wav", book[0].pcm, samples.SAMPLE_RATE)
    (tmp_path / "session.json").write_text(json.dumps({"turns": [
        {"audio": "one.wav"}, {"text": "What is 6 times 7?"}]}))
    before = sorted(p.name for p in tmp_path.iterdir())
    result = run_parley(tmp_path, b"", "replay", str(tmp_path / "session.json"), "--fast",
                        "--ctx", "2048", "--answer-tokens", "48", trace=True)
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    report = json.loads(result.stdout)  # one JSON document on stdout
    assert report["turns"][0]["heard"] and "42" in report["turns"][1]["reply"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*before, "trace"])
    # Not in the test's folder either: only the trace log, written by strace itself.
    assert changes_outside(tmp_path / "trace", []) == []


def test_a_corrupt_clip_is_named_with_its_turn_and_nothing_runs(tmp_path):
    (tmp_path / "bad.wav").write_bytes(b"RIFF\x00\x00\x00\x00WAVEjunk")
    (tmp_path / "session.json").write_text(json.dumps({"turns": [
        {"text": "hello"}, {"audio": "bad.wav"}]}))
    result = run_parley(tmp_path, b"", "replay", str(tmp_path / "session.json"))
    assert result.returncode == 2
    error = result.stderr.decode().strip()
    assert "turn 2" in error and "bad.wav" in error and len(error.splitlines()) == 1


@pytest.mark.parametrize("flag", ["--stt-model", "--voice"])
def test_a_missing_speech_model_is_one_clear_line_and_exit_2(tmp_path, flag, capsys):
    from assistant.cli.main import main

    (tmp_path / "session.json").write_text(json.dumps({"turns": [{"text": "hello"}]}))
    missing = tmp_path / "nowhere" / "model.onnx"
    assert main(["replay", str(tmp_path / "session.json"), flag, str(missing)]) == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and str(missing) in error and flag in error


def test_voice_without_a_microphone_says_why_and_falls_back_to_text_chat(tmp_path):
    import os
    import subprocess
    import sys

    # A sound server that is not there: PortAudio then finds no input device.
    env = dict(os.environ, PULSE_SERVER=f"unix:{tmp_path}/no-such-socket",
               PYTHONDONTWRITEBYTECODE="1")
    # A short answer is enough to show the message was answered (the default allows 1,024
    # tokens, a minute of SmolLM2 writing on a busy machine).
    result = subprocess.run([sys.executable, "-m", "assistant", "voice", "--ctx", "2048",
                             "--answer-tokens", "40"],
                            input=b"Hello!\n", capture_output=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr.decode()
    error = result.stderr.decode().strip().splitlines()
    assert len(error) == 1 and "starting text chat" in error[0] and "voice cannot" in error[0]
    assert result.stdout.strip()  # the typed message was answered


def test_replaying_the_same_session_gives_the_same_conversation(tmp_path, book):
    write_wav(tmp_path / "one.wav", book[2].pcm, samples.SAMPLE_RATE)
    (tmp_path / "session.json").write_text(json.dumps({"turns": [
        {"audio": "one.wav"}, {"text": "And then?"}]}))
    results, spoken = [], []
    for run in range(2):
        out, audio = tmp_path / f"run{run}.json", tmp_path / f"audio{run}"
        result = run_parley(tmp_path, b"", "replay", str(tmp_path / "session.json"), "--fast",
                            "--ctx", "2048", "--answer-tokens", "32", "--out", str(out),
                            "--audio-out", str(audio))
        assert result.returncode == 0, result.stderr.decode()[-2000:]
        report = json.loads(out.read_text())
        results.append(([(t["heard"], t["reply"], t["spoken_seconds"])
                         for t in report["turns"]],
                         # apart from when each message was said, which moves on
                         [{k: v for k, v in m.items() if k != "at"}
                          for m in report["messages"]]))
        spoken.append([p.read_bytes() for p in sorted(audio.iterdir())])
    assert results[0] == results[1]
    assert results[0][0][0][0] and results[0][0][1][1]  # heard the clip, answered the text
    # The spoken replies sound the same too, sample for sample.
    assert len(spoken[0]) == 2 and spoken[0] == spoken[1]
