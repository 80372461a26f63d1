"""One consolidation job: turns not consolidated yet -> extracted memories -> reconciled -> written.

The job reads a batch of one memory session's turns (the oldest not yet consolidated), asks the
model to extract memories, settles what it can without a model (duplicates, memories with nothing
similar stored), asks the model to reconcile the rest against the most similar active memories,
and applies the result in one transaction. Whatever goes wrong (model, answer, budget, a store
that changed meanwhile) writes no memory: the job is recorded as failed and its turns stay behind
the watermark, to be tried again; a batch that keeps failing is dropped after `max_failures`.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

from pi_memory_bridge.backends.learning import (
    JobConflict,
    JobOp,
    JobRecord,
    JobSummary,
    LearnedMemories,
    MemoryRow,
    PendingTurn,
    content_key,
    new_job_id,
)
from pi_memory_bridge.learning.budget import allows, budget_day, estimate_tokens
from pi_memory_bridge.learning.cheap import shares_a_topic
from pi_memory_bridge.learning.model import Completion, CompletionModel, ModelError
from pi_memory_bridge.learning.parse import Refused, parse_answer
from pi_memory_bridge.learning.plan import (
    Candidate,
    candidates_from_extraction,
    cheap_pass,
    plan_from_decisions,
    reconcile_view,
)
from pi_memory_bridge.learning.prompts import (
    MAX_SIDE_CHARS,
    Prompt,
    PromptTurn,
    extract_prompt,
    reconcile_prompt,
)
from pi_memory_bridge.learning.reasons import FailReason
from pi_memory_bridge.learning.schemas import ExtractAnswer, ReconcileAnswer
from pi_memory_bridge.plural import counted
from pi_memory_bridge.recall.trivial import is_trivial_prompt
from pi_memory_bridge.redact import redact_text

log = logging.getLogger(__name__)

SimilarSearch = Callable[[str, int], Awaitable[Sequence[str]]]  # text, k -> active memory ids, best first


@dataclass(frozen=True, slots=True)
class JobSettings:
    max_turns: int = 12
    max_chars: int = 16_000  # of conversation text per extraction prompt
    max_output_tokens: int = 2000
    timeout_s: float = 60.0
    daily_budget: int = 200_000
    max_failures: int = 3
    similar_k: int = 5
    known_limit: int = 20
    context_turns: int = 3


@dataclass(frozen=True, slots=True)
class JobOutcome:
    kind: Literal["nothing", "applied", "failed", "deferred"]
    summary: JobSummary | None = None
    reason: FailReason | None = None
    detail: str = ""
    dropped: Counter[str] = field(default_factory=Counter)  # extracted memories refused, by reason

    @property
    def changed(self) -> bool:
        s = self.summary
        return (
            s is not None
            and self.kind == "applied"
            and bool(s.added or s.superseded or s.merged or s.proposed or s.enriched)
        )

    def notice(self) -> tuple[str, str] | None:
        """(one line for the user, its level) after every recorded job."""
        s = self.summary
        if s is None:
            return None
        if self.kind == "applied" and s.enriched:  # an enrichment job (`enrich_job`)
            return (
                f"memory: enriched {counted(s.enriched, 'memory')} with topics and questions to find them by "
                f"(job {s.job_id}; /tdai-memory-undo to revert)",
                "info",
            )
        if self.kind == "applied" and self.changed:
            parts = [f"+{s.added} learned"]
            if s.superseded:
                parts.append(f"{s.superseded} superseded")
            if s.merged:
                parts.append(f"{s.merged} merged")
            if s.skipped:
                parts.append(f"{s.skipped} already known")
            if s.proposed:
                parts.append(f"{counted(s.proposed, 'proposal')} held for /tdai-memory-review")
            if s.refused:
                parts.append(f"{s.refused} refused")
            return f"memory: {', '.join(parts)} (job {s.job_id}; /tdai-memory-undo to revert)", "info"
        if self.kind == "applied" and s.refused:
            return (
                f"memory: learned nothing from {counted(s.turns, 'turn')}, "
                f"{counted(s.refused, 'memory')} refused: "
                f"{s.reason} (job {s.job_id})",
                "warning",
            )
        if self.kind == "applied":
            return f"memory: nothing new to learn from {counted(s.turns, 'turn')} (job {s.job_id})", "info"
        if s.state == "dropped":
            return (
                f"memory: gave up learning from {counted(s.turns, 'turn')} "
                f"after repeated failures ({s.reason})",
                "warning",
            )
        return f"memory: learning wrote nothing ({s.reason}); it tries again later", "warning"


def _now() -> datetime:
    return datetime.now(UTC)


def select_batch(pending: Sequence[PendingTurn], max_turns: int, max_chars: int) -> list[PendingTurn]:
    """The oldest pending turns of the first session among `pending`, within the size limits."""
    if not pending:
        return []
    session = pending[0].memory_session_id
    batch: list[PendingTurn] = []
    size = 0
    for turn in pending:
        if turn.memory_session_id != session:
            continue
        cost = min(len(turn.user_text), MAX_SIDE_CHARS) + min(len(turn.assistant_text), MAX_SIDE_CHARS)
        if batch and (len(batch) >= max_turns or size + cost > max_chars):
            break
        batch.append(turn)
        size += cost
    return batch


def _prompt_turns(turns: Sequence[PendingTurn], refs: bool) -> list[PromptTurn]:
    return [
        PromptTurn(f"t{i}" if refs else "", t.created_at, t.user_text, t.assistant_text)
        for i, t in enumerate(turns, 1)
    ]


class ModelJob:
    """The state of one job while it runs: its id, its turns, the tokens its calls spent (an
    enrichment job, `enrich_job`, has no turns)."""

    def __init__(
        self,
        memories: LearnedMemories,
        model: CompletionModel,
        settings: JobSettings,
        turns: Sequence[PendingTurn],
        now: Callable[[], datetime],
    ) -> None:
        self.memories = memories
        self.model = model
        self.settings = settings
        self.turns = list(turns)
        self.now = now
        self.job_id = new_job_id(now())
        self.input_tokens = 0
        self.output_tokens = 0
        self.model_name = model.label

    @property
    def turn_keys(self) -> tuple[tuple[str, str], ...]:
        return tuple((t.turn_id, t.memory_session_id) for t in self.turns)

    async def call(self, prompt: Prompt) -> Completion | JobOutcome:
        """One model call within the budget; a deferral or a failure outcome instead when not."""
        estimate = estimate_tokens(prompt.system + prompt.user) + self.settings.max_output_tokens
        used = await asyncio.to_thread(self.memories.ledger.usage, budget_day(self.now()))
        if not allows(used, estimate, self.settings.daily_budget):
            detail = f"{used} of {self.settings.daily_budget} tokens used today, this call needs ~{estimate}"
            if self.input_tokens:  # an earlier call of this job already spent tokens: say so
                return await self.fail(FailReason.BUDGET, detail)
            return JobOutcome("deferred", reason=FailReason.BUDGET, detail=detail)
        try:
            completion = await self.model.complete(
                prompt.system,
                prompt.user,
                max_tokens=self.settings.max_output_tokens,
                timeout_s=self.settings.timeout_s,
            )
        except ModelError as exc:
            if exc.reason is FailReason.TIMEOUT:  # the call may well have been billed: count the estimate
                await self._count(estimate, 0)
            return await self.fail(exc.reason, redact_text(exc.detail).text)
        self.model_name = completion.model or self.model_name
        spent_in = completion.input_tokens or estimate_tokens(prompt.system + prompt.user)
        spent_out = completion.output_tokens or estimate_tokens(completion.text)
        await self._count(spent_in, spent_out)
        if completion.stop_reason != "stop":
            return await self.fail(FailReason.STOP_REASON, f"stop reason {completion.stop_reason!r}")
        return completion

    async def _count(self, tokens_in: int, tokens_out: int) -> None:
        self.input_tokens += tokens_in
        self.output_tokens += tokens_out
        await asyncio.to_thread(
            self.memories.ledger.add_usage, budget_day(self.now()), tokens_in + tokens_out
        )

    async def fail(self, reason: FailReason, detail: str = "") -> JobOutcome:
        summary = await asyncio.to_thread(
            self.memories.writer.record_failure,
            self.job_id,
            f"{reason.value}: {detail}" if detail else reason.value,
            model=self.model_name,
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            turns=self.turn_keys,
            counts=reason.counts_toward_drop,
            max_failures=self.settings.max_failures,
        )
        log.warning("consolidation job %s wrote nothing: %s %s", self.job_id, reason.value, detail)
        return JobOutcome("failed", summary, reason, detail)


async def consolidate_once(
    memories: LearnedMemories,
    search: SimilarSearch,
    model: CompletionModel,
    settings: JobSettings,
    *,
    session: str | None = None,
    now: Callable[[], datetime] = _now,
) -> JobOutcome:
    """Run one job over the oldest pending turns (of `session`, or of any session)."""
    pending = await asyncio.to_thread(memories.turns.pending_turns, session, settings.max_turns * 4)
    turns = select_batch(pending, settings.max_turns, settings.max_chars)
    if not turns:
        return JobOutcome("nothing")
    session_id = turns[0].memory_session_id
    if all(is_trivial_prompt(t.user_text) for t in turns):
        keys = [(t.turn_id, t.memory_session_id) for t in turns]
        await asyncio.to_thread(memories.turns.mark_consumed, keys, "trivial")
        return JobOutcome("nothing", detail=f"{counted(len(turns), 'trivial turn')}")
    job = ModelJob(memories, model, settings, turns, now)
    project = await asyncio.to_thread(memories.turns.session_project, session_id)
    known = await asyncio.to_thread(memories.recent_active, settings.known_limit, project)
    context = await asyncio.to_thread(
        memories.turns.context_turns, session_id, turns[0].created_at, settings.context_turns
    )
    prompt = extract_prompt(
        _prompt_turns(turns, True), _prompt_turns(context, False), [m.text for m in known]
    )
    answered = await job.call(prompt)
    if isinstance(answered, JobOutcome):
        return answered
    extracted = parse_answer(answered.text, ExtractAnswer)
    if isinstance(extracted, Refused):
        return await job.fail(extracted.reason, extracted.detail)
    refs = {f"t{i}": t for i, t in enumerate(turns, 1)}
    extraction = candidates_from_extraction(extracted, refs, project)
    if isinstance(extraction, Refused):
        return await job.fail(extraction.reason, extraction.detail)
    ops = await _reconcile(job, search, extraction.candidates)
    if isinstance(ops, JobOutcome):
        return ops
    record = JobRecord(
        job.job_id,
        job.model_name,
        job.input_tokens,
        job.output_tokens,
        job.turn_keys,
        tuple(ops),
        refused=extraction.refused.total(),
        reason=extraction.refusal_note(),
    )
    try:
        summary = await asyncio.to_thread(memories.writer.apply_job, record)
    except JobConflict as exc:
        return await job.fail(FailReason.CONFLICT, str(exc))
    log.info(
        "consolidation job %s: turns %d, +%d, %d skipped, %d superseded, %d merged, %d proposed",
        summary.job_id,
        summary.turns,
        summary.added,
        summary.skipped,
        summary.superseded,
        summary.merged,
        summary.proposed,
    )
    return JobOutcome("applied", summary, dropped=extraction.dropped)


async def _similar(
    memories: LearnedMemories, search: SimilarSearch, candidates: Sequence[Candidate], k: int
) -> dict[str, list[MemoryRow]]:
    found: dict[str, list[MemoryRow]] = {}
    for candidate in candidates:
        ids = list(await search(candidate.text, k))
        rows = await asyncio.to_thread(memories.rows, ids)
        found[candidate.ref] = [
            rows[i]
            for i in ids
            if i in rows and rows[i].active and shares_a_topic(candidate.text, rows[i].text)
        ]
    return found


async def _reconcile(
    job: ModelJob, search: SimilarSearch, candidates: Sequence[Candidate]
) -> list[JobOp] | JobOutcome:
    if not candidates:
        return []
    memories = job.memories
    equal = await asyncio.to_thread(memories.active_by_keys, [content_key(c.text) for c in candidates])
    similar = await _similar(memories, search, candidates, job.settings.similar_k)
    cheap = cheap_pass(candidates, equal, similar)
    ops = list(cheap.ops)
    if cheap.to_reconcile:
        view = reconcile_view(cheap.to_reconcile)
        answered = await job.call(reconcile_prompt(view.new, view.existing))
        if isinstance(answered, JobOutcome):
            return answered
        decided = parse_answer(answered.text, ReconcileAnswer)
        if isinstance(decided, Refused):
            return await job.fail(decided.reason, decided.detail)
        planned = plan_from_decisions(decided, view)
        if isinstance(planned, Refused):
            return await job.fail(planned.reason, planned.detail)
        ops += planned
    return ops
