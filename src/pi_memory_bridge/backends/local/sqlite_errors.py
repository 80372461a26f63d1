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
from pi_memory_bridge.sqlite_faults import SqliteFault, to_error


def translate(exc: sqlite3.Error, db_path: Path, action: str) -> BackendError:
    """The backend error for `exc`, raised while doing `action` on the store at `db_path`."""
    kinds: dict[SqliteFault, tuple[type[BackendError], str]] = {
        "busy": (BackendUnavailable, "another process holds the database lock; retry later"),
        "corrupt": (
            BackendCorrupt,
            f"the database file is damaged; move {db_path.name} and its -wal/-shm files away to start a "
            "fresh store",
        ),
        "denied": (BackendConfigError, "check that the directory exists and is writable"),
        "io": (BackendUnavailable, "disk or file system error; retry later"),
    }
    return to_error(exc, f"local memory store {db_path}: {action} failed: {exc}", kinds, BackendUnavailable)


@contextmanager
def translated(db_path: Path, action: str) -> Iterator[None]:
    """Re-raise any sqlite3 error inside the block as a `BackendError`."""
    try:
        yield
    except sqlite3.Error as exc:
        raise translate(exc, db_path, action) from exc
