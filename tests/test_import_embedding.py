"""`pi-memory-bridge import` leaves the store searchable by meaning: what lacks a vector is
embedded there and then, with progress (`LocalBackend.embed_missing`), unless another process
holds the store's embedding lock, which then embeds it (the background sidecar). Real model and
store."""

from __future__ import annotations

import fcntl
import os
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pi_memory_bridge.backends.base import ConversationTurn
from pi_memory_bridge.backends.local import LocalBackend
from pi_memory_bridge.backends.local.backend import VECTOR_LOCK_FILENAME
from pi_memory_bridge.embeddings import ModelHandle, disabled_handle


def _turns(n: int) -> list[ConversationTurn]:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    return [
        ConversationTurn(
            turn_id=f"t{i}",
            memory_session_id="s",
            user_text=f"imported question {i} about the staging cluster",
            assistant_text=f"answer {i}",
            created_at=start + timedelta(minutes=i),
        )
        for i in range(n)
    ]


async def test_embed_missing_gives_every_row_its_vector_with_progress(
    tmp_path: Path, model_handle: ModelHandle
) -> None:
    backend = LocalBackend(tmp_path, embeddings=model_handle)  # no background worker started
    try:
        await backend.conversation.add(_turns(70))
        await backend.memories.save("The staging cluster is kestrel-west.", "fact", "user")
        seen: list[tuple[int, int]] = []
        report = backend.embed_missing(60, threading.Event(), lambda done, left: seen.append((done, left)))
        assert report is not None and report.embedded == 71 and report.left == 0 and not report.why_left
        assert [left for _, left in seen] == [71] * len(seen) and len(seen) >= 3  # batch by batch
        status = backend.semantic_status()
        assert status is not None and status.turns is not None and status.turns.done == 70
        again = backend.embed_missing(60, threading.Event(), lambda *_: None)
        assert again is not None and (again.embedded, again.left) == (0, 0)
    finally:
        await backend.close()


async def test_embed_missing_leaves_the_rows_to_the_process_that_is_embedding_them(
    tmp_path: Path, model_handle: ModelHandle
) -> None:
    backend = LocalBackend(tmp_path, embeddings=model_handle)
    fd = os.open(tmp_path / VECTOR_LOCK_FILENAME, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        await backend.conversation.add(_turns(5))
        fcntl.flock(fd, fcntl.LOCK_EX)  # the background sidecar's worker, mid-batch
        report = backend.embed_missing(60, threading.Event(), lambda *_: None)
        assert report is not None and report.elsewhere and (report.embedded, report.left) == (0, 5)
    finally:
        os.close(fd)
        await backend.close()


async def test_embed_missing_says_why_when_the_model_cannot_load(tmp_path: Path) -> None:
    backend = LocalBackend(tmp_path, embeddings=disabled_handle("turned off here"))
    try:
        await backend.conversation.add(_turns(3))
        report = backend.embed_missing(5, threading.Event(), lambda *_: None)
        assert report is not None and (report.embedded, report.left) == (0, 3)
        assert report.why_left == "turned off here" and not report.elsewhere
    finally:
        await backend.close()
    words_only = LocalBackend(tmp_path / "words")
    try:
        assert words_only.embed_missing(5, threading.Event(), lambda *_: None) is None
    finally:
        await words_only.close()
