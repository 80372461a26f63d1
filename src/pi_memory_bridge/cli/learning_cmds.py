"""`pi-memory-bridge consolidate` and `pi-memory-bridge undo`: learning from a terminal, without Pi.

Without Pi there is no session model to borrow, so `consolidate` needs `learning.endpoint` (an
OpenAI-compatible server the user chose, e.g. a local Ollama). It runs jobs until nothing is left
behind the watermark, a job fails, or `max_jobs` ran; then, like a learning run in Pi, it gives
memories saved without them their tags and questions (`learning.enrich_job`). Running it is the
user's explicit request; only a stored "no" (`learning.enabled: false`) stops it.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable
from pathlib import Path

from pi_memory_bridge.backends.base import BackendError
from pi_memory_bridge.backends.factory import open_backend
from pi_memory_bridge.backends.local import LocalBackend
from pi_memory_bridge.backends.local.learning.memories import LearnedMemories
from pi_memory_bridge.commands.learning import UndoDeps, describe_job, undo_flow
from pi_memory_bridge.config import LearningSettings, default_agent_dir, load_config
from pi_memory_bridge.engine.learning import job_settings, similar_search
from pi_memory_bridge.learning.consolidate import JobOutcome, consolidate_once
from pi_memory_bridge.learning.endpoint import EndpointModel
from pi_memory_bridge.redact import redact_text

Ask = Callable[[str], str]


def open_local() -> tuple[LocalBackend | None, str]:
    agent_dir = default_agent_dir(os.environ)
    loaded = load_config(agent_dir=agent_dir, cwd=Path.cwd(), project_trusted=False, env=os.environ)
    if loaded.config.backend != "local":
        return None, f"learning works on the local backend only (this one is {loaded.config.backend})"
    try:
        backend = open_backend(loaded, agent_dir)
    except (BackendError, OSError) as exc:
        return None, f"memory store unavailable: {redact_text(str(exc)).text}"
    assert isinstance(backend, LocalBackend)
    return backend, ""


async def _consolidate(max_jobs: int) -> int:
    agent_dir = default_agent_dir(os.environ)
    settings = load_config(
        agent_dir=agent_dir, cwd=Path.cwd(), project_trusted=False, env=os.environ
    ).config.learning
    if settings.enabled is False:
        print("learning is off (learning.enabled is false in the config); nothing was sent", file=sys.stderr)
        return 1
    if settings.endpoint is None or settings.model is None:
        print(
            "consolidating without Pi needs learning.endpoint and learning.model (an OpenAI-compatible "
            "server you chose, e.g. http://127.0.0.1:11434/v1); inside Pi it runs on its own",
            file=sys.stderr,
        )
        return 2
    backend, problem = await asyncio.to_thread(open_local)
    if backend is None:
        print(problem, file=sys.stderr)
        return 1
    model = EndpointModel(settings.endpoint, settings.model, os.environ)
    memories = LearnedMemories(backend.store)
    failed = False
    try:
        for _ in range(max_jobs):
            outcome = await consolidate_once(memories, similar_search(backend), model, job_settings(settings))
            if outcome.kind == "nothing":
                print(f"nothing left to consolidate{f' ({outcome.detail})' if outcome.detail else ''}")
                break
            if outcome.summary is not None:
                print(describe_job(outcome.summary))
            if outcome.kind != "applied":
                why = outcome.reason.value if outcome.reason else outcome.kind
                print(f"stopped: {why} {outcome.detail}".strip())
                failed = True
                break
        if not failed:
            failed = await _enrich(memories, model, settings, max_jobs)
    except BackendError as exc:
        print(f"consolidation failed: {redact_text(str(exc)).text}", file=sys.stderr)
        return 1
    finally:
        await backend.close()
    return 1 if failed else 0


async def _enrich(
    memories: LearnedMemories, model: EndpointModel, settings: LearningSettings, jobs: int
) -> bool:
    """Tags and questions for memories saved without them (as a learning run in Pi adds them);
    True when a job failed."""
    from pi_memory_bridge.learning.enrich_job import enrich_backlog

    def report(outcome: JobOutcome) -> None:
        if outcome.summary is not None:
            print(describe_job(outcome.summary))
        if outcome.kind not in ("applied", "nothing"):
            why = outcome.reason.value if outcome.reason else outcome.kind
            print(f"stopped enriching: {why} {outcome.detail}".strip())

    return not await enrich_backlog(memories, model, job_settings(settings), jobs=jobs, report=report)


def consolidate(max_jobs: int = 50) -> int:
    return asyncio.run(_consolidate(max_jobs))


async def _undo(args: str, ask: Ask) -> int:
    from pi_memory_bridge.cli.terminal import run_flow

    backend, problem = await asyncio.to_thread(open_local)
    try:
        memories = LearnedMemories(backend.store) if backend is not None else None
        deps = UndoDeps(memories, problem)
        step = await run_flow(lambda dialog: undo_flow(deps, args, dialog), ask)
    finally:
        if backend is not None:
            await backend.close()
    return 0 if step.level == "info" else 1


def undo(args: str, ask: Ask = input) -> int:
    return asyncio.run(_undo(args, ask))
