"""A saved conversation's file as a second program sees it: what is in it now."""

from __future__ import annotations

import sqlite3
from pathlib import Path


def rows(path: Path) -> list[tuple[int, str, str]]:
    """The messages in the file now, as (number, role, text), read by a second connection."""
    # Read-only, and immutable when no -wal is there: looking leaves nothing beside it.
    immutable = "" if Path(f"{path}-wal").exists() else "&immutable=1"
    db = sqlite3.connect(f"file:{path}?mode=ro{immutable}", uri=True)
    try:
        return db.execute("SELECT seq, role, content FROM messages ORDER BY seq").fetchall()
    finally:
        db.close()
