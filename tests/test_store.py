"""The conversation file (`memory.store`): a real SQLite file, a commit per change, and
files it must not use refused with one line, left exactly as they were."""

from __future__ import annotations

import os
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from memory.history import History, Message
from memory.store import APPLICATION_ID, ConversationStore, StoreError, check
from memory.summary import RunningSummary
from tests.support.saved_files import rows

BERLIN_WINTER = timezone(timedelta(hours=1))
ROOT = Path(__file__).resolve().parent.parent


def saved(path: Path, *texts: str) -> None:
    """A closed conversation file holding `texts`, said by turns by the user and Parley."""
    store = ConversationStore.create(path)
    history = History(listener=store)
    for number, text in enumerate(texts):
        history.add("user" if number % 2 == 0 else "assistant", text)
    store.close()


def test_messages_and_summary_come_back_exactly(tmp_path):
    path = tmp_path / "talk.parley"
    store = ConversationStore.create(path)
    said = datetime(2026, 12, 5, 14, 3, 9, 120000, tzinfo=BERLIN_WINTER)
    history = History(now=lambda: said, listener=store)
    history.add("user", "What is 17*23? ünïcödé and 'quotes'")
    history.add("tool", "17*23 = 391", tool="calculator", query="17*23",
                arguments={"expression": "17*23", "nested": {"list": [1, 2.5, None]}})
    history.add("assistant", "It is 391.", at=None)
    summary = RunningSummary(("- (#1–#3) The user asked for 17*23; 391.",), 3, 9, 1)
    store.save_summary(summary)
    store.close()

    again = ConversationStore.resume(path)
    messages = again.messages()
    assert messages == list(history.messages)
    assert [m.at for m in messages] == [said, said, None]
    assert messages[0].at.utcoffset() == timedelta(hours=1)  # the offset it was said in
    assert messages[1].arguments == {"expression": "17*23", "nested": {"list": [1, 2.5, None]}}
    assert (messages[1].tool, messages[1].query) == ("calculator", "17*23")
    restored = again.summary()
    assert restored == summary and restored.fallback_bullets == 1
    assert [m.seq for m in again.messages(last=2)] == [2, 3]
    again.close()


def test_the_file_and_its_wal_and_shm_are_the_owners_alone_and_in_wal_mode(tmp_path):
    path = tmp_path / "talk.parley"
    old = os.umask(0o022)  # a usual umask would let others read a file made the usual way
    try:
        store = ConversationStore.create(path)
        History(listener=store).add("user", "my bank PIN is in the drawer")
    finally:
        os.umask(old)
    for name in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        assert stat.S_IMODE(name.stat().st_mode) == 0o600, name
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert db.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    assert db.execute("PRAGMA user_version").fetchone()[0] == 1
    db.close()
    store.close()
    # Closed: the -wal is folded into the file, and nothing else is left beside it.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["talk.parley"]


def test_each_change_is_committed_as_it_happens(tmp_path):
    path = tmp_path / "talk.parley"
    store = ConversationStore.create(path)
    history = History(listener=store)
    history.add("user", "first")
    assert rows(path) == [(1, "user", "first")]  # before anything else happens
    history.add("assistant", "a reply that will be cut short")
    history.replace_content(2, "a reply [interrupted]")
    assert rows(path)[-1] == (2, "assistant", "a reply [interrupted]")
    history.add("user", "a message whose reply is cancelled")
    history.remove_from(3)
    assert [row[0] for row in rows(path)] == [1, 2]
    history.add("user", "numbered again as 3")
    history.keep_last(1)  # memory only: the file keeps everything
    assert [row[0] for row in rows(path)] == [1, 2, 3]
    history.clear()
    assert rows(path) == []
    history.add("user", "a new start")
    assert rows(path) == [(1, "user", "a new start")]
    store.close()


def test_follow_saves_what_a_history_has_and_then_each_change(tmp_path):
    store = ConversationStore.create(tmp_path / "talk.parley")
    history = History([Message(1, "user", "said before")])
    history.add("assistant", "also before")
    store.follow(history)
    history.add("user", "after")
    store.follow(history)  # again: nothing is written twice
    assert [m.content for m in store.messages()] == ["said before", "also before", "after"]
    store.close()


def test_saving_stops_with_one_line_when_the_disk_is_full(tmp_path):
    store = ConversationStore.create(tmp_path / "talk.parley")
    told: list[str] = []
    store.on_error = told.append
    history = History(listener=store)
    history.add("user", "short")
    # No page may be added: the disk is full, as SQLite sees it.
    pages = store._db.execute("PRAGMA page_count").fetchone()[0]
    store._db.execute(f"PRAGMA max_page_count = {pages}")
    history.add("assistant", "x" * 20000)
    history.add("user", "and more")
    assert len(told) == 1 and "full" in told[0] and "goes on in memory" in told[0]
    assert len(history) == 3  # the conversation itself lost nothing
    assert [m.content for m in store.messages()] == ["short"]
    store.close()


