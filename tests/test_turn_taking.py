"""Turn-taking: the turn model (Smart Turn v3.2) on real human speech; `parley replay`
judging a session the same way every time, or falling back to a fixed silence without the
model; the settings; and, live on the sound server, the words a user goes on saying while
the reply to what they said first is ready are all heard, half duplex."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import jiwer
import numpy as np
import pytest

from assistant.cli.main import main
from assistant.errors import ConfigError
from audio.files import write_wav
from audio.segmenter import Segmenter, SegmenterSettings, SpeechStarted, Utterance
from audio.turn_policy import TurnSettings
from tests.support import speech_samples as samples
from tests.support.clips import silence
from tests.support.command_line import without_user_settings
from tests.support.live_voice import full_history, quit_cleanly, spawn_voice, wait_for_history
from tests.support.nodisk import GUARD, guarded_env
from tests.support.remote_model import ScriptedServer, stream, text
from tests.support.sound_server import MIC_RATE, SoundServer, running_sound_server
from tests.support.transcripts import HISTORY_TIME

THRESHOLD = TurnSettings().threshold
"""A score at or above this ends the turn (the default, 0.5)."""
GO_ON, GOES_ON_WITH = "0880", "0890"
"""The LibriVox reader says "he was not an ill disposed young man" (0880) with the voice
held up, and goes on: "unless to be rather cold hearted and rather selfish is to be ill
disposed" (0890). So does 0930 ("he might even have been made amiable himself;")."""
FINISHED_COMMANDS = ("001", "002", "003", "005", "goforward")
"""Card names and "go forward ten meters". Not 004, "five five": said flat, it scored from
0.24 to 0.86 with the tail after it, an ambiguous end either way."""
PAUSE_S = 0.35
"""A pause longer than the turn model's 210 ms check, shorter than the fixed 700 ms."""


@pytest.fixture(scope="module")
def recordings() -> dict[str, samples.SpeechSample]:
    """The human recordings by the end of their name (0880, 001, goforward, ...)."""
    if not samples.available():
        pytest.skip(samples.missing_reason())
    return {sample.name.rsplit("-", 1)[-1]: sample for sample in samples.all_samples()}


