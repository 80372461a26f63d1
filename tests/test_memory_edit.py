"""Editing memory in place: the local store's `memories.edit` and the shared `edit_memory` / note calls."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from pi_memory_bridge.backends.base import BackendRejected, Capability
from pi_memory_bridge.backends.local import DB_FILENAME, LocalBackend, fts
from pi_memory_bridge.backends.local.schema import ATOMIC_INDEX
from pi_memory_bridge.operations.memory_edit import edit_memory, save_profile, save_scenario

SECRET = "sk-proj-" + "Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0FeDcBa98"


@pytest.fixture
async def backend(tmp_path: Path) -> AsyncIterator[LocalBackend]:
    store = LocalBackend(tmp_path / "memory-bridge", busy_timeout_ms=300)
    yield store
    await store.close()


def _df(root: Path) -> dict[str, int]:
    with sqlite3.connect(root / DB_FILENAME) as conn:
        return dict(conn.execute("SELECT term, df FROM atomic_df").fetchall())


def _recounted_df(root: Path) -> dict[str, int]:
    with sqlite3.connect(root / DB_FILENAME) as conn:
        conn.execute("BEGIN")
        fts.recount_document_frequencies(conn, ATOMIC_INDEX)
        out = dict(conn.execute("SELECT term, df FROM atomic_df").fetchall())
        conn.execute("ROLLBACK")
    return out


async def test_edit_keeps_the_id_and_moves_the_index(backend: LocalBackend) -> None:
    saved = await backend.memories.save("prefers tabs for indentation", "preference", "user")
    await backend.memories.save("deploys on fridays are forbidden", "constraint", "user")
    result = await backend.memories.edit(saved.id, "prefers spaces, four of them", "preference")
    assert result.id == saved.id and result.changed
    assert [m.id for m in await backend.memories.search("spaces", 5)] == [saved.id]
    assert await backend.memories.search("tabs", 5) == []
    (hit,) = await backend.memories.search("four", 5)
    assert hit.content == "prefers spaces, four of them" and hit.updated_at >= hit.created_at
    assert _df(backend.root) == _recounted_df(backend.root)  # document counts stayed exact


async def test_edit_changes_the_kind_and_reports_unchanged(backend: LocalBackend) -> None:
    saved = await backend.memories.save("always run the linter", "preference", "user")
    assert (await backend.memories.edit(saved.id, "always run the linter", "instruction")).changed
    (hit,) = await backend.memories.search("linter", 5)
    assert hit.type == "instruction"
    assert not (await backend.memories.edit(saved.id, "  always run the linter ", "instruction")).changed


async def test_edit_refuses_a_duplicate_an_unknown_id_and_bad_values(backend: LocalBackend) -> None:
    a = await backend.memories.save("uses postgres", "fact", "user")
    await backend.memories.save("uses mysql", "fact", "user")
    with pytest.raises(BackendRejected, match="already says this"):
        await backend.memories.edit(a.id, "Uses MySQL.", "fact")
    with pytest.raises(BackendRejected, match="no memory"):
        await backend.memories.edit("at-nope", "something", "fact")
    with pytest.raises(BackendRejected, match="unknown atomic memory type"):
        await backend.memories.edit(a.id, "uses sqlite", "whim")
    assert [m.content for m in await backend.memories.search("postgres", 5)] == ["uses postgres"]


async def test_the_old_text_leaves_no_trace_in_the_file(backend: LocalBackend) -> None:
    def raw() -> bytes:
        return b"".join(p.read_bytes() for p in backend.root.glob(f"{DB_FILENAME}*"))

    for n in range(30):  # neighbours on the same pages
        await backend.memories.save(f"filler memory number {n} about gardening", "fact", "user")
    saved = await backend.memories.save("my locker code is quetzalcoatl7781", "fact", "user")
    assert b"quetzalcoatl7781" in raw()
    await backend.memories.edit(saved.id, "my locker code is private", "fact")
    assert b"quetzalcoatl7781" not in raw()


async def test_edit_memory_redacts_and_reports_like_forget(backend: LocalBackend) -> None:
    saved = await backend.memories.save("the staging key lives in the vault", "fact", "user")
    report = await edit_memory(backend, saved.id, f"the staging key is {SECRET}", "fact")
    assert report.ok and report.changed and report.redactions == 1
    assert report.line.startswith("edited") and SECRET not in report.line and "redacted" in report.line
    (hit,) = await backend.memories.search("staging", 5)
    assert SECRET not in hit.content and "REDACTED" in hit.content


async def test_edit_memory_failures_are_report_lines_not_exceptions(backend: LocalBackend) -> None:
    saved = await backend.memories.save("likes short answers", "preference", "user")
    too_short = await edit_memory(backend, saved.id, "no", "preference")
    assert not too_short.ok and too_short.line.startswith("FAILED") and "content" in too_short.line
    gone = await edit_memory(backend, "at-missing", "likes long answers", "preference")
    assert not gone.ok and "no memory" in gone.line
    bad_kind = await edit_memory(backend, saved.id, "likes long answers", "mood")
    assert not bad_kind.ok and "type" in bad_kind.line


async def test_a_backend_without_edit_gets_a_clear_refusal(backend: LocalBackend) -> None:
    saved = await backend.memories.save("likes short answers", "preference", "user")
    backend.capabilities = frozenset(backend.capabilities - {Capability.L1_EDIT})
    report = await edit_memory(backend, saved.id, "likes long answers", "preference")
    assert not report.ok and "cannot edit" in report.line


async def test_notes_and_profile_are_written_redacted(backend: LocalBackend) -> None:
    note = await save_scenario(backend, "proj/conventions.md", f"# Conventions\ntoken {SECRET}\n")
    assert note.ok and note.redactions == 1 and "[L2 proj/conventions.md]" in note.line
    text = (await backend.notes.read_scenario("proj/conventions.md")).content
    assert SECRET not in text and text.startswith("# Conventions")
    escape = await save_scenario(backend, "../outside.md", "x")
    assert not escape.ok and "escapes" in escape.line
    profile = await save_profile(backend, "Backend engineer, Go and Postgres.\r\n")
    assert profile.ok
    read = await backend.notes.read_profile()
    assert read is not None and read.content == "Backend engineer, Go and Postgres.\n"
