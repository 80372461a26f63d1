"""`/tdai-memory-outbox`: status, list, flush, requeue and purge (confirmed, refused headless)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from flow_driver import drive
from pi_memory_bridge.backends.base import ConversationTurn
from pi_memory_bridge.commands.outbox_ops import OutboxDeps, outbox_flow
from pi_memory_bridge.outbox import DeliveryReport, Outbox, OutboxCounts
from pi_memory_bridge.wire import CommandStep


@pytest.fixture
def box(tmp_path: Path) -> Iterator[Outbox]:
    with Outbox.open(tmp_path) as outbox:
        now = datetime.now(UTC)
        outbox.enqueue([ConversationTurn(f"turn-{i}", "s", f"question {i}", "ok", now) for i in range(3)])
        for _ in range(3):  # make turn-0 dead the real way: three permanent rejections alone
            claim = outbox.claims.claim(limit=1, ignore_backoff=True)
            assert claim is not None
            outbox.claims.reject(claim, "400 refused", max_rejections=3, delay_s=0)
        yield outbox


async def run(deps: OutboxDeps, args: str, answers: list[object], *, has_ui: bool = True) -> CommandStep:
    steps = await drive(lambda dialog: outbox_flow(deps, args, dialog), answers, has_ui=has_ui)
    return steps[-1].raw


async def test_status_and_list(box: Outbox) -> None:
    deps = OutboxDeps(box, "", None)
    assert "2 pending, 0 in flight, 1 dead" in (await run(deps, "", [])).message
    listing = (await run(deps, "list dead", [])).message
    assert "turn-0" in listing and "400 refused" in listing and "turn-1" not in listing
    assert "usage" in (await run(deps, "list nonsense", [])).message


async def test_requeue_by_prefix_and_all(box: Outbox) -> None:
    deps = OutboxDeps(box, "", None)
    assert "requeued 1" in (await run(deps, "requeue turn-0", [])).message
    assert box.admin.counts().dead == 0
    assert "requeued 0" in (await run(deps, "requeue all", [])).message


async def test_purge_needs_a_yes_and_a_ui(box: Outbox) -> None:
    deps = OutboxDeps(box, "", None)
    assert "nothing was purged" in (await run(deps, "purge all", [], has_ui=False)).message
    assert "nothing was purged" in (await run(deps, "purge all", [False])).message
    assert box.admin.counts().dead == 1
    assert "purged 1" in (await run(deps, "purge turn-0", [True])).message
    assert box.admin.counts().dead == 0 and box.admin.counts().pending == 2


async def test_flush_reports_what_happened(box: Outbox) -> None:
    async def flush() -> DeliveryReport:
        return DeliveryReport(delivered=2, counts=OutboxCounts(dead=1))

    step = await run(OutboxDeps(box, "", flush), "flush", [])
    assert "2 delivered" in step.message and step.level == "info"
    assert (
        "cannot deliver now: store down"
        in (await run(OutboxDeps(box, "store down", None), "flush", [])).message
    )


async def test_purge_asks_with_the_count_it_will_purge_and_not_at_all_when_none(box: Outbox) -> None:
    deps = OutboxDeps(box, "", None)
    # a pending record cannot be purged: say so, ask nothing (it was "Purge 0 records?")
    steps = await drive(lambda dialog: outbox_flow(deps, "purge turn-1", dialog), [])
    assert len(steps) == 1 and "Nothing to purge" in steps[0].message
    steps = await drive(lambda dialog: outbox_flow(deps, "purge all", dialog), [False])
    assert steps[0].kind == "confirm" and steps[0].title == "Purge the only record (1 dead, 0 quarantined)?"
    steps = await drive(lambda dialog: outbox_flow(deps, "purge turn-0", dialog), [False])
    assert steps[0].title == "Purge 1 record?"
    await run(deps, "purge all", [True])
    steps = await drive(lambda dialog: outbox_flow(deps, "purge all", dialog), [])
    assert len(steps) == 1 and "no dead or quarantined records" in steps[0].message
