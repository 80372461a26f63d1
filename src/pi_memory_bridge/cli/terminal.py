"""Terminal commands that work on the store directly (no Pi, no sidecar needed).

Interactive commands run the same flows as Pi (`commands.dialog`), asked as prompts: numbered
choices, `[y/N]` confirmations (No unless you type yes), and an empty answer as a cancel; end of
input stops the command (one line, exit 1).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from pi_memory_bridge.backends.base import BackendError, MemoryBackend
from pi_memory_bridge.backends.factory import open_backend
from pi_memory_bridge.commands.forget import forget_flow
from pi_memory_bridge.commands.outbox_ops import OutboxDeps, outbox_flow
from pi_memory_bridge.config import LoadedConfig, data_dir, default_agent_dir, load_config
from pi_memory_bridge.operations.forget import ForgetDeps
from pi_memory_bridge.outbox import DeliveryWorker, Outbox
from pi_memory_bridge.outbox.delivery import CaptureDelivery
from pi_memory_bridge.recall.trace_log import open_trace_log
from pi_memory_bridge.redact import redact_text
from pi_memory_bridge.tools.search_report import search_report
from pi_memory_bridge.vocabulary.dialog import Cancelled, Flow, Outcome

Ask = Callable[[str], str]


def _load() -> tuple[LoadedConfig, Path]:
    agent_dir = default_agent_dir(os.environ)
    return load_config(agent_dir=agent_dir, cwd=Path.cwd(), project_trusted=False, env=os.environ), agent_dir


class TerminalDialog:
    def __init__(self, ask: Ask, *, has_ui: bool = True) -> None:
        self._ask = ask
        self._has_ui = has_ui  # False when stdin is not a terminal: a flow then only shows

    @property
    def has_ui(self) -> bool:
        return self._has_ui

    def _line(self, prompt: str) -> str:
        # end of input is not an answer: it ends the command with one line (`cli._main`)
        return self._ask(prompt).strip()

    async def confirm(self, title: str, message: str = "") -> bool:
        if message:
            print(message)
        return self._line(f"{title} [y/N] ").lower() in ("y", "yes")

    async def select(self, title: str, options: Sequence[str], message: str = "") -> str:
        if message:
            print(message)
        for i, option in enumerate(options, 1):
            print(f"  {i}. {option}")
        raw = self._line(f"{title} (number, empty to cancel): ")
        if raw.isdigit() and 1 <= int(raw) <= len(options):
            return options[int(raw) - 1]
        raise Cancelled

    async def input(self, title: str, message: str = "", placeholder: str = "") -> str:
        if message:
            print(message)
        raw = self._line(f"{title}: ")
        if not raw:
            raise Cancelled
        return raw

    async def editor(self, title: str, prefill: str = "") -> str:
        print(f"Now: {prefill}")
        raw = self._line(f"{title} (the new text on one line, empty to cancel): ")
        if not raw:
            raise Cancelled
        return raw


async def run_flow(flow: Flow, ask: Ask, *, has_ui: bool = True) -> Outcome:
    try:
        outcome = await flow(TerminalDialog(ask, has_ui=has_ui))
    except Cancelled:
        outcome = Outcome("Cancelled: nothing was changed.", "warning")
    print(outcome.message)
    return outcome


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


async def _search(backend: MemoryBackend, query: str, limit: int, as_json: bool = False) -> int:
    atomic = await backend.memories.search(query, limit)
    turns = await backend.conversation.search(query, limit)
    if as_json:
        print(json.dumps(search_report(backend, query, atomic, turns), ensure_ascii=False, indent=1))
        return 0
    print(f"L1 ({len(atomic)}):")
    for m in atomic:
        print(f"  [{m.type}] {redact_text(m.content).text}")
    print(f"L0 ({len(turns)}):")
    for t in turns:
        when = t.created_at.strftime("%Y-%m-%d %H:%M")
        print(f"  [{when}] user: {redact_text(t.user_text).text[:200]}")
        print(f"  {' ' * (len(when) + 2)} assistant: {redact_text(t.assistant_text).text[:200]}")
    return 0


def search(query: str, limit: int, as_json: bool = False) -> int:
    try:
        return asyncio.run(_with_backend(lambda b: _search(b, query, limit, as_json)))
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
    traces = await open_trace_log(data_dir(agent_dir))  # what they kept of forgotten items goes too
    try:
        deps = ForgetDeps(
            backend,
            "",
            search_pending=delivery.search_pending if delivery else None,
            remove_pending=(lambda ids: delivery.remove_pending(ids, backend)) if delivery else None,
            forgotten=traces.scrub_forgotten if traces is not None else None,
        )
        step = await run_flow(lambda dialog: forget_flow(deps, query, dialog), ask)
    finally:
        if traces is not None:
            traces.close()
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
        deps = OutboxDeps(box, problem, flush)
        step = await run_flow(lambda dialog: outbox_flow(deps, args, dialog), ask)
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
    step = asyncio.run(run_flow(lambda dialog: setup_flow(deps, dialog), ask))
    return 0 if step.level == "info" else 1


def redact_rescan() -> int:
    """`pi-memory-bridge redact --rescan`: apply the current rules to everything stored, now."""
    from pi_memory_bridge.rescan import rescan

    _loaded, agent_dir = _load()
    try:
        report = rescan(data_dir(agent_dir))
    except (BackendError, OSError) as exc:
        print(f"re-scan failed: {redact_text(str(exc)).text}", file=sys.stderr)
        return 1
    print(report.render())
    return 1 if report.problems else 0
