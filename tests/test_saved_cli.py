"""`parley chat --save FILE` / `--resume FILE` as a user runs them: a real `parley` process
and a real file, killed with SIGKILL in the middle of a reply; flags and bad files; and
`parley voice` saving and resuming the same way."""

from __future__ import annotations

import os
import re
import select
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from assistant.cli.main import main
from memory.store import check
from tests.support.command_line import chat_through_main
from tests.support.fakes import ScriptedChatModel
from tests.support.saved_files import rows
from tests.support.transcripts import HISTORY_TIME
from tests.support.voice_command import stand_in_speech

ROOT = Path(__file__).resolve().parent.parent

# `parley` with a stand-in model that answers "Reply N."; a message with "stall" in it gets
# a reply that streams its first words, says so on stderr, and never ends.
BOOT = textwrap.dedent("""
    import sys, threading
    import assistant.session.engines as engines
    from models.base import TextChunk
    from tests.support.fakes import ScriptedChatModel

    class Model(ScriptedChatModel):
        def stream(self, messages, tools, max_tokens, cancel=None):
            if "stall" in messages[-1].content:
                yield TextChunk("The answer is")
                sys.stderr.write("STREAMING\\n")
                sys.stderr.flush()
                threading.Event().wait()
            self.queue.append(f"Reply {len(self.prompts) + 1}.")
            yield from super().stream(messages, tools, max_tokens, cancel)

    engines.load_model = lambda args: Model()
    from assistant.cli.main import main
    sys.exit(main(sys.argv[1:]))
""")


def clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PARLEY_")}
    return dict(env, HOME="/nonexistent", PYTHONDONTWRITEBYTECODE="1")


def parley(stdin: str, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", BOOT, *flags], input=stdin.encode(),
                          capture_output=True, cwd=ROOT, env=clean_env(), timeout=120)


HISTORY_LINE = re.compile(r"^#(\d+) (user|assistant)(?:" + HISTORY_TIME + r")?: (.*)$")


def history_lines(out: str) -> list[tuple[int, str, str]]:
    """The /history lines of a transcript as (number, role, text)."""
    return [(int(m[1]), m[2], m[3]) for line in out.splitlines()
            if (m := HISTORY_LINE.match(line))]


def test_a_saved_chat_resumes_with_its_numbered_history(tmp_path):
    path = tmp_path / "talk.parley"
    first = parley("hello\nwhat comes next\n", "chat", "--save", str(path),
                   "--no-local-intents")
    assert first.returncode == 0, first.stderr.decode()
    assert first.stdout.decode().splitlines() == [
        f"· Saving this conversation to {path}.", "Reply 1.", "Reply 2."]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["talk.parley"]  # -wal folded in

    again = parley("/history\nand then\n/history\n", "chat", "--resume", str(path),
                   "--no-local-intents")
    assert again.returncode == 0, again.stderr.decode()
    out = again.stdout.decode()
    assert re.match(rf"· Resumed {re.escape(str(path))}: 4 messages, the last "
                    r"\w{3} \d{1,2} \w{3} \d\d:\d\d\.\n", out), out
    earlier = [(1, "user", "hello"), (2, "assistant", "Reply 1."),
               (3, "user", "what comes next"), (4, "assistant", "Reply 2.")]
    # The whole earlier conversation, then the same with the new exchange numbered on.
    assert history_lines(out) == earlier + earlier + [(5, "user", "and then"),
                                                      (6, "assistant", "Reply 1.")]
    assert rows(path)[-2:] == [(5, "user", "and then"), (6, "assistant", "Reply 1.")]


def read_line(stream, timeout: float) -> str:
    """One line of a child's pipe, within `timeout` seconds."""
    deadline, data = time.monotonic() + timeout, b""
    while not data.endswith(b"\n"):
        left = deadline - time.monotonic()
        assert left > 0, f"no line within {timeout} s (got {data!r})"
        if select.select([stream], [], [], left)[0]:
            chunk = os.read(stream.fileno(), 1)
            assert chunk, f"the pipe closed (got {data!r})"
            data += chunk
    return data.decode()


