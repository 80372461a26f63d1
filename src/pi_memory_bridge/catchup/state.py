"""What catch-up and import remember between runs, in `<data-dir>/catchup.sqlite3` (0600).

* A watermark per session file: the file's identity (device, inode, Pi's session id), `offset`
  (every user message that starts before it has been decided: queued, skipped fail-closed, or left
  to an explicit import), and a boundary entry (the id of the entry whose line ends at
  `boundary_end`) that proves on the next read that the bytes before `offset` are still the ones
  that were decided. A file that was truncated, replaced or rewritten fails that proof and is read
  again from the start, which is safe: a turn queued once is never queued again (outbox `captured`).
* Import jobs: what the user agreed to import, and which files of it are done, so an interrupted
  import resumes where it stopped.

Losing this file costs work (files are read again), never a turn or a duplicate. Rows are
validated when read; a row that does not fit is ignored (its file is read again).

`capture-since` (a text file beside it, epoch ms) is when memory first ran in this agent dir: the
shim writes it at its first session start, before any turn it could capture. Catch-up recovers
turns said from then on; older sessions are imported only when the user asks (`import`).
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pi_memory_bridge.private_files import prepare_sqlite_file
from pi_memory_bridge.sqlite_tx import transaction

log = logging.getLogger(__name__)

DB_FILENAME = "catchup.sqlite3"
SINCE_FILENAME = "capture-since"
LOCK_FILENAME = "catchup.lock"
SCHEMA_VERSION = 1
_BUSY_TIMEOUT_S = 5.0
_MIN_PLAUSIBLE_MS = 1_000_000_000_000  # 2001: anything earlier is not a time this ran

_DDL = (
    """CREATE TABLE marks (
        path TEXT PRIMARY KEY,
        dev INTEGER NOT NULL,
        ino INTEGER NOT NULL,
        session_id TEXT NOT NULL,
        offset INTEGER NOT NULL,
        boundary_id TEXT,
        boundary_end INTEGER NOT NULL,
        size INTEGER NOT NULL,
        mtime_ns INTEGER NOT NULL,
        open_turns INTEGER NOT NULL,
        updated_at REAL NOT NULL
    )""",
    """CREATE TABLE imports (
        id INTEGER PRIMARY KEY,
        since_ms INTEGER,
        session_file TEXT,
        created_at REAL NOT NULL,
        finished_at REAL
    )""",
    """CREATE TABLE import_files (
        import_id INTEGER NOT NULL REFERENCES imports(id) ON DELETE CASCADE,
        path TEXT NOT NULL,
        done INTEGER NOT NULL DEFAULT 0,
        queued INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (import_id, path)
    )""",
)


class StateError(Exception):
    """The catch-up state cannot be read or written (disk full, permissions, damage)."""


class _Row(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)


class Mark(_Row):
    """The watermark of one session file."""

    path: str = Field(min_length=1)
    dev: int
    ino: int
    session_id: str = Field(min_length=1)
    offset: int = Field(ge=0)
    boundary_id: str | None
    boundary_end: int = Field(ge=0)
    size: int = Field(ge=0)
    mtime_ns: int
    open_turns: int = Field(ge=0)
    updated_at: float


@dataclass(frozen=True, slots=True)
class StoredMark:
    """A `marks` row as read, columns in `Mark` field order."""

    row: tuple[object, ...]

    @property
    def stat_key(self) -> tuple[object, ...]:
        """(device, inode, size, mtime) as recorded: equal to the file's only if it did not change."""
        return self.row[1], self.row[2], self.row[7], self.row[8]

    @property
    def open_turns(self) -> int:
        value = self.row[9]
        return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0

    def validated(self) -> Mark | None:
        """The watermark, or None when the row does not fit (its file is then read from the start)."""
        try:
            return Mark.model_validate(dict(zip(Mark.model_fields, self.row, strict=True)))
        except (ValidationError, ValueError):
            log.warning("catch-up: ignoring an unreadable watermark for %r", self.row[0])
            return None


class ImportFile(_Row):
    path: str = Field(min_length=1)
    done: bool
    queued: int = Field(ge=0)


class ImportJob(_Row):
    id: int
    since_ms: int | None
    session_file: str | None
    created_at: float
    finished_at: float | None
    files: tuple[ImportFile, ...] = ()

    @property
    def remaining(self) -> tuple[str, ...]:
        return tuple(f.path for f in self.files if not f.done)

    @property
    def queued(self) -> int:
        return sum(f.queued for f in self.files)


