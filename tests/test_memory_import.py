"""`import_memory` when part of an export cannot be stored: each failure is named in the report,
the rest of the file is still imported, and nothing already there is overwritten."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from memorycore_fake import FAKE_API_KEY, FakeMemoryCore, Fault, fake_sdk_bindings, serve
from pi_memory_bridge.backends.local import LocalBackend
from pi_memory_bridge.backends.memorycore import MemoryCoreBackend, MemoryCoreTarget
from pi_memory_bridge.operations.memory_export import ExportFile, import_memory


def _export(**parts: Any) -> ExportFile:
    whole = {
        "format": "pi-memory-bridge-export", "version": 1, "exported_at": "2026-11-02T10:00:00+00:00",
        "backend": "local", "profile": None, "memories": [], "notes": [], "conversation": [], **parts,
    }  # fmt: skip
    return ExportFile.model_validate_json(json.dumps(whole), by_alias=True)  # as `import` reads the file


def _turn(turn_id: str, created_at: str = "2026-11-01T09:00:00+00:00") -> dict[str, str]:
    return {
        "id": turn_id,
        "session_id": "s-1",
        "user": f"question {turn_id}",
        "assistant": "answer",
        "created_at": created_at,
    }


ROOT = "memory-bridge"


@pytest.fixture
async def local(tmp_path: Path) -> AsyncIterator[LocalBackend]:
    backend = LocalBackend(tmp_path / ROOT)
    try:
        yield backend
    finally:
        await backend.close()


async def test_a_memory_the_store_refuses_is_named_and_the_others_are_saved(local: LocalBackend) -> None:
    data = _export(
        memories=[
            {"id": "m-blank", "kind": "fact", "text": "   "},
            {"id": "m-good", "kind": "fact", "text": "the deploy runs on the blue cluster"},
        ]
    )
    report = await import_memory(local, data)
    assert report.memories_added == 1
    assert [f for f in report.failures if f.startswith("memory m-blank:")], report.failures
    assert [m.content for m in await local.memories.list(10, 0)] == ["the deploy runs on the blue cluster"]


async def test_a_timestamp_that_is_not_iso_stores_no_turn_and_keeps_the_rest(local: LocalBackend) -> None:
    data = _export(
        memories=[{"id": "m-1", "kind": "fact", "text": "tabs, not spaces"}],
        conversation=[_turn("t-1"), _turn("t-2", created_at="last Tuesday")],
    )
    report = await import_memory(local, data)
    assert report.turns_added == 0 and report.memories_added == 1
    assert any("timestamp is not ISO 8601" in f for f in report.failures), report.failures
    assert "FAILED  conversation: a timestamp is not ISO 8601" in "\n".join(report.lines())
    assert await local.conversation.list(10, 0) == []  # all or none: no half of the conversation


async def test_a_note_that_cannot_be_written_is_named_and_the_other_notes_are_added(
    local: LocalBackend, tmp_path: Path
) -> None:
    (tmp_path / ROOT / "l2").mkdir(parents=True)
    (tmp_path / ROOT / "l2" / "blocked").write_text("a file where the note's folder would go")
    data = _export(
        notes=[
            {"path": "blocked/deploy.md", "content": "# Deploy"},
            {"path": "../outside.md", "content": "# Outside"},
            {"path": "style.md", "content": "# Style"},
        ]
    )
    report = await import_memory(local, data)
    assert report.notes_added == 1
    failed = [f.split(":")[0] for f in report.failures]
    assert failed == ["note blocked/deploy.md", "note ../outside.md"], report.failures
    assert [e.path for e in await local.notes.list_scenarios()] == ["style.md"]
    assert not (tmp_path / ROOT / "outside.md").exists()


async def test_an_existing_note_and_profile_are_kept_as_they_were(
    local: LocalBackend, tmp_path: Path
) -> None:
    (tmp_path / ROOT / "l2").mkdir(parents=True)
    (tmp_path / ROOT / "l2" / "style.md").write_text("# Mine")
    (tmp_path / ROOT / "profile.md").write_text("I write Go.")
    data = _export(notes=[{"path": "style.md", "content": "# Theirs"}], profile="I write Rust.")
    report = await import_memory(local, data)
    assert (report.notes_kept, report.notes_added, report.profile) == (1, 0, "kept the existing one")
    assert (await local.notes.read_scenario("style.md")).content == "# Mine"
    assert (tmp_path / ROOT / "profile.md").read_text() == "I write Go."


async def test_a_profile_that_cannot_be_read_is_a_failure_in_the_report_not_a_lost_report(
    local: LocalBackend, tmp_path: Path
) -> None:
    (tmp_path / ROOT / "profile.md").mkdir(parents=True)  # the profile's place is taken: it cannot be read
    data = _export(
        memories=[{"id": "m-1", "kind": "fact", "text": "tabs, not spaces"}], profile="I write Rust."
    )
    report = await import_memory(local, data)
    assert report.memories_added == 1  # what was imported before the profile is still reported
    assert report.profile == "not imported"
    assert [f for f in report.failures if f.startswith("profile: ")], report.failures


@pytest.fixture
def core() -> Iterator[tuple[FakeMemoryCore, str]]:
    fake = FakeMemoryCore()
    with serve(fake) as base:
        yield fake, base


@pytest.fixture
async def remote(core: tuple[FakeMemoryCore, str]) -> AsyncIterator[MemoryCoreBackend]:
    target = MemoryCoreTarget(core[1], "default", "team-t", "agt-t", "usr-t")
    backend = MemoryCoreBackend.with_keys(target, gateway_api_key=FAKE_API_KEY, sdk=fake_sdk_bindings())
    try:
        yield backend
    finally:
        await backend.close()


async def test_memorycore_says_what_it_cannot_take_and_stores_the_turns(
    core: tuple[FakeMemoryCore, str], remote: MemoryCoreBackend
) -> None:
    data = _export(
        memories=[{"id": "m-1", "kind": "fact", "text": "tabs, not spaces"}],
        notes=[{"path": "style.md", "content": "# Style"}],
        profile="I write Go.",
        conversation=[_turn("t-1")],
    )
    report = await import_memory(remote, data)
    assert report.turns_added == 1 and len(core[0].rows()) == 2
    assert report.failures == [
        "memories: the memorycore backend cannot save memories directly",
        "notes and profile: the memorycore backend keeps them on its server",
    ]
    again = await import_memory(remote, _export(conversation=[_turn("t-1")]))
    assert (again.turns_added, again.turns_known, len(core[0].rows())) == (0, 1, 2)


async def test_memorycore_refusing_the_turns_is_a_failure_in_the_report(
    core: tuple[FakeMemoryCore, str], remote: MemoryCoreBackend
) -> None:
    core[0].inject(Fault("/v3/conversation/add", "envelope", status=400, code=400, message="bad turn"))
    report = await import_memory(remote, _export(conversation=[_turn("t-1")]))
    assert report.turns_added == 0 and core[0].rows() == []
    assert [f for f in report.failures if f.startswith("conversation: ")], report.failures
