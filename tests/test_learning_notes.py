"""The learned profile and project notes: a digest of active memories that never overwrites the
user's own files or their edits."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

from learning_helpers import T0
from pi_memory_bridge.backends.local import LocalBackend
from pi_memory_bridge.backends.local.learning.learned_rows import JobOp, JobRecord, new_job_id
from pi_memory_bridge.backends.local.learning.memories import LearnedMemories
from pi_memory_bridge.learning.notes import MAX_PROFILE_CHARS, PROFILE_FILENAME, write_generated

PROJECT = "/work/shop"


@pytest.fixture
async def backend(tmp_path: Path) -> AsyncIterator[LocalBackend]:
    store = LocalBackend(tmp_path / "memory-bridge")
    yield store
    await store.close()


def _learn(backend: LocalBackend, *ops: tuple[str, str, str | None]) -> str:
    job = new_job_id()
    record = JobRecord(
        job,
        "test",
        0,
        0,
        (),
        tuple(
            JobOp("add", kind, text, observed_at=T0 + timedelta(minutes=i), project=project)
            for i, (kind, text, project) in enumerate(ops)
        ),
    )
    LearnedMemories(backend.store).writer.apply_job(record)
    return job


def _generate(backend: LocalBackend) -> tuple[tuple[str, ...], tuple[str, ...]]:
    report = write_generated(LearnedMemories(backend.store), backend.note_files, backend.root)
    return report.written, report.kept


async def test_the_profile_and_project_notes_hold_only_active_memories(backend: LocalBackend) -> None:
    _learn(
        backend,
        ("preference", "The user wants answers in Chinese.", None),
        ("fact", "The user is a backend engineer.", None),
        ("decision", "The shop moved its database from MySQL to PostgreSQL.", PROJECT),
        ("pitfall", "Migrations need lock_timeout or they lock the users table.", PROJECT),
    )
    written, kept = _generate(backend)
    assert kept == () and "profile" in written and any(w.startswith("l2/learned/shop-") for w in written)
    profile = (backend.root / PROFILE_FILENAME).read_text(encoding="utf-8")
    assert "answers in Chinese" in profile and "backend engineer" in profile
    assert "PostgreSQL" not in profile  # project memories go to the project's note
    [entry] = await backend.notes.list_scenarios()
    assert entry.path.startswith("learned/shop-") and "PostgreSQL" in entry.summary
    note = await backend.notes.read_scenario(entry.path)
    assert "## Decisions" in note.content and "## Pitfalls" in note.content
    assert _generate(backend) == ((), ())  # nothing changed: nothing rewritten


async def test_the_users_profile_comes_first_and_wins(backend: LocalBackend) -> None:
    backend.notes.write_profile("# Me\nI answer in English only.\n")
    _learn(backend, ("preference", "The user wants answers in Chinese.", None))
    _generate(backend)
    profile = await backend.notes.read_profile()
    assert profile is not None
    own, learned = profile.content.index("English only"), profile.content.index("answers in Chinese")
    assert own < learned and "that one holds" in profile.content
    assert "sha256=" not in profile.content
    assert (backend.root / "profile.md").read_text(encoding="utf-8") == "# Me\nI answer in English only.\n"


async def test_a_hand_edited_generated_file_is_never_overwritten(backend: LocalBackend) -> None:
    _learn(backend, ("preference", "The user wants answers in Chinese.", None))
    _generate(backend)
    path = backend.root / PROFILE_FILENAME
    path.write_text(path.read_text(encoding="utf-8") + "- My own line.\n", encoding="utf-8")
    _learn(backend, ("fact", "The user is a backend engineer.", None))
    written, kept = _generate(backend)
    assert kept == ("profile",) and "profile" not in written
    assert "My own line." in path.read_text(encoding="utf-8")
    assert "backend engineer" not in path.read_text(encoding="utf-8")


async def test_the_profile_stays_within_its_size(backend: LocalBackend) -> None:
    _learn(backend, *(("preference", f"The user prefers option number {i} of a long list of them.", None)
                      for i in range(200)))  # fmt: skip
    _generate(backend)
    text = (backend.root / PROFILE_FILENAME).read_text(encoding="utf-8")
    body = text.split("\n", 1)[1]
    assert len(body) <= MAX_PROFILE_CHARS
    assert "number 199" in body  # the newest first


async def test_undo_of_the_only_job_removes_the_generated_files(backend: LocalBackend) -> None:
    job = _learn(
        backend, ("preference", "The user wants answers in Chinese.", None), ("fact", "X uses Y.", PROJECT)
    )
    _generate(backend)
    LearnedMemories(backend.store).ledger.undo_job(job)
    written, _ = _generate(backend)
    assert not (backend.root / PROFILE_FILENAME).exists() and await backend.notes.list_scenarios() == []
    assert "profile" in written
