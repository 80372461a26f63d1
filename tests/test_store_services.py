"""A store's work belongs to the store (engine.store_services), not to one Pi's engine: engines
sharing it come and go while the backend, its outbox and its catch-up stay open; what is left to do
is counted, and the background sidecar's idle exit waits for it, bounded (sidecar.daemon).
Real engines on a real SQLite store; the embedding model is off, or held loading."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from fake_backend import FakeBackend
from learning_helpers import ScriptedModel, extract, turn
from pi_memory_bridge.backends.base import ConversationTurn
from pi_memory_bridge.backends.local import LocalBackend
from pi_memory_bridge.backends.local.learning.memories import LearnedMemories
from pi_memory_bridge.config import global_config_path
from pi_memory_bridge.embeddings import ModelHandle, disabled_handle
from pi_memory_bridge.embeddings.loader import LoadReport
from pi_memory_bridge.engine import backend_slot
from pi_memory_bridge.engine.backend_slot import INITIAL_OPEN_WAIT_S, BackendSlot
from pi_memory_bridge.engine.core import Engine
from pi_memory_bridge.engine.store_pool import StorePool
from pi_memory_bridge.engine.store_services import PendingWork, StoreServices
from pi_memory_bridge.sidecar.daemon import _Connections
from pi_memory_bridge.sidecar.handshake import Handshake, handshake
from pi_memory_bridge.wire import InitializeParams, RecallParams, ToolCallParams


def _handshake(tmp_path: Path, cwd: Path | None = None) -> tuple[Handshake, dict[str, str]]:
    env = {"HOME": str(tmp_path), "PI_CODING_AGENT_DIR": str(tmp_path / "agent")}
    where = cwd or tmp_path
    params = {"protocolVersion": "1.0", "client": {"name": "t", "version": "0"}, "cwd": str(where)}
    return handshake(InitializeParams.model_validate(params), env), env


@pytest.fixture(autouse=True)
def _keywords_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PI_MEMORY_BRIDGE_EMBEDDINGS", "off")


@pytest.fixture
async def services(tmp_path: Path) -> AsyncIterator[StoreServices]:
    hs, _env = _handshake(tmp_path)
    opened = await StoreServices.open(hs.loaded, hs.agent_dir)
    yield opened
    await opened.close()


async def _engine(tmp_path: Path, services: StoreServices) -> Engine:
    hs, env = _handshake(tmp_path)
    engine = await Engine.open(hs.loaded, hs.agent_dir, hs.cwd, env=env, services=services)
    await engine.settle_start()
    return engine


async def test_an_engine_leaving_a_shared_store_leaves_it_open_for_the_others(
    tmp_path: Path, services: StoreServices
) -> None:
    first = await _engine(tmp_path, services)
    second = await _engine(tmp_path, services)  # joined a store already open: told so at once
    assert first.slot is second.slot is services.slot
    assert first.learning.memories is not None and second.learning.memories is not None
    await first.shutdown()
    backend = services.slot.backend
    assert isinstance(backend, LocalBackend) and backend.store is not None
    saved = await second.tool_call(
        ToolCallParams(name="tdai_memory_save", arguments={"content": "the team deploys with Helm"})
    )
    assert not saved.is_error
    found = await second.tool_call(ToolCallParams(name="tdai_memory_search", arguments={"query": "Helm"}))
    assert found.details["count"] == 1
    await second.shutdown()
    assert services.slot.backend is backend  # still open: the services close it, no engine does


async def test_an_engine_on_services_of_its_own_closes_them(tmp_path: Path) -> None:
    hs, env = _handshake(tmp_path)
    engine = await Engine.open(hs.loaded, hs.agent_dir, hs.cwd, env=env)
    backend = engine.slot.backend
    assert isinstance(backend, LocalBackend)
    await engine.shutdown()
    with pytest.raises(Exception, match="closed"):
        await backend.conversation.list(1, 0)


async def test_the_pool_shares_a_store_between_equal_settings_only(tmp_path: Path) -> None:
    pool = StorePool()
    hs, _env = _handshake(tmp_path)
    again, _ = _handshake(tmp_path)
    other, _ = _handshake(tmp_path / "elsewhere")  # another agent dir: another store
    try:
        one = await pool.get(hs.loaded, hs.agent_dir)
        assert await pool.get(again.loaded, again.agent_dir) is one
        assert await pool.get(other.loaded, other.agent_dir) is not one
    finally:
        await pool.close()


def _turn(i: int) -> ConversationTurn:
    return ConversationTurn(
        turn_id=f"t{i}",
        memory_session_id="s",
        user_text=f"question number {i}",
        assistant_text="an answer",
        created_at=datetime(2026, 1, 1, tzinfo=UTC) + timedelta(minutes=i),
    )


async def test_rows_without_a_vector_are_pending_while_the_model_can_still_embed_them(tmp_path: Path) -> None:
    release = threading.Event()

    def slow_load() -> LoadReport:
        release.wait(30)
        raise RuntimeError("never loads in this test")

    loading = ModelHandle(slow_load)
    loading.start()
    hs, _env = _handshake(tmp_path)
    services = StoreServices(hs.loaded, hs.agent_dir, None)
    backend = LocalBackend(tmp_path / "store", embeddings=loading)
    services.slot.backend = backend
    off = LocalBackend(tmp_path / "off", embeddings=disabled_handle("off here"))
    try:
        await backend.conversation.add([_turn(i) for i in range(3)])
        work = await services.pending()
        assert work == PendingWork(turns_to_embed=3) and work.any
        assert work.describe() == "3 turns still to embed"
        await off.conversation.add([_turn(i) for i in range(3)])
        assert off.semantic is not None and off.semantic.handle.wait(10) is None  # settled: unavailable
        services.slot.backend = off  # a model that cannot load: nothing will embed them
        assert await services.pending() == PendingWork()
    finally:
        release.set()
        await backend.close()
        await off.close()


async def test_the_idle_exit_waits_while_the_stores_are_busy_then_goes() -> None:
    answers = [True, True, False]
    asked = 0

    async def busy() -> bool:
        nonlocal asked
        asked += 1
        return answers.pop(0)

    conns = _Connections(0.01, busy, busy_s=60)
    conns.arm()
    await asyncio.wait_for(conns.idle.wait(), 30)
    assert asked == 3 and not answers  # not before the third look found nothing left


async def test_the_idle_exit_waits_for_busy_stores_only_so_long() -> None:
    async def busy() -> bool:
        return True

    conns = _Connections(0.01, busy, busy_s=0.05)
    conns.arm()
    await asyncio.wait_for(conns.idle.wait(), 30)  # without the bound it would never be set


async def test_a_pi_arriving_while_the_daemon_waits_for_work_cancels_the_exit() -> None:
    looked = asyncio.Event()

    async def busy() -> bool:
        looked.set()
        return True

    conns = _Connections(0.01, busy, busy_s=60)
    conns.arm()
    await asyncio.wait_for(looked.wait(), 30)
    conns.opened()
    conns.closed()  # the idle time starts again, the work bound too
    await asyncio.sleep(0.1)
    assert not conns.idle.is_set()


async def test_a_read_only_slot_waits_for_a_slow_store_and_starts_none_of_its_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[str] = []

    class SlowStore(FakeBackend):
        def start_background(self) -> None:
            started.append("background")

    def slow_open(_loaded: object, _agent_dir: Path) -> FakeBackend:
        time.sleep(INITIAL_OPEN_WAIT_S + 0.5)  # slower than the sidecar waits at start
        return SlowStore()

    monkeypatch.setattr(backend_slot, "open_backend", slow_open)
    hs, _env = _handshake(tmp_path)

    async def nothing(_backend: object) -> None:
        started.append("on_open")

    for read_only in (True, False):
        slot = BackendSlot(
            hs.loaded,
            hs.agent_dir,
            on_open=nothing,
            on_outbox_change=lambda _c: None,
            on_backend_change=lambda: None,
            read_only=read_only,
        )
        await slot.start()
        try:
            if read_only:  # `pi-memory-bridge status`: the store as it is, and nothing started
                assert isinstance(slot.backend, SlowStore) and started == []
                assert slot.delivery is not None and slot.delivery.worker is None
            else:  # the sidecar goes on without it, and starts its work once it opened
                assert slot.backend is None
                await slot.ensure(None)
                assert started == ["background", "on_open"]
        finally:
            await slot.close()


async def _passes_reach(services: StoreServices, n: int) -> None:
    while services.catch_up is None or services.catch_up.progress.passes < n:  # noqa: ASYNC110 - a count, no event
        await asyncio.sleep(0.02)


async def test_each_engine_that_joins_gets_a_catch_up_pass_after_its_first_recall(
    tmp_path: Path, services: StoreServices
) -> None:
    first = await _engine(tmp_path, services)
    await asyncio.wait_for(_passes_reach(services, 1), 30)
    runner = services.catch_up
    second = await _engine(tmp_path, services)  # its turns may be in session files only
    await second.recall(RecallParams(pi_session_id="p2", prompt="how do we deploy billing?"))
    await asyncio.wait_for(_passes_reach(services, 2), 30)
    assert services.catch_up is runner  # one runner for the store, not one per engine
    await first.shutdown()
    await second.shutdown()


async def test_learning_on_a_model_of_its_own_finishes_its_run_after_the_pi_left(tmp_path: Path) -> None:
    path = global_config_path(tmp_path / "agent")
    path.parent.mkdir(parents=True, exist_ok=True)
    # a long idle pause: the run can only come from the Pi leaving
    path.write_text(json.dumps({"learning": {"enabled": True, "idleSeconds": 600}}), encoding="utf-8")
    hs, _env = _handshake(tmp_path)
    shared = await StoreServices.open(hs.loaded, hs.agent_dir)
    try:
        engine = await _engine(tmp_path, shared)
        model = ScriptedModel(extract(("decision", "The project ships on Fridays only.", ["t1"])))
        engine.learning.model = model  # an endpoint of its own in real use, not the Pi's model
        backend = shared.slot.backend
        assert isinstance(backend, LocalBackend)
        await backend.conversation.add([turn(1, "We only ship on Fridays.")])
        engine.learning.session_started("mem-1")
        engine.learning.turns_settled("mem-1", 1)
        assert engine.learning.can_go_on_alone
        await engine.shutdown()
        assert (await shared.pending()).learning_running  # the daemon's idle exit waits for it
        while (await shared.pending()).learning_running:  # noqa: ASYNC110 - the run, then its close
            await asyncio.sleep(0.05)
        assert [m.text for m in LearnedMemories(backend.store).active()] == [
            "The project ships on Fridays only."
        ]
        assert len(model.calls) >= 1
    finally:
        await shared.close()


async def test_turns_waiting_for_delivery_are_pending_and_an_outbox_that_cannot_count_is_no_work(
    tmp_path: Path, services: StoreServices, caplog: pytest.LogCaptureFixture
) -> None:
    import sqlite3

    delivery = services.slot.delivery
    assert delivery is not None and delivery.worker is not None and services.slot.backend is not None
    await delivery.worker.stop()  # nothing delivers them in this test: they stay waiting
    await asyncio.to_thread(delivery.outbox.enqueue, [_turn(1), _turn(2)])
    work = await services.pending()
    assert work.turns_to_deliver == 2 and "2 turns still to deliver" in work.describe()
    other = sqlite3.connect(delivery.outbox.db_path, isolation_level=None)
    other.execute("ALTER TABLE records RENAME TO records_aside")  # damaged: it cannot be counted
    other.close()
    assert await services.pending() == PendingWork()  # the idle exit is not held up, nor crashed
    assert "counting the turns still to deliver failed" in caplog.text
