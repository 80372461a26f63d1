"""Turn sqlite3 exceptions into the backend error tree, with messages a user can act on."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pi_memory_bridge.backends.base import (
    BackendConfigError,
    BackendCorrupt,
    BackendError,
    BackendUnavailable,
)

# Primary result codes (the low byte of an extended code), from sqlite3.h.
_SQLITE_PERM = 3
_SQLITE_BUSY = 5
_SQLITE_LOCKED = 6
_SQLITE_READONLY = 8
_SQLITE_IOERR = 10
_SQLITE_CORRUPT = 11
_SQLITE_FULL = 13
_SQLITE_CANTOPEN = 14
_SQLITE_AUTH = 23
_SQLITE_NOTADB = 26

_CORRUPT_HINTS = ("malformed", "not a database", "no such table", "no such column", "corrupt")


def translate(exc: sqlite3.Error, db_path: Path, action: str) -> BackendError:
    """The backend error for `exc`, raised while doing `action` on the store at `db_path`."""
    code = getattr(exc, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    what = f"local memory store {db_path}: {action} failed: {exc}"
    if primary in (_SQLITE_BUSY, _SQLITE_LOCKED):
        return BackendUnavailable(f"{what} (another process holds the database lock; retry later)")
    if primary in (_SQLITE_CORRUPT, _SQLITE_NOTADB) or any(h in str(exc).lower() for h in _CORRUPT_HINTS):
        return BackendCorrupt(
            f"{what} (the database file is damaged; move {db_path.name} and its -wal/-shm files "
            "away to start a fresh store)"
        )
    if primary in (_SQLITE_READONLY, _SQLITE_PERM, _SQLITE_CANTOPEN, _SQLITE_AUTH):
        return BackendConfigError(f"{what} (check that the directory exists and is writable)")
    if primary in (_SQLITE_IOERR, _SQLITE_FULL):
        return BackendUnavailable(f"{what} (disk or file system error; retry later)")
    return BackendUnavailable(what)


@contextmanager
def translated(db_path: Path, action: str) -> Iterator[None]:
    """Re-raise any sqlite3 error inside the block as a `BackendError`."""
    try:
        yield
    except sqlite3.Error as exc:
        raise translate(exc, db_path, action) from exc
