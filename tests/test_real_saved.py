"""`--save` and `--resume` with the real embedded model, under strace: the conversation's
file (and SQLite's -wal, -shm and -journal beside it) is all that is written."""

from pathlib import Path

import pytest

from tests.support.nodisk import changes_outside, run_parley
from tests.support.saved_files import rows

pytestmark = pytest.mark.real


SHORT = ("--answer-tokens", "64")
"""Short answers: what is proven is where the conversation goes, not what the model says
(the default allows 1,024 tokens, minutes of SmolLM2 writing on a busy machine)."""


def only_the_file(tmp_path: Path, path: Path) -> list[str]:
    """What the traced run changed besides the conversation's file and SQLite's own."""
    beside = [Path(f"{path}{suffix}") for suffix in ("", "-wal", "-shm", "-journal")]
    return changes_outside(tmp_path / "trace", beside)


def test_a_saved_chat_writes_its_file_and_nothing_else_and_resumes(tmp_path):
    path = tmp_path / "talk.parley"
    first = run_parley(tmp_path, b"What is the capital of France?\nWhat is 6 times 7?\n",
                       "chat", "--save", str(path), "--ctx", "2048", *SHORT, trace=True)
    assert first.returncode == 0, first.stderr.decode()
    assert only_the_file(tmp_path, path) == []
    # The trace saw the file being written: the proof is not blind to it.
    assert changes_outside(tmp_path / "trace", [tmp_path / "elsewhere"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["talk.parley", "trace"]
    said = rows(path)
    assert [role for _, role, _ in said if role != "tool"] == [
        "user", "assistant", "user", "assistant"]

    again = run_parley(tmp_path, b"/history\nAnd of Germany?\n", "chat", "--resume", str(path),
                       "--ctx", "2048", *SHORT, trace=True)
    assert again.returncode == 0, again.stderr.decode()
    assert only_the_file(tmp_path, path) == []
    out = again.stdout.decode()
    assert out.startswith(f"· Resumed {path}: {len(said)} messages, the last ")
    assert "#1 user" in out and "What is the capital of France?" in out
    more = rows(path)
    assert more[:len(said)] == said
    assert more[len(said)] == (len(said) + 1, "user", "And of Germany?")
