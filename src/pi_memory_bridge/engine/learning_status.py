"""Learning's state in words, for `/tdai-memory-status` and the `learning/trigger` answer:
one line, one sentence, and the problems with their fixes (functions over a running `Learning`)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from pi_memory_bridge.backends.base import BackendError
from pi_memory_bridge.learning.budget import budget_day
from pi_memory_bridge.learning.reasons import FailReason
from pi_memory_bridge.plural import counted

if TYPE_CHECKING:
    from pi_memory_bridge.engine.learning import Learning


def model_label(learning: Learning) -> str:
    return (
        learning.model.label
        if learning.model is not None
        else "no model (run inside Pi, or set learning.endpoint)"
    )


def state_text(learning: Learning) -> str:
    if learning.problem:
        return f"off: {learning.problem}"
    if learning.consent is None:
        asks = "asked in the next interactive session" if not learning.has_ui else "waiting for your answer"
        return f"off: not allowed yet ({asks}; or set learning.enabled)"
    if learning.consent is False:
        return "off (learning.enabled is false; /tdai-memory-learning on to allow it)"
    if learning.memories is None:
        return "on, waiting for the memory store"
    if learning.model is None:
        return f"on, {model_label(learning)}"
    return f"on, model {model_label(learning)}"


def sentence(learning: Learning) -> str:
    """The state in words for the status's main text (its fixes are among `describe`'s problems
    or in the one command named here, never both)."""
    head = "Learning from your sessions"
    if learning.problem:
        return f"{head}: off; {learning.problem}."
    if learning.consent is None:
        when = (
            "you will be asked once" if learning.has_ui else "you will be asked in an interactive Pi session"
        )
        return f"{head}: not allowed yet; {when} (or run /tdai-memory-learning on)."
    if learning.consent is False:
        return f"{head}: off; /tdai-memory-learning on allows it."
    if learning.memories is None:
        return f"{head}: on, waiting for the memory store to open."
    if learning.model is None:
        # outside Pi (the terminal) there is no session model to learn with: nothing runs here
        return (
            f"{head}: on; it runs inside Pi, on the session's model, or anywhere once "
            "learning.endpoint names a model server."
        )
    if learning.working:
        return f"{head}: on; a consolidation job is running now on {model_label(learning)}."
    return f"{head}: on; {model_label(learning)} turns what you said into memories in the background."


async def describe(learning: Learning) -> tuple[str, list[tuple[str, str]]]:
    """The status line, and problems as (what, fix)."""
    from pi_memory_bridge.commands.learning import describe_job

    problems: list[tuple[str, str]] = []
    parts = [state_text(learning)]
    memories = learning.memories
    if memories is not None:
        try:
            used = await asyncio.to_thread(memories.ledger.usage, budget_day(datetime.now(UTC)))
            counts = await asyncio.to_thread(memories.counts)
            last = await asyncio.to_thread(memories.ledger.jobs, 3)
            unenriched = await asyncio.to_thread(memories.enrichment.waiting_count)
        except BackendError as exc:
            return f"{parts[0]}; store unreadable ({exc})", problems
        budget = learning.settings.daily_token_budget
        parts.append(f"tokens today {used:,} / {budget:,}")
        parts.append(
            f"{counted(counts.pending_turns, 'turn')} waiting, {counted(counts.applied_jobs, 'job')} applied"
        )
        parts.append(
            f"memories {counts.active} active ({counts.learned_active} learned), "
            f"{counts.superseded} superseded"
        )
        if unenriched:  # saved without tags and questions: a learning job adds them
            parts.append(f"{counted(unenriched, 'memory')} waiting for tags and questions")
        if last:
            parts.append("last jobs: " + " | ".join(describe_job(j) for j in last))
        if learning.active and used >= budget:
            problems.append(
                (
                    "consolidation paused: today's token budget is spent",
                    "wait for tomorrow (UTC) or raise learning.dailyTokenBudget",
                )
            )
    refused = [(k, n) for k, n in learning.outcomes.items() if k != "applied"]
    if refused:
        parts.append("this session: " + ", ".join(f"{k} x{n}" for k, n in sorted(refused)))
    if learning.notes.report is not None and learning.notes.report.kept:
        parts.append("edited by hand, so not regenerated: " + ", ".join(learning.notes.report.kept))
    if learning.dropped:
        parts.append(
            "refused memories: " + ", ".join(f"{k} x{n}" for k, n in sorted(learning.dropped.items()))
        )
    last_outcome = learning.last
    if last_outcome is not None and last_outcome.reason in (FailReason.NO_AUTH, FailReason.NO_MODEL):
        problems.append(
            (
                f"consolidation cannot run: {last_outcome.reason.value} ({last_outcome.detail})",
                "log in to the model in Pi, or set learning.model to one that has a key",
            )
        )
    return "; ".join(parts), problems
