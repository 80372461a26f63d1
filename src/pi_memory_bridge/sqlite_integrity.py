"""Is one of our SQLite files damaged, and what to do about it: one wording for doctor, status and
the footer.

A damaged page in the middle of `memory.sqlite3` can go unnoticed by every query that does not
touch it (search and recall answer from the pages they read), so the file is checked as a whole
with `PRAGMA quick_check` (seconds for a large store at worst; doctor and status run it on
request, the sidecar once in the background after its start).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote

# What happens after the damaged store is moved away, in the advice (the same words everywhere).
STORE_AFTER_MOVE = "the next start creates an empty store, and"


class Damaged(Exception):
    """`PRAGMA quick_check` found damage; the message is what it said (its first lines)."""


@contextmanager
def read_only(db: Path, *, timeout: float = 2.0) -> Iterator[sqlite3.Connection]:
    """A connection that cannot change `db`. Without a `-wal` file no process has it open, so
    `immutable` skips locking and creates no `-wal`/`-shm`; with one, a plain read-only open
    shares the live process's WAL index."""
    wal = db.with_name(db.name + "-wal")
    flags = "mode=ro" if wal.exists() else "mode=ro&immutable=1"
    conn = sqlite3.connect(f"file:{quote(str(db))}?{flags}", uri=True, timeout=timeout)
    try:
        yield conn
    finally:
        conn.close()


def quick_check(conn: sqlite3.Connection) -> None:
    """Raises `Damaged` unless the whole file is sound."""
    rows = conn.execute("PRAGMA quick_check").fetchall()
    if rows != [("ok",)]:
        raise Damaged("; ".join(" ".join(str(r[0]).split()) for r in rows[:3]))


def damage_of(db: Path) -> str | None:
    """ "<db> is damaged: <reason>" when the check finds damage; None when it is sound, missing, or
    cannot be checked now (busy, locked, no permission: that is not damage)."""
    if not db.exists():
        return None
    try:
        with read_only(db) as conn:
            quick_check(conn)
    except Damaged as exc:
        return damaged_text(db, str(exc))
    except sqlite3.OperationalError as exc:
        text = str(exc)
        if "locked" in text or "busy" in text or "unable to open" in text:
            return None
        return damaged_text(db, text)
    except sqlite3.DatabaseError as exc:
        return damaged_text(db, str(exc))
    return None


def damaged_text(db: Path, reason: str) -> str:
    return f"{db} is damaged: {reason}"


def keep_a_copy(db: Path, what: str, after: str) -> str:
    """How to keep the damaged file and start a new one (never moves anything itself)."""
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    copy = db.with_name(f"{db.name}.damaged-{stamp}")
    return (
        f"stop every Pi session, then keep a copy and start a new {what}: mv {db} {copy} "
        f"(move its -wal and -shm files with it if they exist); {after} "
        f"`sqlite3 {copy} .recover` may get data out of the copy"
    )