def room_noise(ms: int, seed: int, rms: float = 40.0) -> np.ndarray:
    """A room's quiet after the last word: seeded noise about as loud as the recordings'
    own floor between words (10 ms frames of 20–130 rms)."""
    rng = np.random.default_rng(seed)
    return rng.normal(0.0, rms, MIC_RATE * ms // 1000).astype(np.int16)


def ended_with(sample: samples.SpeechSample, tail: np.ndarray) -> np.ndarray:
    return np.concatenate([sample.pcm, tail])


def reading(recordings) -> samples.SpeechSample:
    """The reader's sentence with its pause: 0880, a PAUSE_S pause, then 0890."""
    return samples.joined([recordings[GO_ON], recordings[GOES_ON_WITH]], PAUSE_S)


# -- the model on real speech ------------------------------------------------------------


@pytest.fixture(scope="module")
def turn_model():
    from models.smart_turn import SmartTurn

    return SmartTurn()


TAILS = [("silence", 210), ("silence", 300), ("room", 210), ("room", 300)]
"""What follows the last word when the model is asked: digital silence or room noise, for
the 210 ms at which Parley asks, or a little longer."""


def tail_of(kind: str, ms: int, seed: int = 0) -> np.ndarray:
    return silence(ms / 1000) if kind == "silence" else room_noise(ms, seed)


@pytest.mark.real
@pytest.mark.parametrize("kind, ms", TAILS)
def test_a_finished_command_scores_as_finished(turn_model, recordings, kind, ms):
    scores = {name: turn_model.score(ended_with(recordings[name], tail_of(kind, ms)))
              for name in FINISHED_COMMANDS}
    assert all(score >= THRESHOLD for score in scores.values()), scores


@pytest.mark.real
@pytest.mark.parametrize("kind, ms", TAILS)
def test_a_reader_who_goes_on_scores_as_not_finished_at_the_pause(turn_model, recordings,
                                                                  kind, ms):
    scores = {name: turn_model.score(ended_with(recordings[name], tail_of(kind, ms)))
              for name in (GO_ON, "0930")}
    assert all(score < THRESHOLD for score in scores.values()), scores


@pytest.mark.real
def test_the_same_reading_scores_as_finished_where_the_reader_stops(turn_model, recordings):
    """The words judged unfinished at the reader's pause, followed by the rest of the
    sentence: at its end the turn is over."""
    whole = reading(recordings)
    tail = room_noise(210, seed=1)
    paused = np.concatenate([whole.pcm[:len(recordings[GO_ON].pcm)], tail])
    assert turn_model.score(paused) < THRESHOLD
    assert turn_model.score(np.concatenate([whole.pcm, tail])) >= THRESHOLD


# -- parley replay with the real engines -------------------------------------------------

HIDE_TURN_MODEL = """
import importlib.util
_find_spec = importlib.util.find_spec
def _without_pipecat(name, package=None):  # as if pipecat-ai were not installed
    return None if name.partition(".")[0] == "pipecat" else _find_spec(name, package)
importlib.util.find_spec = _without_pipecat
"""


@pytest.fixture(scope="module")
def session(tmp_path_factory, recordings) -> Path:
    """The reader's sentence with its pause, then "go forward ten meters"."""
    folder = tmp_path_factory.mktemp("session")
    write_wav(folder / "reading.wav", reading(recordings).pcm, samples.SAMPLE_RATE)
    write_wav(folder / "go.wav", recordings["goforward"].pcm, samples.SAMPLE_RATE)
    path = folder / "session.json"
    path.write_text(json.dumps({"turns": [{"audio": "reading.wav"}, {"audio": "go.wav"}]}))
    return path


def replay(tmp_path: Path, session: Path, *flags: str, hide_turn_model: bool = False
           ) -> tuple[dict, str]:
    """`parley replay SESSION --fast FLAGS` (nothing written to disk, the audit hook makes
    sure), with the turn model's package hidden if asked: (its report, its stderr)."""
    code = (HIDE_TURN_MODEL if hide_turn_model else "") + GUARD
    command = [sys.executable, "-c", code, "replay", str(session), "--fast", "--ctx", "2048",
               "--answer-tokens", "24", *flags]
    result = subprocess.run(command, capture_output=True, env=guarded_env(tmp_path),
                            timeout=600)
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    return json.loads(result.stdout), result.stderr.decode()


def judged(turn: dict) -> list[dict]:
    """The turn model's judgements in a turn: pause, score, finished."""
    return [{k: e[k] for k in ("pause_ms", "score", "finished")}
            for e in turn["events"] if e["type"] == "turn-judged"]


def heard_whole(turn: dict, sample: samples.SpeechSample) -> bool:
    return jiwer.wer(samples.words(sample.transcript), samples.words(turn["heard"])) < 0.35


def answered_both(report: dict, recordings) -> None:
    """The reading was heard as one turn, the command as the next, and both answered."""
    reading_turn, command_turn = report["turns"]
    assert heard_whole(reading_turn, reading(recordings)), reading_turn["heard"]
    assert heard_whole(command_turn, recordings["goforward"]), command_turn["heard"]
    assert reading_turn["reply"] and command_turn["reply"]
    assert [m["role"] for m in report["messages"]] == ["user", "assistant"] * 2


@pytest.mark.real
def test_replay_judges_the_same_session_the_same_way_every_time(tmp_path, session, recordings):
    reports = [replay(tmp_path, session)[0] for _ in range(2)]
    first, second = ([(turn["heard"], judged(turn)) for turn in report["turns"]]
                     for report in reports)
    assert first == second
    report = reports[0]
    answered_both(report, recordings)
    reading_turn, command_turn = report["turns"]
    # At the reader's pause the model said "not yet", and the turn went on to the end of
    # the sentence; there it said "finished", and the turn ended at that pause.
    *waited, ended = judged(reading_turn)
    assert waited and not any(j["finished"] for j in waited)
    assert all(0 <= j["score"] < THRESHOLD for j in waited)
    assert ended["finished"] and THRESHOLD <= ended["score"] <= 1
    assert reading_turn["timings"]["end_of_speech_ms"] == ended["pause_ms"]
    (command_end,) = judged(command_turn)
    assert command_end["finished"] and command_end["score"] >= THRESHOLD
    assert command_turn["timings"]["end_of_speech_ms"] == command_end["pause_ms"]
    assert ended["pause_ms"] < 700  # sooner than the fixed silence would have ended it


@pytest.mark.real
def test_replay_with_end_of_turn_silence_asks_no_turn_model(tmp_path, session, recordings):
    # Its package hidden too: a fixed silence needs no turn model, nor a word about it.
    report, err = replay(tmp_path, session, "--end-of-turn", "silence", hide_turn_model=True)
    assert err == ""
    answered_both(report, recordings)
    assert all(judged(turn) == [] for turn in report["turns"])
    # 700 ms in whole 30 ms frames, counted in samples.
    assert [t["timings"]["end_of_speech_ms"] for t in report["turns"]] == [720, 720]


@pytest.mark.real
def test_without_the_turn_model_replay_says_so_once_and_ends_turns_after_a_silence(
        tmp_path, session, recordings):
    report, err = replay(tmp_path, session, hide_turn_model=True)
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert "turn model" in lines[0] and "pipecat-ai" in lines[0] and "not installed" in lines[0]
    assert "Turns end after 700 ms of silence" in lines[0]
    answered_both(report, recordings)
    assert all(judged(turn) == [] for turn in report["turns"])
    assert [t["timings"]["end_of_speech_ms"] for t in report["turns"]] == [720, 720]


# -- settings ----------------------------------------------------------------------------


@dataclass
class Stopped:
    """A `parley replay` session stopped where it would build its segmenter."""

    session: str
    seen: list = field(default_factory=list)
    """The settings of every run that got there."""


@pytest.fixture
def stopped(tmp_path, monkeypatch) -> Stopped:
    without_user_settings(monkeypatch)
    session = tmp_path / "session.json"
    session.write_text(json.dumps({"turns": [{"text": "hello"}]}))
    runs = Stopped(str(session))

    def build_segmenter(args, echo_cancelled, warn):
        runs.seen.append(args)
        raise ConfigError("stopped by the test")

    monkeypatch.setattr("assistant.session.engines.build_segmenter", build_segmenter)
    return runs


@pytest.mark.parametrize("flags, says", [
    (["--end-of-turn", "bogus"], "argument --end-of-turn: 'bogus' is not smart or silence"),
    (["--turn-threshold", "1.5"],
     "argument --turn-threshold: '1.5' is not a number above 0 and at most 1"),
    (["--turn-threshold", "0"],
     "argument --turn-threshold: '0' is not a number above 0 and at most 1"),
])
def test_a_bad_turn_flag_is_one_line_and_exit_2(stopped, capsys, flags, says):
    with pytest.raises(SystemExit) as exited:  # argparse exits; from a shell, with code 2
        main(["replay", stopped.session, *flags])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err == f"parley replay: {says} (see parley replay --help)\n"
    assert stopped.seen == []  # nothing ran


@pytest.mark.parametrize("name, value, says", [
    ("PARLEY_END_OF_TURN", "bogus", "PARLEY_END_OF_TURN='bogus' is not smart or silence "
                                    "(for --end-of-turn)"),
    ("PARLEY_TURN_THRESHOLD", "1.5", "PARLEY_TURN_THRESHOLD='1.5' is not a number above 0 "
                                     "and at most 1 (for --turn-threshold)"),
])
def test_a_bad_turn_variable_is_one_line_and_exit_2(stopped, monkeypatch, capsys, name, value,
                                                    says):
    monkeypatch.setenv(name, value)
    assert main(["replay", stopped.session]) == 2
    assert capsys.readouterr().err == f"parley: {says}\n"
    assert stopped.seen == []


def test_a_max_silence_shorter_than_the_models_pause_is_one_line_and_exit_2(tmp_path,
                                                                            monkeypatch, capsys):
    without_user_settings(monkeypatch)
    session = tmp_path / "session.json"
    session.write_text(json.dumps({"turns": [{"text": "hello"}]}))
    loaded: list = []
    monkeypatch.setattr("assistant.session.engines.load_voice_engines",
                        lambda *args: loaded.append(args))
    assert main(["replay", str(session), "--turn-max-silence-ms", "100"]) == 2
    err = capsys.readouterr().err
    assert err == ("parley: --turn-max-silence-ms 100 is shorter than the 210 ms pause at "
                   "which the turn model is asked; use at least 210\n")
    assert loaded == []  # said before any model loads


def test_turn_settings_come_from_flags_variables_and_the_config_file(stopped, tmp_path,
                                                                     monkeypatch):
    session = stopped.session
    config = tmp_path / "parley.toml"
    config.write_text('end-of-turn = "silence"\nturn-threshold = 0.7\n'
                      "turn-max-silence-ms = 2000\n")
    monkeypatch.setenv("PARLEY_TURN_MAX_SILENCE_MS", "1200")
    assert main(["--config", str(config), "replay", session]) == 2
    monkeypatch.setenv("PARLEY_END_OF_TURN", "SMART")
    assert main(["--config", str(config), "replay", session, "--turn-threshold", "0.9"]) == 2
    assert main(["replay", session]) == 2
    monkeypatch.delenv("PARLEY_END_OF_TURN")
    monkeypatch.delenv("PARLEY_TURN_MAX_SILENCE_MS")
    assert main(["replay", session]) == 2
    chosen = [(a.end_of_turn, a.turn_threshold, a.turn_max_silence_ms)
              for a in stopped.seen]
    assert chosen == [("silence", 0.7, 1200), ("smart", 0.9, 1200), ("smart", 0.5, 1200),
                      ("smart", 0.5, 1500)]


# -- live: the words said while the reply is ready -----------------------------------------

COMMAND_REPLY = "Going forward ten meters."
READING_REPLY = "That is from Sense and Sensibility."
THINKING_S = 1.0
"""How long the stand-in language model takes to answer: the embedded one takes a second
or two to its first sentence here, so the reply is ready once the user has gone on."""


class AnswersByRequest(ScriptedServer):
    """A language model that answers after THINKING_S by what the user last said. Replies
    answered ahead at a pause and then dropped ask it too, so it answers every request
    rather than a script of them."""

    def answer_for(self, path, headers, body):
        if path != "/v1/chat/completions":
            return super().answer_for(path, headers, body)
        said = [m.get("content") or "" for m in body["messages"] if m["role"] == "user"]
        reply = COMMAND_REPLY if said and "forward" in said[-1].lower() else READING_REPLY

        def answer(handler) -> None:
            time.sleep(THINKING_S)
            stream(text(reply))(handler)

        return answer


def voiced(pcm: np.ndarray) -> tuple[int, int]:
    """Where Parley's segmenter hears the speech in `pcm` begin and end, in samples: a
    recording has quiet before its first word and after its last."""
    events = Segmenter(SegmenterSettings()).feed(np.concatenate([pcm, silence(1.0)]))
    start = next(e.sample for e in events if isinstance(e, SpeechStarted))
    end = [e for e in events if isinstance(e, Utterance)][-1].speech_end_sample
    return start, end


def said_on(command: np.ndarray, pause_s: float, rest: np.ndarray) -> tuple[np.ndarray, int]:
    """`command`, a pause of `pause_s` from its last word to the first of `rest` as the
    segmenter hears them, then `rest`: (the audio, where `rest`'s last word ends)."""
    _, command_ends = voiced(command)
    rest_begins, rest_ends = voiced(rest)
    gap = silence(max(0.0, pause_s - rest_begins / MIC_RATE))
    said = np.concatenate([command[:command_ends], gap, rest])
    return said, command_ends + len(gap) + rest_ends


@pytest.fixture(scope="module")
def server() -> Iterator[SoundServer]:
    with running_sound_server(needs_speech_samples=True) as srv:
        yield srv


def voice_onset(played: np.ndarray) -> int | None:
    """Where Parley's voice first carries on the speaker's monitor, in samples."""
    loud = np.flatnonzero(np.abs(played) > 100)
    return int(loud[0]) if loud.size else None


@pytest.mark.real
def test_half_duplex_hears_every_word_said_while_the_reply_is_ready(server, recordings):
    """A command, a pause of 350 ms (the turn model ends the turn at 210 ms), then 8.7 s
    of reading. The command's reply is under way when the reading begins: the user went
    on in its first moments, so it is taken back, and the command and the whole reading
    are one message, answered once (had Parley started speaking, half duplex, the rest of
    the reading would have been lost)."""
    command, rest = recordings["goforward"], reading(recordings)
    said, rest_ends = said_on(command.pcm, PAUSE_S, rest.pcm)
    lead = silence(1.0)
    with AnswersByRequest() as model:
        child = spawn_voice(server, "--llm-url", model.url, "--no-local-intents", "--debug")
        try:
            child.logfile_read = log = io.StringIO()
            recording = server.record_monitor()
            server.feed(np.concatenate([lead, said, silence(2.0)]))
            wait_for_history(child, r"#2 assistant" + HISTORY_TIME + ": ", tries=120)
            history = full_history(child)
            played = recording.stop()
            quit_cleanly(child)
        finally:
            child.close(force=True)
    output = log.getvalue()
    # The command was shown as heard, then, once the user went on, the whole turn (the
    # terminal wraps long lines: /history has it whole)...
    shown = re.findall(r"^you: (.*)$", output, re.MULTILINE)
    assert len(shown) == 2 and shown[1].startswith(shown[0].strip()), output[-3000:]
    assert "You went on" in output
    assert [history.get(seq, "").split(":", 1)[0] for seq in (1, 2)] == [
        "user", "assistant"] and 3 not in history, history
    # ...holding the command and the reading to its last words, answered once.
    message = history[1].split(": ", 1)[1]
    both = samples.SpeechSample("both", said, f"{command.transcript} {rest.transcript}")
    assert heard_whole({"heard": message}, both), history
    heard = samples.words(message)
    assert "he was not" in heard and "rather selfish" in heard, history
    assert history[2].endswith(COMMAND_REPLY), history
    # The turn model ended the command's turn, and held the reading whole at its pause.
    assert re.search(r"turn model at a \d+ ms pause: [\d.]+ \(finished\)", output)
    assert re.search(r"turn model at a \d+ ms pause: [\d.]+ \(not finished, waiting\)", output)
    # The command's reply was under way, and taken back when the user went on.
    assert "the user went on: the turn heard as" in output, output[-3000:]
    # On the speaker, Parley's voice came only after the reading's last word (the monitor
    # and the microphone both run in real time; every delay in between makes it later).
    onset = voice_onset(played)
    assert onset is not None, "Parley never spoke"
    assert onset / recording.rate > (len(lead) + rest_ends) / MIC_RATE, onset