class CatchUpState:
    """The state database; blocking and thread-safe (one connection behind a lock)."""

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self._conn: sqlite3.Connection | None = conn
        self._path = path
        self._lock = threading.Lock()

    @classmethod
    def open(cls, root: Path) -> CatchUpState:
        path = root / DB_FILENAME
        try:
            # as the outbox opens its database: a 0700 dir, a 0600 file (SQLite's -wal/-shm follow
            # it), and what an older version left looser tightened
            prepare_sqlite_file(path)
            conn = sqlite3.connect(
                path, timeout=_BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
            )
        except (OSError, sqlite3.Error) as exc:
            raise StateError(f"cannot open the catch-up state {path}: {exc}") from exc
        try:
            conn.row_factory = sqlite3.Row
            conn.execute("PRAGMA secure_delete = ON")
            conn.execute("PRAGMA foreign_keys = ON")
            if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                conn.execute("PRAGMA journal_mode = WAL").fetchone()
            # a lost update only means reading a file again
            conn.execute("PRAGMA synchronous = NORMAL")
            if conn.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
                conn.execute("BEGIN IMMEDIATE")
                found = int(conn.execute("PRAGMA user_version").fetchone()[0])
                if found > SCHEMA_VERSION:
                    conn.execute("ROLLBACK")
                    raise StateError(f"{path} was written by a newer pi-memory-bridge; upgrade it")
                if found < 1:
                    for statement in _DDL:
                        conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                conn.execute("COMMIT")
        except sqlite3.Error as exc:
            conn.close()
            raise StateError(f"cannot open the catch-up state {path}: {exc}") from exc
        except BaseException:
            conn.close()
            raise
        return cls(conn, path)

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _tx(self, action: str, *, write: bool = True) -> Iterator[sqlite3.Connection]:
        with self._lock:
            conn = self._conn
            if conn is None:
                raise StateError(f"the catch-up state {self._path} is closed")
            try:
                with transaction(conn, write=write):
                    yield conn
            except sqlite3.Error as exc:
                raise StateError(f"catch-up state {self._path}: {action} failed: {exc}") from exc

    # ---- watermarks -----------------------------------------------------------------------------

    def marks(self) -> dict[str, StoredMark]:
        """Every watermark, by path, as stored (validated when used: a pass compares thousands of
        files by their stat and reads only the few that changed)."""
        with self._tx("reading watermarks", write=False) as conn:
            rows = conn.execute(f"SELECT {', '.join(Mark.model_fields)} FROM marks").fetchall()
        return {str(row[0]): StoredMark(tuple(row)) for row in rows}

    def save_mark(self, mark: Mark) -> None:
        values = mark.model_dump()
        columns = ", ".join(values)
        with self._tx("saving a watermark") as conn:
            conn.execute(
                f"INSERT OR REPLACE INTO marks ({columns}) VALUES ({', '.join('?' * len(values))})",
                tuple(values.values()),
            )

    def forget_marks(self, paths: Sequence[str]) -> None:
        """Drop the watermarks of files that are gone (the user deleted them)."""
        if not paths:
            return
        with self._tx("dropping watermarks") as conn:
            conn.executemany("DELETE FROM marks WHERE path = ?", [(p,) for p in paths])

    # ---- import jobs ----------------------------------------------------------------------------

    def unfinished_import(self) -> ImportJob | None:
        with self._tx("reading import jobs", write=False) as conn:
            row = conn.execute(
                "SELECT * FROM imports WHERE finished_at IS NULL ORDER BY id DESC LIMIT 1"
            ).fetchone()
            if row is None:
                return None
            files = conn.execute(
                "SELECT path, done, queued FROM import_files WHERE import_id = ? ORDER BY rowid", (row["id"],)
            ).fetchall()
        try:
            return ImportJob.model_validate(
                {
                    **dict(row),
                    "files": tuple(
                        {"path": f["path"], "done": bool(f["done"]), "queued": f["queued"]} for f in files
                    ),
                }
            )
        except ValidationError:
            log.warning("catch-up: ignoring an unreadable import job %s", row["id"])
            return None

    def begin_import(self, since_ms: int | None, session_file: str | None, paths: Sequence[str]) -> ImportJob:
        """Record the import the user agreed to (an unfinished earlier one is superseded)."""
        now = time.time()
        with self._tx("recording an import") as conn:
            conn.execute("UPDATE imports SET finished_at = ? WHERE finished_at IS NULL", (now,))
            cursor = conn.execute(
                "INSERT INTO imports (since_ms, session_file, created_at) VALUES (?, ?, ?)",
                (since_ms, session_file, now),
            )
            job_id = int(cursor.lastrowid or 0)
            conn.executemany(
                "INSERT OR IGNORE INTO import_files (import_id, path) VALUES (?, ?)",
                [(job_id, p) for p in paths],
            )
        return ImportJob(
            id=job_id,
            since_ms=since_ms,
            session_file=session_file,
            created_at=now,
            finished_at=None,
            files=tuple(ImportFile(path=p, done=False, queued=0) for p in dict.fromkeys(paths)),
        )

    def import_file_done(self, job_id: int, path: str, queued: int) -> None:
        with self._tx("recording import progress") as conn:
            conn.execute(
                "UPDATE import_files SET done = 1, queued = ? WHERE import_id = ? AND path = ?",
                (queued, job_id, path),
            )

    def finish_import(self, job_id: int) -> None:
        with self._tx("finishing an import") as conn:
            conn.execute("UPDATE imports SET finished_at = ? WHERE id = ?", (time.time(), job_id))


# ---- capture-since ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CaptureSince:
    ms: int
    recorded_now: bool  # this call wrote it (no earlier record)


def capture_since(root: Path, *, now_ms: int | None = None) -> CaptureSince:
    """When memory first ran in this agent dir (the shim's record, else recorded now)."""
    path = root / SINCE_FILENAME
    try:
        text = path.read_bytes().decode("ascii", errors="replace").strip()
    except FileNotFoundError:
        text = None
    except OSError as exc:
        raise StateError(f"cannot read {path}: {exc}") from exc
    if text is not None and text.isdigit() and int(text) >= _MIN_PLAUSIBLE_MS:
        return CaptureSince(int(text), recorded_now=False)
    ms = now_ms if now_ms is not None else int(time.time() * 1000)
    try:
        root.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = path.with_name(f".{SINCE_FILENAME}.{os.getpid()}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, f"{ms}\n".encode("ascii"))
            os.fsync(fd)
        finally:
            os.close(fd)
        if text is None:
            try:
                os.link(tmp, path)  # no replace: a record another process just wrote wins
            except FileExistsError:
                os.unlink(tmp)
                return capture_since(root, now_ms=now_ms)
            os.unlink(tmp)
        else:
            os.replace(tmp, path)  # unreadable: start counting from now (capture less, never more)
    except OSError as exc:
        raise StateError(f"cannot record when capture started in {path}: {exc}") from exc
    return CaptureSince(ms, recorded_now=True)
