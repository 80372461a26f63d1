"""Forget's view of the outbox (`CaptureDelivery.search_pending`/`remove_pending`) with a real
outbox and store: a turn delivered, or being delivered, between the preview and the delete is
deleted from the store too, and where there is no store to delete it from, the report says so."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pi_memory_bridge.backends.base import ConversationTurn
from pi_memory_bridge.backends.local import LocalBackend
from pi_memory_bridge.outbox import DeliveryWorker, Outbox, RecordState
from pi_memory_bridge.outbox.delivery import CaptureDelivery

STAMP = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)


def _turn(turn_id: str, said: str) -> ConversationTurn:
    return ConversationTurn(turn_id, "s-1", said, "noted", STAMP)


@pytest.fixture
def delivery(tmp_path: Path) -> Iterator[CaptureDelivery]:
    box = Outbox.open(tmp_path / "memory-bridge")
    try:
        yield CaptureDelivery(box, lambda _counts: None)
    finally:
        box.close()


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[LocalBackend]:
    backend = LocalBackend(tmp_path / "memory-bridge")
    try:
        yield backend
    finally:
        await backend.close()


async def _stored_ids(store: LocalBackend) -> set[str]:
    return await store.conversation.stored_ids(["t-door", "t-lunch"])


async def test_pending_and_dead_records_are_found_by_words_and_removed(delivery: CaptureDelivery) -> None:
    box = delivery.outbox
    box.enqueue([_turn("t-door", "the lab door code is 4815"), _turn("t-lunch", "lunch at noon")])
    for _ in range(2):
        claim = box.claims.claim(ignore_backoff=True, limit=1)
        assert claim is not None
        box.claims.reject(claim, "400 Bad Request", max_rejections=2, delay_s=0)
    assert box.admin.counts().dead == 1  # t-door: refused for good, still kept
    found = await delivery.search_pending("door code")
    assert [(m.id, m.user_text) for m in found] == [("t-door", "the lab door code is 4815")]
    report = await delivery.remove_pending(["t-door"], None)
    assert report.deleted == ("t-door",) and report.failed == ()
    assert [e.id for e in box.admin.list_entries()] == ["t-lunch"]


async def test_a_turn_delivered_after_the_preview_is_deleted_from_the_store(
    delivery: CaptureDelivery, store: LocalBackend
) -> None:
    delivery.outbox.enqueue([_turn("t-door", "the lab door code is 4815")])
    assert [m.id for m in await delivery.search_pending("door code")] == ["t-door"]
    await DeliveryWorker(delivery.outbox, store).flush()  # delivered while the user read the preview
    assert await _stored_ids(store) == {"t-door"}
    report = await delivery.remove_pending(["t-door"], store)
    assert report.deleted == ("t-door",) and report.failed == ()
    assert await _stored_ids(store) == set()


async def test_a_turn_being_delivered_is_removed_from_the_outbox_and_the_store(
    delivery: CaptureDelivery, store: LocalBackend
) -> None:
    box = delivery.outbox
    box.enqueue([_turn("t-door", "the lab door code is 4815")])
    claim = box.claims.claim(ignore_backoff=True)
    assert claim is not None and box.admin.list_entries()[0].state is RecordState.IN_FLIGHT
    await store.conversation.add([_turn("t-door", "the lab door code is 4815")])  # the send reached it
    report = await delivery.remove_pending(["t-door"], store)
    assert report.deleted == ("t-door",)
    assert box.admin.list_entries() == [] and await _stored_ids(store) == set()


async def test_without_a_store_a_turn_no_longer_in_the_outbox_is_a_named_failure(
    delivery: CaptureDelivery, store: LocalBackend
) -> None:
    delivery.outbox.enqueue([_turn("t-door", "the lab door code is 4815")])
    await DeliveryWorker(delivery.outbox, store).flush()
    report = await delivery.remove_pending(["t-door"], None)  # the store could not be opened
    assert report.deleted == ()
    assert report.failed == (("t-door", "no longer in the outbox and no store to delete it from"),)


async def test_flush_without_a_store_is_refused(delivery: CaptureDelivery) -> None:
    with pytest.raises(RuntimeError, match="no backend to deliver to"):
        await delivery.flush()
