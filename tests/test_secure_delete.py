"""Forgotten or purged text leaves no trace in the database files, whatever SQLite's build default.

This Python's SQLite is compiled with SQLITE_SECURE_DELETE (on by default) and the library cannot
be swapped in-process, so each test forces the default off the only way there is: every
connection opened through `sqlite3.connect` first gets `PRAGMA secure_delete = OFF`, as on a
build without that option. The open path must turn it on again, and keep it on.
"""

from __future__ import annotations

import asyncio
import secrets
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from pi_memory_bridge.backends.base import ConversationTurn
from pi_memory_bridge.backends.local import LocalBackend
from pi_memory_bridge.outbox import Outbox

_REAL_CONNECT: Callable[..., sqlite3.Connection] = sqlite3.connect


def _connect_with_default_off(*args: Any, **kwargs: Any) -> sqlite3.Connection:
    conn = _REAL_CONNECT(*args, **kwargs)
    conn.execute("PRAGMA secure_delete = OFF")
    return conn


@pytest.fixture(autouse=True)
def secure_delete_default_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite3, "connect", _connect_with_default_off)
    probe = sqlite3.connect(":memory:")
    assert probe.execute("PRAGMA secure_delete").fetchone()[0] == 0
    probe.close()


def _raw(db: Path) -> bytes:
    return b"".join(p.read_bytes() for p in (db, db.with_name(db.name + "-wal")) if p.exists())


def _turn(turn_id: str, text: str) -> ConversationTurn:
    return ConversationTurn(
        turn_id=turn_id,
        memory_session_id="s",
        user_text=text,
        assistant_text="ok",
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
    )


def test_outbox_remove_and_purge_leave_no_turn_text_in_the_file(tmp_path: Path) -> None:
    forgotten = f"forgotten-{secrets.token_hex(8)}"
    purged = f"purged-{secrets.token_hex(8)}"
    box = Outbox.open(tmp_path)
    try:
        assert box._file._conn is not None
        assert box._file._conn.execute("PRAGMA secure_delete").fetchone()[0] == 1
        box.enqueue([_turn("a", forgotten), _turn("b", purged), _turn("c", "kept text")])
        assert [e.id for e in box.admin.remove(ids=["a"])] == ["a"]
        for _ in range(2):  # "b" is rejected for good, twice, and goes dead
            claim = box.claims.claim(limit=1, ignore_backoff=True)
            assert claim is not None and claim.ids == ("b",)
            dead = box.claims.reject(claim, "400 bad request", max_rejections=2, delay_s=0)
        assert dead == ("b",)
        assert box.admin.purge_dead(["b"]) == ("b",)
        raw = _raw(tmp_path / "outbox.sqlite3")
        assert forgotten.encode() not in raw
        assert purged.encode() not in raw
        box.close()
        raw = _raw(tmp_path / "outbox.sqlite3")
        assert forgotten.encode() not in raw and purged.encode() not in raw
        assert b"kept text" in raw
    finally:
        box.close()


def test_every_store_connection_deletes_securely_before_and_after_a_forget(tmp_path: Path) -> None:
    marker = f"zebracorn-{secrets.token_hex(8)}"
    backend = LocalBackend(tmp_path)
    try:
        asyncio.run(backend.conversation.add([_turn("t1", f"remember {marker}"), _turn("t2", "other text")]))
        saved = backend.store.memories.save(f"fact about {marker}", "fact", "user")
        assert asyncio.run(backend.conversation.delete(["t1"])).deleted == ("t1",)
        assert asyncio.run(backend.memories.delete([saved.id])).deleted == (saved.id,)
        raw = _raw(tmp_path / "memory.sqlite3")
        assert marker.encode() not in raw
        # the pooled connections stay in secure-delete mode after the forget
        pool = backend.store._pool
        for _ in range(3):
            with pool.connection() as conn:
                assert conn.execute("PRAGMA secure_delete").fetchone()[0] == 1
    finally:
        asyncio.run(backend.close())
    assert marker.encode() not in _raw(tmp_path / "memory.sqlite3")
