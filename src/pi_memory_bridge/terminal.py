"""Terminal commands that work on the store directly (no Pi, no sidecar needed).

Interactive commands reuse the same dialog flows as Pi (`commands.flows`), rendered as prompts.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable
from pathlib import Path

from pi_memory_bridge.backends.base import BackendError, MemoryBackend
from pi_memory_bridge.backends.factory import open_backend
from pi_memory_bridge.commands.flows import Answer, Flow, FlowRegistry
from pi_memory_bridge.commands.forget import ForgetDeps, forget_flow
from pi_memory_bridge.commands.outbox_ops import OutboxDeps, outbox_flow
from pi_memory_bridge.config import LoadedConfig, data_dir, default_agent_dir, load_config
from pi_memory_bridge.delivery import CaptureDelivery
from pi_memory_bridge.outbox import DeliveryWorker, Outbox
from pi_memory_bridge.protocol import CommandStep
from pi_memory_bridge.redact import redact_text

Ask = Callable[[str], str]


def _load() -> tuple[LoadedConfig, Path]:
    agent_dir = default_agent_dir(os.environ)
    return load_config(agent_dir=agent_dir, cwd=Path.cwd(), project_trusted=False, env=os.environ), agent_dir


def _answer(step: CommandStep, ask: Ask) -> Answer:
    if step.message and step.kind != "confirm":
        print(step.message)
    if step.kind == "confirm":
        if step.message:
            print(step.message)
        return ask(f"{step.title} [y/N] ").strip().lower() in ("y", "yes")
    if step.kind == "select":
        for i, option in enumerate(step.options, 1):
            print(f"  {i}. {option}")
        raw = ask(f"{step.title} (number, empty to cancel): ").strip()
        if raw.isdigit() and 1 <= int(raw) <= len(step.options):
            return step.options[int(raw) - 1]
        return None
    raw = ask(f"{step.title}: ").strip()
    return raw or None


async def run_flow(flow: Flow, ask: Ask) -> CommandStep:
    flows = FlowRegistry()
    step = await flows.start(flow)
    while step.kind != "done":
        step = await flows.answer(step.flow_id or "", _answer(step, ask))
    print(step.message)
    return step


async def _with_backend(action: Callable[[MemoryBackend], object]) -> int:
    loaded, agent_dir = _load()
    try:
        backend = await asyncio.to_thread(open_backend, loaded, agent_dir)
    except (BackendError, OSError) as exc:
        print(f"memory store unavailable: {redact_text(str(exc)).text}", file=sys.stderr)
        return 1
    try:
        result = action(backend)
        if asyncio.iscoroutine(result):
            result = await result
        return result if isinstance(result, int) else 0
    finally:
        await backend.close()


async def _search(backend: MemoryBackend, query: str, limit: int) -> int:
    atomic = await backend.search_atomic(query, limit)
    turns = await backend.search_conversation(query, limit)
    print(f"L1 ({len(atomic)}):")
    for m in atomic:
        print(f"  [{m.type}] {redact_text(m.content).text}")
    print(f"L0 ({len(turns)}):")
    for t in turns:
        when = t.created_at.strftime("%Y-%m-%d %H:%M")
        print(f"  [{when}] user: {redact_text(t.user_text).text[:200]}")
        print(f"  {' ' * (len(when) + 2)} assistant: {redact_text(t.assistant_text).text[:200]}")
    return 0


def search(query: str, limit: int) -> int:
    try:
        return asyncio.run(_with_backend(lambda b: _search(b, query, limit)))
    except BackendError as exc:
        print(f"search failed: {redact_text(str(exc)).text}", file=sys.stderr)
        return 1


async def _forget(backend: MemoryBackend, query: str, ask: Ask) -> int:
    _loaded, agent_dir = _load()
    delivery: CaptureDelivery | None = None
    try:
        delivery = CaptureDelivery(await asyncio.to_thread(Outbox.open, data_dir(agent_dir)), lambda _c: None)
    except (BackendError, OSError) as exc:
        print(f"the outbox is unavailable, searching the store only: {redact_text(str(exc)).text}")
    try:
        deps = ForgetDeps(
            backend,
            "",
            search_pending=delivery.search_pending if delivery else None,
            remove_pending=(lambda ids: delivery.remove_pending(ids, backend)) if delivery else None,
        )
        step = await run_flow(forget_flow(deps, query, has_ui=True), ask)
    finally:
        if delivery is not None:
            await delivery.close()
    return 0 if step.level != "error" else 1


def forget(query: str, ask: Ask = input) -> int:
    return asyncio.run(_with_backend(lambda b: _forget(b, query, ask)))


async def _outbox(args: str, ask: Ask) -> int:
    loaded, agent_dir = _load()
    try:
        box = await asyncio.to_thread(Outbox.open, data_dir(agent_dir))
    except (BackendError, OSError) as exc:
        print(f"the outbox is unavailable: {redact_text(str(exc)).text}", file=sys.stderr)
        return 1
    backend: MemoryBackend | None = None
    problem = ""
    try:
        backend = await asyncio.to_thread(open_backend, loaded, agent_dir)
    except (BackendError, OSError) as exc:
        problem = f"the memory store is unavailable: {redact_text(str(exc)).text}"
    try:
        flush = DeliveryWorker(box, backend).flush if backend is not None else None
        step = await run_flow(outbox_flow(OutboxDeps(box, problem, flush), args, has_ui=True), ask)
        return 0 if step.level == "info" else 1
    finally:
        if backend is not None:
            await backend.close()
        await asyncio.to_thread(box.close)


def outbox(args: str, ask: Ask = input) -> int:
    return asyncio.run(_outbox(args, ask))


def setup(ask: Ask = input) -> int:
    from pi_memory_bridge.commands.setup import SetupDeps, setup_flow

    deps = SetupDeps(agent_dir=default_agent_dir(os.environ), cwd=Path.cwd(), env=os.environ)
    step = asyncio.run(run_flow(setup_flow(deps, has_ui=True), ask))
    return 0 if step.level == "info" else 1


def import_sessions(since: str | None, session: str | None, yes: bool, ask: Ask = input) -> int:
    from pi_memory_bridge.catchup.terminal_import import import_sessions as run

    return run(since, session, yes, ask)