def test_saving_stops_with_one_line_when_the_file_is_removed(tmp_path):
    path = tmp_path / "talk.parley"
    store = ConversationStore.create(path)
    told: list[str] = []
    store.on_error = told.append
    history = History(listener=store)
    history.add("user", "kept")
    for name in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        name.unlink()
    history.add("assistant", "not saved")
    history.add("user", "nor this")
    assert told == [f"Saving to {path} stopped (the file was removed or replaced). The "
                    "conversation goes on in memory; what is said from now on is not saved."]
    store.close()
    assert not path.exists()  # nothing was made again in its place


def test_a_second_parley_cannot_open_a_file_in_use(tmp_path):
    path = tmp_path / "talk.parley"
    saved(path, "hi")
    second = [sys.executable, "-c", "import sys; from pathlib import Path; from memory.store "
              "import ConversationStore; ConversationStore.resume(Path(sys.argv[1])).close()",
              str(path)]
    first = ConversationStore.resume(path)
    refused = subprocess.run(second, capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert "is open in another Parley; end that one first" in refused.stderr
    first.close()
    subprocess.run(second, check=True, cwd=ROOT, timeout=60)


def test_create_never_touches_an_existing_file(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("my notes")
    with pytest.raises(StoreError, match="already exists; --resume"):
        ConversationStore.create(path)
    assert path.read_text() == "my notes"


# -- files it must not use: one line, and the file exactly as it was ----------------------


def foreign(path: Path) -> None:
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE messages (id INTEGER, body TEXT)")
    db.execute("INSERT INTO messages VALUES (1, 'not ours')")
    db.commit()
    db.close()


def newer(path: Path) -> None:
    saved(path, "hi", "hello")
    db = sqlite3.connect(path)
    db.execute("PRAGMA user_version = 2")
    db.commit()
    db.close()


def torn(path: Path) -> None:
    saved(path, *[f"message {i} " * 40 for i in range(12)])
    data = bytearray(path.read_bytes())
    data[4096 + 8:4096 + 300] = b"\xff" * 292  # the messages table's page, overwritten
    path.write_bytes(data)


def cut_short(path: Path) -> None:
    saved(path, *[f"message {i} " * 40 for i in range(12)])
    path.write_bytes(path.read_bytes()[:5000])


def changed_by(statement: str) -> Callable[[Path], None]:
    """A saved conversation that another program then changed with `statement`."""
    def change(path: Path) -> None:
        saved(path, "hi")
        db = sqlite3.connect(path)
        db.execute(statement)
        db.commit()
        db.close()
    return change


BAD_FILES = {
    "text": (lambda p: p.write_text("just some notes\n"),
             "is not a Parley conversation (not an SQLite database); pass another file"),
    "empty": (lambda p: p.write_bytes(b""), "is not a Parley conversation (an empty file)"),
    "foreign SQLite": (foreign, "is not a Parley conversation (an SQLite database of another "
                                "program); pass another file"),
    "newer schema": (newer, "was saved by a newer Parley (schema 2; this one reads up to 1)"),
    "torn page": (torn, "is damaged ("),
    "cut short": (cut_short, "is damaged (database disk image is malformed)"),
    "tables changed": (changed_by("ALTER TABLE messages RENAME TO old_messages"),
                       "is damaged (its messages table is missing or changed)"),
    "bad row": (changed_by("UPDATE messages SET role = 'narrator'"),
                "is damaged (message #1: unknown role 'narrator'"),
}


def snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in folder.iterdir()}


@pytest.mark.parametrize("kind", BAD_FILES)
def test_a_file_it_cannot_continue_is_one_line_and_left_untouched(tmp_path, kind):
    make, says = BAD_FILES[kind]
    path = tmp_path / "talk.parley"
    make(path)
    os.utime(path, ns=(1_000_000_000, 1_000_000_000))  # an mtime any write would change
    before = snapshot(tmp_path)
    with pytest.raises(StoreError) as caught:
        ConversationStore.resume(path)
    message = str(caught.value)
    assert message.startswith(str(path)) and says in message and "\n" not in message
    assert snapshot(tmp_path) == before  # its bytes and mtime, and nothing made beside it


def test_a_missing_file_says_how_to_start_one(tmp_path):
    path = tmp_path / "none.parley"
    with pytest.raises(StoreError, match=f"there is no conversation at {path}; --save {path}"):
        check(path)
