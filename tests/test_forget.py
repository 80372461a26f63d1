"""Forget: preview redacted, choose, confirm, delete exactly what was chosen, report truthfully."""

from __future__ import annotations

from collections.abc import Sequence

from fake_backend import FakeBackend, mem, turn
from flow_driver import Step
from flow_driver import drive as drive_flow
from pi_memory_bridge.backends.base import BackendUnavailable, DeleteReport
from pi_memory_bridge.commands.forget import ALL, CANCEL, CHOOSE, forget_flow
from pi_memory_bridge.operations.forget import ForgetDeps
from pi_memory_bridge.outbox.delivery import PendingMatch

SECRET = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


class DeletingBackend(FakeBackend):
    async def delete_atomic(self, ids: Sequence[str]) -> DeleteReport:
        before = {m.id for m in self.atomic}
        self.atomic = [m for m in self.atomic if m.id not in ids]
        return DeleteReport(deleted=tuple(i for i in ids if i in before),
                            failed=tuple((i, "not found") for i in ids if i not in before))  # fmt: skip

    async def delete_conversation(self, ids: Sequence[str]) -> DeleteReport:
        self.turns = [t for t in self.turns if t.turn_id not in ids]
        return DeleteReport(deleted=tuple(ids))


def backend() -> DeletingBackend:
    b = DeletingBackend()
    b.atomic = [mem(f"deploy token is {SECRET}", i=1), mem("deploy on fridays is banned", i=2)]
    b.turns = [turn("how do I deploy?", "use argo", ts_ms=1_700_000_000_000)]
    return b


async def drive(deps: ForgetDeps, query: str, answers: list[object], *, has_ui: bool = True) -> list[Step]:
    return await drive_flow(lambda dialog: forget_flow(deps, query, dialog), answers, has_ui=has_ui)


async def test_preview_is_redacted_and_no_deletes_without_yes() -> None:
    b = backend()
    steps = await drive(ForgetDeps(b, ""), "deploy", [ALL, False])
    assert SECRET not in steps[0].message and "REDACTED" in steps[0].message
    assert [s.kind for s in steps] == ["select", "confirm", "done"]
    assert "nothing was deleted" in steps[-1].message
    assert len(b.atomic) == 2 and len(b.turns) == 1


async def test_cancel_and_headless_delete_nothing() -> None:
    b = backend()
    steps = await drive(ForgetDeps(b, ""), "deploy", [CANCEL])
    assert "nothing was deleted" in steps[-1].message
    steps = await drive(ForgetDeps(b, ""), "deploy", [], has_ui=False)
    assert len(steps) == 1 and "nothing was deleted" in steps[0].message
    assert "3 items" in steps[0].message
    steps = await drive(ForgetDeps(b, ""), "deploy", [None])  # a dismissed dialog is a cancel
    assert "nothing was deleted" in steps[-1].message.lower()
    assert len(b.atomic) == 2 and len(b.turns) == 1


async def test_choosing_some_deletes_exactly_those_and_reports_them() -> None:
    b = backend()
    # three candidates (L1 x2, L0 x1): keep the first, forget the second and third
    steps = await drive(ForgetDeps(b, ""), "deploy", [CHOOSE, False, True, True, True])
    report = steps[-1].message
    assert [m.content for m in b.atomic] == [f"deploy token is {SECRET}"]
    assert b.turns == []
    assert report.count("deleted ") == 2 and "FAILED" not in report
    assert steps[-1].level == "info" and not steps[-1].reload


async def test_outbox_records_are_found_and_removed() -> None:
    removed: list[str] = []

    async def search_pending(query: str) -> list[PendingMatch]:
        return [PendingMatch("turn-42", None, "user: deploy secrets / assistant: no")]

    async def remove_pending(ids: Sequence[str]) -> DeleteReport:
        removed.extend(ids)
        return DeleteReport(deleted=tuple(ids))

    b = backend()
    steps = await drive(ForgetDeps(b, "", search_pending, remove_pending), "deploy", [ALL, True])
    assert removed == ["turn-42"]
    assert "[outbox" in steps[-1].message


async def test_search_failure_is_reported_not_hidden_as_nothing_matched() -> None:
    b = backend()
    b.fail = {
        "search_atomic": BackendUnavailable("db locked"),
        "search_conversation": BackendUnavailable("x"),
    }
    steps = await drive(ForgetDeps(b, ""), "deploy", [])
    assert steps[-1].level == "error" and "L1 search failed: db locked" in steps[-1].message
    assert "Nothing in memory matches" not in steps[-1].message


async def test_delete_failure_is_reported_per_item() -> None:
    class Failing(DeletingBackend):
        async def delete_conversation(self, ids: Sequence[str]) -> DeleteReport:
            raise BackendUnavailable("store is read-only")

    b = Failing()
    b.atomic, b.turns = backend().atomic, backend().turns
    steps = await drive(ForgetDeps(b, ""), "deploy", [ALL, True])
    assert "FAILED" in steps[-1].message and "read-only" in steps[-1].message
    assert steps[-1].message.count("deleted ") == 2
    assert steps[-1].level == "error"


async def test_empty_query_and_no_match() -> None:
    assert "usage" in (await drive(ForgetDeps(backend(), ""), "   ", []))[-1].message
    assert "Nothing in memory matches" in (await drive(ForgetDeps(FakeBackend(), ""), "zzz", []))[-1].message
