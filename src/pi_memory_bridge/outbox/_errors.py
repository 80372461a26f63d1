"""Outbox errors, and the translation of sqlite3 errors into them.

Each outbox error is also the matching `BackendError`, because the outbox sits behind the capture
seam (`CaptureSink.submit`), whose callers already handle the backend error tree: a locked
outbox is "try again later", a damaged file needs the user, a turn that cannot be queued is
permanent.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pi_memory_bridge.backends.base import (
    BackendConfigError,
    BackendCorrupt,
    BackendError,
    BackendRejected,
    BackendUnavailable,
)


class OutboxError(BackendError):
    """Base of every error the outbox raises on purpose."""


class OutboxUnavailable(OutboxError, BackendUnavailable):
    """Transient: the outbox is locked by another process beyond the busy timeout, closed, or the
    disk failed; nothing was changed."""


class OutboxCorrupt(OutboxError, BackendCorrupt):
    """The outbox database file is damaged."""


class OutboxConfigError(OutboxError, BackendConfigError):
    """The outbox directory cannot be created or written, or a newer version wrote the file."""


class OutboxInvalidTurn(OutboxError, BackendRejected):
    """A turn that cannot be queued (e.g. an empty turn id); nothing of the batch was queued."""


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


def translate(exc: sqlite3.Error, db_path: Path, action: str) -> OutboxError:
    """The outbox error for `exc`, raised while doing `action` on the outbox at `db_path`."""
    code = getattr(exc, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    what = f"capture outbox {db_path}: {action} failed: {exc}"
    if primary in (_SQLITE_BUSY, _SQLITE_LOCKED):
        return OutboxUnavailable(f"{what} (another process holds the outbox lock; retry later)")
    if primary in (_SQLITE_CORRUPT, _SQLITE_NOTADB) or "malformed" in str(exc).lower():
        return OutboxCorrupt(
            f"{what} (the outbox file is damaged; stop every Pi session, then move {db_path.name} "
            "and its -wal/-shm files away to start an empty outbox)"
        )
    if primary in (_SQLITE_READONLY, _SQLITE_PERM, _SQLITE_CANTOPEN, _SQLITE_AUTH):
        return OutboxConfigError(f"{what} (check that the directory exists and is writable)")
    if primary in (_SQLITE_IOERR, _SQLITE_FULL):
        return OutboxUnavailable(f"{what} (disk or file system error; retry later)")
    return OutboxUnavailable(what)


@contextmanager
def translated(db_path: Path, action: str) -> Iterator[None]:
    """Re-raise any sqlite3 error inside the block as an `OutboxError`."""
    try:
        yield
    except sqlite3.Error as exc:
        raise translate(exc, db_path, action) from exc
