"""`pi-memory-bridge import` in a terminal: the import flow, run inline with progress on stderr.

The turns go through the shared outbox like any capture, then are delivered before the command
ends (a Pi session's sidecar delivers whatever is left, e.g. when the store is busy). Then what
the store holds without a vector is embedded, with progress, so that the import is searchable by
meaning when the command ends; when the background sidecar is embedding the store already, or
the model cannot load, that sidecar does it (status says how many are left).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from pi_memory_bridge.backends.base import BackendError, ConversationTurn, MemoryBackend, SearchesByMeaning
from pi_memory_bridge.backends.factory import open_backend
from pi_memory_bridge.catchup.importer import ImportPlan, ImportScope, plan_import, run_import
from pi_memory_bridge.catchup.state import CatchUpState, StateError
from pi_memory_bridge.commands.import_flow import (
    USAGE,
    ImportDeps,
    ImportOutcome,
    ImportRequest,
    import_flow,
    parse_since,
)
from pi_memory_bridge.config import data_dir, default_agent_dir, load_config
from pi_memory_bridge.engine.catch_up_service import known_ids_via
from pi_memory_bridge.outbox import DeliveryWorker, Outbox
from pi_memory_bridge.plural import counted
from pi_memory_bridge.redact import redact_text
from pi_memory_bridge.vocabulary.dialog import Level

Ask = Callable[[str], str]

# How long an import waits for the embedding model (a cold cache on a loaded machine)
MODEL_WAIT_S = 120.0


def _request(since: str | None, session: str | None, yes: bool) -> ImportRequest | str:
    since_ms = None
    if since is not None:
        try:
            since_ms = parse_since(since)
        except ValueError:
            return f"--since {since!r} is not a date such as 2026-01-31 or 2026-01-31T09:00"
    path = Path(session).expanduser().absolute() if session is not None else None
    return ImportRequest(ImportScope(since_ms, path), yes)


async def _run(request: ImportRequest, ask: Ask, interactive: bool) -> int:
    from pi_memory_bridge.cli.terminal import run_flow

    env = os.environ
    agent_dir = default_agent_dir(env)
    loaded = load_config(agent_dir=agent_dir, cwd=Path.cwd(), project_trusted=False, env=env)
    root = data_dir(agent_dir)
    if not (loaded.config.enabled and loaded.config.capture.enabled):
        print("cannot import: capture is turned off in the memory-bridge config", file=sys.stderr)
        return 1
    try:
        box = await asyncio.to_thread(Outbox.open, root)
    except (BackendError, OSError) as exc:
        print(f"cannot import: the outbox is unavailable: {redact_text(str(exc)).text}", file=sys.stderr)
        return 1
    backend: MemoryBackend | None = None
    try:
        backend = await asyncio.to_thread(open_backend, loaded, agent_dir)
    except (BackendError, OSError) as exc:
        print(f"the memory store is unavailable; turns stay queued: {redact_text(str(exc)).text}")
    state: CatchUpState | None = None
    try:
        state = await asyncio.to_thread(CatchUpState.open, root)
    except StateError as exc:
        print(f"an interrupted import could not resume: {exc}", file=sys.stderr)
    known = known_ids_via(box, lambda: backend)

    async def plan(scope: ImportScope) -> ImportPlan:
        return await plan_import(agent_dir, scope, known, state)

    async def submit(turns: Sequence[ConversationTurn]) -> int:
        return await asyncio.to_thread(box.enqueue, list(turns), possibly_sent=True)

    async def progress(files_done: int, files: int, queued: int) -> None:
        print(
            f"import: {files_done}/{counted(files, 'session')}, {counted(queued, 'turn')} queued",
            file=sys.stderr,
            flush=True,
        )

    async def run(planned: ImportPlan) -> ImportOutcome:
        result = await run_import(planned, state=state, known_ids=known, submit=submit, progress=progress)
        message = f"imported {counted(result.queued, 'turn')} from {counted(result.files_done, 'session')}"
        level: Level = "info"
        if result.errors:
            message += f"; stopped early (run it again to resume): {redact_text(result.errors[0]).text}"
            level = "warning"
        if backend is not None and result.queued:
            report = await DeliveryWorker(box, backend).flush()
            message += f"; {report.delivered + report.already_stored} stored"
            if report.counts.waiting:
                message += f", {report.counts.waiting} still queued (a Pi session delivers them)"
            message += await _embed(backend)
        return ImportOutcome(message, level)

    try:
        deps = ImportDeps("", plan, run)
        step = await run_flow(lambda dialog: import_flow(deps, request, dialog), ask, has_ui=interactive)
    finally:
        if backend is not None:
            await backend.close()
        if state is not None:
            await asyncio.to_thread(state.close)
        await asyncio.to_thread(box.close)
    return 0 if step.level == "info" else 1


async def _embed(backend: MemoryBackend) -> str:
    """Embed what the store holds without a vector, with progress on stderr; the words that end
    the import's summary ("" for a store without search by meaning)."""
    if not isinstance(backend, SearchesByMeaning):
        return ""
    stop = threading.Event()  # Ctrl-C: the batch in hand is stored, the rest is the sidecar's

    def progress(done: int, left: int) -> None:
        print(f"embedding: {min(done, left)}/{counted(left, 'row')}", file=sys.stderr, flush=True)

    try:
        report = await asyncio.to_thread(backend.embed_missing, MODEL_WAIT_S, stop, progress)
    except BackendError as exc:
        return f"; embedding failed, the background sidecar retries: {redact_text(str(exc)).text}"
    finally:
        stop.set()
    if report is None or not (report.embedded or report.left):
        return ""
    if not report.left:
        return f"; {report.embedded} embedded for search by meaning"
    if report.elsewhere:
        return f"; {counted(report.left, 'row')} to embed: the background sidecar is embedding them"
    why = redact_text(report.why_left).text
    return (
        f"; {report.embedded} embedded, {report.left} still to embed ({why}): the background "
        "sidecar embeds them while Pi runs"
    )


def import_sessions(since: str | None, session: str | None, yes: bool, ask: Ask = input) -> int:
    request = _request(since, session, yes)
    if isinstance(request, str):
        print(
            f"{request}\n{USAGE.replace('/tdai-memory-import', 'pi-memory-bridge import')}", file=sys.stderr
        )
        return 2
    # never ask without a terminal to answer in: a script must say --yes
    try:
        return asyncio.run(_run(request, ask, interactive=sys.stdin.isatty()))
    except KeyboardInterrupt:
        _stop_import()
        raise


def _stop_import() -> None:
    """Ctrl-C stops the import for good: no sidecar continues it (running it again adds the rest)."""
    with contextlib.suppress(StateError), CatchUpState.open(data_dir(default_agent_dir(os.environ))) as state:
        job = state.unfinished_import()
        if job is not None:
            state.finish_import(job.id)
            print(
                f"import stopped: {counted(job.queued, 'turn')} added; run it again for the rest",
                file=sys.stderr,
            )
