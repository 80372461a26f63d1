"""The background worker that gives every stored row its vector: new turns at capture, and
the rows of an existing store (backfill), newest first.

L1 memories (and the questions beside them) come before L0 turns, batch by batch: they are few
and what recall ranks first, so a store's memories are searchable by meaning within a batch or
two of the worker starting, and a memory saved during a long L0 backfill gets its vector at the
next batch, not after the whole backlog.

Delivery into the store never waits for it: `conversation.add` and `memories.save` only `notify()` it.
It embeds in small batches and, while a backlog lasts, rests as long as each batch took, so a
backfill takes at most about half of one core and recall in the same process stays fast.
Several sidecars (one per Pi session) share a store: an advisory lock file lets one of them
work on it at a time; the others retry now and then, and whoever holds the lock also embeds
the rows the others captured.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from pi_memory_bridge.backends.base import BackendError
from pi_memory_bridge.backends.local.search_activity import SearchActivity
from pi_memory_bridge.backends.local.vectors import (
    ATOMIC_VECTORS,
    QUESTION_VECTORS,
    TURN_VECTORS,
    PendingRow,
    VectorSpec,
    pending,
    piece_texts,
    store_vectors,
)

if TYPE_CHECKING:
    from pi_memory_bridge.backends.local.store import SqliteMemoryStore
    from pi_memory_bridge.embeddings import ModelHandle
    from pi_memory_bridge.embeddings.use_model import UseEncoder

log = logging.getLogger(__name__)

BATCH = 32
# Texts one batch embeds at most: BATCH short turns (the whole turn and its two sides each),
# fewer long ones (many pieces each), so that a batch of long turns takes no longer than one of
# short turns and a recall waiting for the model never waits behind a long one.
BATCH_TEXTS = 3 * BATCH
BULK_ROWS = BATCH  # a full batch: a backlog worth the tokenizer's bulk table
POLL_S = 60.0  # a look for rows nobody notified us about (another process's, or edited ones)
LOCK_RETRY_S = 5.0
MODEL_WAIT_S = 600.0
# Which rows are embedded first (see the module docstring); each batch starts again at the top.
PRIORITY = (ATOMIC_VECTORS, QUESTION_VECTORS, TURN_VECTORS)


@contextlib.contextmanager
def _exclusive(lock_path: Path) -> Iterator[bool]:
    """Whether this process holds the store's embedding lock (non-blocking)."""
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


class VectorWorker:
    def __init__(self, store: SqliteMemoryStore, handle: ModelHandle, lock_path: Path) -> None:
        self._store = store
        self._handle = handle
        self._lock_path = lock_path
        self.searches = SearchActivity()  # recall's searches (layers count them): a batch waits for them
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self.embedded = 0  # rows this process embedded
        self.last_error = ""

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="vector-worker", daemon=True)
            self._thread.start()

    def notify(self) -> None:
        self._wake.set()

    def stop(self, timeout: float = 2.0) -> None:
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        encoder = self._handle.wait(MODEL_WAIT_S)
        if encoder is None:
            return  # the handle says why; search stays keyword-only
        retry = False
        while not self._stopping.is_set():
            try:
                with _exclusive(self._lock_path) as mine:
                    if mine:
                        self.drain(encoder)
                    retry = not mine
            except (BackendError, OSError) as exc:
                self.last_error = str(exc)
                log.warning("embedding stored rows failed (retrying later): %s", exc)
                retry = True
            self._wake.wait(LOCK_RETRY_S if retry else POLL_S)
            self._wake.clear()

    def drain(self, encoder: UseEncoder) -> int:
        """Embed every row that has no vector; returns how many got one."""
        done = 0
        while not self._stopping.is_set():
            self.searches.wait_turn(self._stopping)
            started = time.perf_counter()
            stored = self.step(encoder)
            if stored is None:
                break
            done += stored
            # a backlog: rest as long as the batch took (at most ~half a core)
            self._stopping.wait(time.perf_counter() - started)
        self.embedded += done
        return done

    def drain_now(
        self, encoder: UseEncoder, stop: threading.Event, progress: Callable[[int], None]
    ) -> int | None:
        """Embed every row without a vector here and now, without resting between batches (a
        command the user waits for, such as an import); `progress` hears the count after each
        batch. None: another process holds the store's embedding lock, and embeds them itself."""
        with _exclusive(self._lock_path) as mine:
            if not mine:
                return None
            done = 0
            while not stop.is_set():
                stored = self.step(encoder)
                if stored is None:
                    break
                done += stored
                progress(done)
            self.embedded += done
            return done

    def step(self, encoder: UseEncoder) -> int | None:
        """Embed one batch of the most urgent rows without a vector (`PRIORITY`); returns how
        many got one, or None when every row has one."""
        for spec in PRIORITY:
            stored = self._batch(spec, encoder)
            if stored is not None:
                return stored
        return None

    def _batch(self, spec: VectorSpec, encoder: UseEncoder) -> int | None:
        with self._store.reading("finding rows without vectors") as conn:
            rows = pending(conn, spec, BATCH)
        if not rows:
            return None
        if len(rows) >= BULK_ROWS:
            # a backlog: the tokenizer's dict (~0.2 s to build, once; here, not in a recall) pays
            # for itself within a batch. A turn or two (what each `pi -p` leaves) is embedded on
            # the mapped table instead, a few ms per text, not 0.2 s of CPU at every start.
            encoder.prepare_bulk()
        rows, texts = _within_batch(spec, rows)
        vectors = encoder.embed(texts)
        with self._store.writing("storing vectors") as conn:
            return store_vectors(conn, spec, rows, vectors)


def _within_batch(spec: VectorSpec, rows: list[PendingRow]) -> tuple[list[PendingRow], list[str]]:
    """The first rows whose texts (`piece_texts`) fit `BATCH_TEXTS`, at least one, and those texts."""
    kept: list[PendingRow] = []
    texts: list[str] = []
    for row in rows:
        pieces = piece_texts(spec, row)
        if kept and len(texts) + len(pieces) > BATCH_TEXTS:
            break
        kept.append(row)
        texts += pieces
    return kept, texts
