"""A small pool of SQLite connections shared by the threads that `asyncio.to_thread` uses.

A connection is used by one thread at a time (taken from the pool, given back after one short
unit of work), so no connection is ever shared concurrently, and `close()` can reach every
connection, which a thread-local scheme cannot.

Every connection is opened the same way: the database file (and so SQLite's `-wal`, `-shm` and
`-journal`) is private to its owner, writes are synchronous, and `secure_delete` is on for the
connection's whole life, whatever this SQLite build's default is, so forgotten text is zeroed
in the file instead of left in free pages.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pi_memory_bridge.backends.base import BackendConfigError, BackendUnavailable
from pi_memory_bridge.backends.local.sqlite_errors import translated
from pi_memory_bridge.private_files import prepare_sqlite_file


class ConnectionPool:
    def __init__(self, db_path: Path, *, busy_timeout_ms: int, max_size: int = 8) -> None:
        self._db_path = db_path
        self._busy_timeout_ms = busy_timeout_ms
        self._max_size = max_size
        self._idle: list[sqlite3.Connection] = []
        self._open = 0
        self._closed = False
        self._available = threading.Condition()
        self._file_prepared = False

    @property
    def db_path(self) -> Path:
        return self._db_path

    def _connect(self) -> sqlite3.Connection:
        if not self._file_prepared:
            try:
                prepare_sqlite_file(self._db_path)
            except OSError as exc:
                raise BackendConfigError(
                    f"cannot create the local memory store {self._db_path}: {exc}"
                ) from exc
            self._file_prepared = True
        with translated(self._db_path, "opening a connection"):
            # isolation_level=None: we issue BEGIN IMMEDIATE ourselves, so a writer takes the
            # write lock up front (waiting busy_timeout) instead of failing on lock upgrade.
            conn = sqlite3.connect(
                self._db_path,
                timeout=self._busy_timeout_ms / 1000,
                isolation_level=None,
                check_same_thread=False,
            )
            try:
                # FULL: a turn that `conversation.add` acknowledged must survive a power loss, because
                # the outbox forgets it once acknowledged.
                conn.execute("PRAGMA synchronous = FULL")
                conn.execute("PRAGMA foreign_keys = ON")
                conn.execute("PRAGMA secure_delete = ON")
            except sqlite3.Error:
                conn.close()
                raise
        return conn

    @contextmanager
    def connection(self) -> Iterator[sqlite3.Connection]:
        conn = self._acquire()
        try:
            yield conn
        finally:
            self._release(conn)

    def _acquire(self) -> sqlite3.Connection:
        with self._available:
            while True:
                if self._closed:
                    raise BackendUnavailable(f"local memory store {self._db_path} is closed")
                if self._idle:
                    return self._idle.pop()
                if self._open < self._max_size:
                    self._open += 1
                    break
                self._available.wait()
        try:
            return self._connect()
        except BaseException:
            with self._available:
                self._open -= 1
                self._available.notify()
            raise

    def _release(self, conn: sqlite3.Connection) -> None:
        if conn.in_transaction:
            # Only reachable after an error mid-transaction; never hand out a half-done one.
            try:
                conn.rollback()
            except sqlite3.Error:
                conn.close()
                with self._available:
                    self._open -= 1
                    self._available.notify()
                return
        with self._available:
            if self._closed:
                conn.close()
                self._open -= 1
            else:
                self._idle.append(conn)
            self._available.notify()

    def close(self) -> None:
        """Close idle connections now and busy ones when they are given back."""
        with self._available:
            self._closed = True
            idle, self._idle = self._idle, []
            self._open -= len(idle)
            self._available.notify_all()
        for conn in idle:
            conn.close()
