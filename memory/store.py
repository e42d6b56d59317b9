"""A conversation kept in a file, only when asked (`--save FILE`, `--resume FILE`).

One SQLite file per conversation (the standard library's `sqlite3`): its numbered messages
and its running summary. Write-ahead logging and a commit per change: a message is in the
file as soon as it is in the conversation, so a crash or a kill loses nothing already said.
A file is checked read-only before anything is written to it, so a damaged or foreign file,
or one from a newer Parley, is left exactly as it was.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import sqlite3
import threading
import urllib.parse
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path

from memory.history import History, Message
from memory.summary import RunningSummary

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1
"""`PRAGMA user_version` of the files this Parley writes; a larger one is from a newer Parley."""
APPLICATION_ID = 0x50524C59
"""`PRAGMA application_id` ("PRLY"): tells a Parley conversation from any other SQLite file."""
SQLITE_HEADER = b"SQLite format 3\x00"

SCHEMA = """
CREATE TABLE messages (
    seq INTEGER PRIMARY KEY,    -- the message's number, 1 for the first said
    role TEXT NOT NULL,         -- user, assistant or tool
    content TEXT NOT NULL,
    tool TEXT,                  -- a tool result's tool
    query TEXT,                 -- what the tool was asked, as one line
    arguments TEXT,             -- the tool call's arguments, as JSON
    at TEXT                     -- when it was said: ISO 8601 with its UTC offset
);
CREATE TABLE summary (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    bullets TEXT NOT NULL,      -- a JSON list of strings
    covered_through INTEGER NOT NULL,
    retry_at INTEGER NOT NULL,
    fallback_bullets INTEGER NOT NULL
);
"""
COLUMNS = {
    "messages": ["seq", "role", "content", "tool", "query", "arguments", "at"],
    "summary": ["id", "bullets", "covered_through", "retry_at", "fallback_bullets"],
}


class StoreError(Exception):
    """A conversation file cannot be used; `str()` is the one line shown to the user."""


def not_a_conversation(path: Path, why: str) -> StoreError:
    return StoreError(f"{path} is not a Parley conversation ({why}); pass another file")


def damaged(path: Path, why: str) -> StoreError:
    return StoreError(f"{path} is damaged ({why}); it was left as it is")


def check(path: Path) -> None:
    """Raise `StoreError` unless `path` is a Parley conversation this Parley can continue.

    Only reads: the header first (so a foreign file never reaches SQLite), then the schema
    version, tables, pages and every row through a read-only connection; last, that no
    other Parley has it open.
    """
    try:
        with open(path, "rb") as file:
            header = file.read(100)
    except FileNotFoundError:
        raise StoreError(f"there is no conversation at {path}; --save {path} starts one") \
            from None
    except IsADirectoryError:
        raise not_a_conversation(path, "a folder") from None
    except OSError as exc:
        raise StoreError(f"cannot read {path} ({exc.strerror})") from None
    if not header:
        raise not_a_conversation(path, "an empty file")
    if not header.startswith(SQLITE_HEADER):
        raise not_a_conversation(path, "not an SQLite database")
    if len(header) < 100:
        raise damaged(path, "cut short")
    if int.from_bytes(header[68:72], "big") != APPLICATION_ID:
        raise not_a_conversation(path, "an SQLite database of another program")
    _newer(path, int.from_bytes(header[60:64], "big"))
    # Without a -wal (closed cleanly) the file is all there is: read as immutable, SQLite
    # makes no -wal or -shm beside it. A -wal left by a kill holds the latest commits.
    immutable = "" if os.path.exists(f"{path}-wal") else "&immutable=1"
    try:
        db = sqlite3.connect(f"file:{urllib.parse.quote(os.path.abspath(path))}?mode=ro"
                             f"{immutable}", uri=True)
    except sqlite3.Error as exc:
        raise damaged(path, str(exc)) from None
    try:
        _newer(path, db.execute("PRAGMA user_version").fetchone()[0])  # the WAL may be newer
        for table, columns in COLUMNS.items():
            found = [row[1] for row in db.execute(f"PRAGMA table_info({table})")]
            if found != columns:
                raise damaged(path, f"its {table} table is missing or changed")
        problems = [line.strip() for row in db.execute("PRAGMA quick_check")
                    for line in row[0].splitlines() if not line.startswith("***")]
        if problems != ["ok"]:
            raise damaged(path, problems[0] if problems else "it failed its check")
        _read_messages(db, path)
        _read_summary(db, path)
    except sqlite3.Error as exc:
        raise damaged(path, str(exc)) from None
    finally:
        db.close()
    os.close(_lock(os.open(path, os.O_RDONLY | os.O_CLOEXEC), path))  # not in use (yet)


def _newer(path: Path, version: int) -> None:
    if version > SCHEMA_VERSION:
        raise StoreError(f"{path} was saved by a newer Parley (schema {version}; this one "
                         f"reads up to {SCHEMA_VERSION})")
    if version < 1:
        raise damaged(path, "no schema version")


def _read_messages(db: sqlite3.Connection, path: Path, last: int | None = None
                   ) -> list[Message]:
    query = "SELECT * FROM messages ORDER BY seq"
    if last is not None:  # the newest `last`, oldest first
        query = f"SELECT * FROM (SELECT * FROM messages ORDER BY seq DESC LIMIT {int(last)}) " \
                "ORDER BY seq"
    messages = []
    for seq, role, content, tool, query_, arguments, at in db.execute(query):
        try:
            if not isinstance(content, str):
                raise ValueError("its text is not text")
            parsed = json.loads(arguments) if arguments is not None else None
            if parsed is not None and not isinstance(parsed, dict):
                raise ValueError("its arguments are not an object")
            messages.append(Message(seq, role, content, tool, query_, parsed,
                                    datetime.fromisoformat(at) if at is not None else None))
        except (ValueError, TypeError) as exc:
            raise damaged(path, f"message #{seq}: {exc}") from None
    return messages


def _read_summary(db: sqlite3.Connection, path: Path) -> RunningSummary:
    row = db.execute("SELECT bullets, covered_through, retry_at, fallback_bullets "
                     "FROM summary WHERE id = 1").fetchone()
    if row is None:
        return RunningSummary()
    try:
        bullets = json.loads(row[0])
        if not (isinstance(bullets, list) and all(isinstance(b, str) for b in bullets)
                and all(isinstance(n, int) for n in row[1:])):
            raise ValueError("not a list of bullets and message numbers")
    except ValueError as exc:
        raise damaged(path, f"its summary: {exc}") from None
    return RunningSummary(tuple(bullets), row[1], row[2], row[3])


def _row(message: Message) -> tuple:
    arguments = (json.dumps(message.arguments, ensure_ascii=False, default=str)
                 if message.arguments is not None else None)
    at = message.at.isoformat() if message.at is not None else None
    return (message.seq, message.role, message.content, message.tool, message.query,
            arguments, at)


class ConversationStore:
    """A conversation's file, open for writing: each change is committed as it happens.

    It is a `HistoryListener`: attach it to a `History` (or let `follow` do it). Write
    failures (a full disk, the file removed) are reported once through `on_error`, and
    nothing more is written: the conversation goes on in memory.
    """

    def __init__(self, path: Path, lock: int, db: sqlite3.Connection) -> None:
        self.path = path
        self._lock_fd = lock
        self._db = db
        self._identity = _identity(path)
        self._lock = threading.Lock()  # replies and the voice loop's commit write from threads
        self._last_seq = db.execute("SELECT coalesce(max(seq), 0) FROM messages").fetchone()[0]
        self.failure: str | None = None
        """Why saving stopped (None while it works)."""
        self.on_error: Callable[[str], None] = lambda line: log.warning("%s", line)
        """Told once, in one line, when saving stops."""

    # -- opening -------------------------------------------------------------------------

    @classmethod
    def create(cls, path: Path) -> ConversationStore:
        """A new conversation file, readable by its owner only; never an existing file."""
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        except FileExistsError:
            raise StoreError(f"{path} already exists; --resume {path} continues a saved "
                             "conversation, or give --save a new file") from None
        except OSError as exc:
            raise StoreError(f"cannot create {path} ({exc.strerror})") from None
        os.fchmod(fd, 0o600)  # whatever the umask; SQLite gives -wal and -shm the same mode
        _lock(fd, path)
        try:
            db = _connect(path)
            # The header (application id, version) and tables are written before WAL mode
            # starts, so they are in the file itself, never only in its -wal.
            db.executescript(f"BEGIN; PRAGMA application_id = {APPLICATION_ID}; "
                             f"PRAGMA user_version = {SCHEMA_VERSION}; {SCHEMA} COMMIT;")
            _write_ahead(db)
        except sqlite3.Error as exc:
            os.close(fd)
            os.unlink(path)  # made a moment ago, by this call: nothing of anyone's is in it
            raise StoreError(f"cannot create {path} ({exc})") from None
        return cls(path, fd, db)

    @classmethod
    def resume(cls, path: Path) -> ConversationStore:
        """An existing conversation file, checked read-only before it is opened to write."""
        check(path)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError as exc:
            raise StoreError(f"cannot open {path} ({exc.strerror})") from None
        _lock(fd, path)
        try:
            db = _connect(path)
            _write_ahead(db)
        except sqlite3.Error as exc:
            os.close(fd)
            raise StoreError(f"cannot write to {path} ({exc})") from None
        return cls(path, fd, db)

    def close(self) -> None:
        """Close the file; SQLite folds its -wal back in and removes it and the -shm."""
        with self._lock:
            try:
                self._db.close()
            except sqlite3.Error:
                log.debug("closing %s failed", self.path, exc_info=True)
            if self._lock_fd >= 0:
                os.close(self._lock_fd)  # after SQLite: closing it drops the process's locks
                self._lock_fd = -1

    # -- reading -------------------------------------------------------------------------

    def messages(self, last: int | None = None) -> list[Message]:
        """Every saved message (or the newest `last`), oldest first."""
        with self._lock:
            return _read_messages(self._db, self.path, last)

    def summary(self) -> RunningSummary:
        with self._lock:
            return _read_summary(self._db, self.path)

    def count(self) -> int:
        with self._lock:
            return self._db.execute("SELECT count(*) FROM messages").fetchone()[0]

    # -- the history's changes, as they happen ---------------------------------------------

    def added(self, message: Message) -> None:
        with self._lock:
            if message.seq > self._last_seq:  # not saved already (by `follow`)
                self._write([("INSERT OR REPLACE INTO messages VALUES (?, ?, ?, ?, ?, ?, ?)",
                              _row(message))], message.seq)

    def removed_from(self, seq: int) -> None:
        with self._lock:
            self._write([("DELETE FROM messages WHERE seq >= ?", (seq,))],
                        min(self._last_seq, seq - 1))

    def replaced(self, message: Message) -> None:
        with self._lock:
            self._write([("UPDATE messages SET content = ? WHERE seq = ?",
                          (message.content, message.seq))], self._last_seq)

    def cleared(self) -> None:
        with self._lock:
            self._write([("DELETE FROM messages", ()), ("DELETE FROM summary", ())], 0)

    def save_summary(self, summary: RunningSummary) -> None:
        with self._lock:
            self._write([("INSERT OR REPLACE INTO summary VALUES (1, ?, ?, ?, ?)",
                          (json.dumps(list(summary.bullets), ensure_ascii=False),
                           summary.covered_through, summary.retry_at,
                           summary.fallback_bullets))], self._last_seq)

    def follow(self, history: History) -> None:
        """Save `history`'s messages not saved yet, and every change to it from now on."""
        with self._lock:
            # Attached first: a message added while this runs is either read below or
            # told to `added` (which skips what is saved already).
            history.listener = self
            self._save_new(history.messages)

    def _save_new(self, messages: Sequence[Message]) -> None:
        new = [m for m in messages if m.seq > self._last_seq]
        if new:
            self._write([("INSERT OR REPLACE INTO messages VALUES (?, ?, ?, ?, ?, ?, ?)",
                          _row(m)) for m in new], new[-1].seq)

    def _write(self, statements: list[tuple[str, tuple]], last_seq: int) -> None:
        """Run `statements` as one committed transaction (the caller holds the lock)."""
        if self.failure is not None:
            return
        try:
            if _identity(self.path) != self._identity:
                raise OSError("the file was removed or replaced")
            self._db.execute("BEGIN IMMEDIATE")
            for sql, parameters in statements:
                self._db.execute(sql, parameters)
            self._db.execute("COMMIT")
            self._last_seq = last_seq
        except (sqlite3.Error, OSError) as exc:
            if self._db.in_transaction:
                try:
                    self._db.execute("ROLLBACK")
                except sqlite3.Error:
                    pass
            self.failure = str(exc) or type(exc).__name__
            self.on_error(f"Saving to {self.path} stopped ({self.failure}). The conversation "
                          "goes on in memory; what is said from now on is not saved.")


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        status = os.stat(path)
    except OSError:
        return None
    return status.st_dev, status.st_ino


def _connect(path: Path) -> sqlite3.Connection:
    # Autocommit: every change is its own explicit transaction, committed at once.
    return sqlite3.connect(path, check_same_thread=False, isolation_level=None)


def _write_ahead(db: sqlite3.Connection) -> None:
    """WAL: a commit appends to the -wal, and a killed process leaves every commit readable.
    synchronous=NORMAL syncs at checkpoints, not at each commit: a kill of Parley loses
    nothing, a power cut may lose the last moments, and no reply waits for a disk flush."""
    mode = db.execute("PRAGMA journal_mode = WAL").fetchone()[0]
    if mode.lower() != "wal":
        raise sqlite3.OperationalError(f"write-ahead logging is unavailable ({mode})")
    db.execute("PRAGMA synchronous = NORMAL")


def _lock(fd: int, path: Path) -> int:
    """Lock `fd`'s file for this process (it stays locked while `fd` is open): one Parley at
    a time per file, as two writing the same numbers would mix conversations. flock, not
    fcntl: SQLite's own locks are fcntl locks, and the two never meet."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise StoreError(f"{path} is open in another Parley; end that one first") from None
    return fd
