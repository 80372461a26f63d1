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
from pi_memory_bridge.sqlite_faults import SqliteFault, to_error


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


def translate(exc: sqlite3.Error, db_path: Path, action: str) -> OutboxError:
    """The outbox error for `exc`, raised while doing `action` on the outbox at `db_path`."""
    kinds: dict[SqliteFault, tuple[type[OutboxError], str]] = {
        "busy": (OutboxUnavailable, "another process holds the outbox lock; retry later"),
        "corrupt": (
            OutboxCorrupt,
            f"the outbox file is damaged; stop every Pi session, then move {db_path.name} and its "
            "-wal/-shm files away to start an empty outbox",
        ),
        "denied": (OutboxConfigError, "check that the directory exists and is writable"),
        "io": (OutboxUnavailable, "disk or file system error; retry later"),
    }
    return to_error(exc, f"capture outbox {db_path}: {action} failed: {exc}", kinds, OutboxUnavailable)


@contextmanager
def translated(db_path: Path, action: str) -> Iterator[None]:
    """Re-raise any sqlite3 error inside the block as an `OutboxError`."""
    try:
        yield
    except sqlite3.Error as exc:
        raise translate(exc, db_path, action) from exc