def wait_for_rows(path: Path, count: int, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + 60
    while True:
        assert process.poll() is None, process.stderr.read().decode()
        try:
            if len(rows(path)) >= count:
                return
        except sqlite3.Error:
            pass  # not created yet
        assert time.monotonic() < deadline, f"never {count} messages in {path}"
        time.sleep(0.02)


def test_sigkill_in_the_middle_of_a_reply_loses_nothing_already_said(tmp_path):
    path = tmp_path / "talk.parley"
    process = subprocess.Popen([sys.executable, "-c", BOOT, "chat", "--save", str(path),
                                "--no-local-intents"], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT,
                               env=clean_env())
    try:
        process.stdin.write(b"my locker code is 4711\n")
        process.stdin.flush()
        wait_for_rows(path, 2, process)  # the first reply was committed when it was added
        process.stdin.write(b"please stall on this one\n")
        process.stdin.flush()
        assert read_line(process.stderr, 60) == "STREAMING\n"
        os.kill(process.pid, signal.SIGKILL)
    finally:
        process.kill()
        process.wait(30)
        process.stdin.close(), process.stdout.close(), process.stderr.close()
    assert process.returncode == -signal.SIGKILL
    assert Path(f"{path}-wal").exists()  # killed: nothing was folded in or tidied up
    check(path)  # a Parley conversation, nothing damaged
    assert rows(path) == [(1, "user", "my locker code is 4711"), (2, "assistant", "Reply 1."),
                          (3, "user", "please stall on this one")]

    said = rows(path)
    again = parley("/history\nthanks\n", "chat", "--resume", str(path), "--no-local-intents")
    assert again.returncode == 0, again.stderr.decode()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["talk.parley"]  # tidied up now
    assert history_lines(again.stdout.decode()) == said
    assert rows(path)[3:] == [(4, "user", "thanks"), (5, "assistant", "Reply 1.")]


def test_clear_clears_the_saved_conversation_and_numbering_starts_again(tmp_path):
    path = tmp_path / "talk.parley"
    result = parley("one\n/clear\ntwo\n", "chat", "--save", str(path), "--no-local-intents")
    assert result.returncode == 0, result.stderr.decode()
    assert rows(path) == [(1, "user", "two"), (2, "assistant", "Reply 2.")]


def test_a_file_that_stops_being_writable_is_said_once_and_the_chat_goes_on(tmp_path,
                                                                            monkeypatch,
                                                                            capsys):
    path = tmp_path / "talk.parley"

    class Remover(ScriptedChatModel):
        def stream(self, messages, tools, max_tokens, cancel=None):
            if "remove" in messages[-1].content:
                for name in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
                    name.unlink()
            yield from super().stream(messages, tools, max_tokens, cancel)

    out = chat_through_main(monkeypatch, capsys, Remover(),
                            "hi\nremove the file\nstill here?\n/history\n",
                            "--no-local-intents", "--save", str(path))
    errors = [line for line in out.splitlines() if line.startswith("!")]
    assert errors == [f"! Saving to {path} stopped (the file was removed or replaced). The "
                      "conversation goes on in memory; what is said from now on is not saved."]
    assert [n for n, _, _ in history_lines(out)] == [1, 2, 3, 4, 5, 6]
    assert not path.exists()


# -- flags, and files it will not use -----------------------------------------------------


class NeverLoaded(ScriptedChatModel):
    def __init__(self) -> None:
        raise AssertionError("the model was loaded before the file was checked")


def test_save_never_overwrites_a_file(tmp_path, monkeypatch, capsys):
    path = tmp_path / "talk.parley"
    path.write_text("anything at all")
    os.utime(path, ns=(1_000_000_000, 1_000_000_000))
    err = chat_through_main(monkeypatch, capsys, None, "hi\n", "--no-local-intents",
                            "--save", str(path), code=2)
    assert err == (f"parley: {path} already exists; --resume {path} continues a saved "
                   "conversation, or give --save a new file\n")
    assert path.read_text() == "anything at all" and path.stat().st_mtime_ns == 1_000_000_000


def test_a_bad_file_to_resume_stops_parley_before_the_model_loads(tmp_path, monkeypatch,
                                                                  capsys):
    path = tmp_path / "other.db"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE notes (body TEXT)")
    db.commit()
    db.close()
    before = path.read_bytes(), path.stat().st_mtime_ns
    monkeypatch.setattr("assistant.session.engines.load_model", lambda args: NeverLoaded())
    err = chat_through_main(monkeypatch, capsys, None, "hi\n", "--no-local-intents",
                            "--resume", str(path), code=2)
    assert err == (f"parley: {path} is not a Parley conversation (an SQLite database of "
                   "another program); pass another file\n")
    assert (path.read_bytes(), path.stat().st_mtime_ns) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.db"]


@pytest.mark.parametrize("argv, says", [
    (["chat", "--save", "a", "--resume", "b"], "parley: --save starts a new conversation file "
                                               "and --resume continues one; pass one of them"),
    (["web", "--save", "a", "--resume", "b"], "parley: --save starts a new conversation file "
                                              "and --resume continues one; pass one of them"),
    (["--save", "a", "replay", "session.json"], "parley: --save and --resume are for chat, "
                                                "voice and web"),
    (["chat", "--save", "/nonexistent/folder/a"], "parley: cannot create "
                                                  "/nonexistent/folder/a: there is no folder"),
])
def test_save_and_resume_flags_that_cannot_work_are_one_line(monkeypatch, capsys, argv, says):
    monkeypatch.setattr("assistant.session.engines.load_model", lambda args: NeverLoaded())
    monkeypatch.setenv("HOME", "/nonexistent")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(says) and err.count("\n") == 1


def test_save_and_resume_are_flags_only(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HOME", "/nonexistent")
    monkeypatch.setenv("PARLEY_SAVE", str(tmp_path / "a"))
    assert main(["chat"]) == 2
    assert capsys.readouterr().err == ("parley: PARLEY_SAVE is not read; pass --save on the "
                                       "command line\n")
    monkeypatch.delenv("PARLEY_SAVE")
    config = tmp_path / "parley.toml"
    config.write_text(f'resume = "{tmp_path / "a"}"\n')
    assert main(["--config", str(config), "chat"]) == 2
    assert capsys.readouterr().err == (f"parley: {config}: resume is not read from a file; "
                                       "pass --resume on the command line\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["parley.toml"]


def test_voice_saves_and_resumes_the_same_way(tmp_path, voice, monkeypatch, capsys):
    stand_in_speech(monkeypatch)
    path = tmp_path / "talk.parley"
    voice.model.enqueue("Hello.", "Hello again.")
    assert voice.run(monkeypatch, ["voice", "--save", str(path)], ["hello"]) == 0
    assert capsys.readouterr().out.splitlines()[1] == f"· Saving this conversation to {path}."
    assert rows(path) == [(1, "user", "hello"), (2, "assistant", "Hello.")]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["talk.parley"]

    voice.loops.clear()
    assert voice.run(monkeypatch, ["voice", "--resume", str(path)], ["and again"]) == 0
    assert f"· Resumed {path}: 2 messages, the last " in capsys.readouterr().out
    assert rows(path)[2:] == [(3, "user", "and again"), (4, "assistant", "Hello again.")]
