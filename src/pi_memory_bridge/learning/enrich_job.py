"""One enrichment job: memories without questions -> the model's tags and questions -> written.

It runs on the same terms as a consolidation job (`consolidate.ModelJob`): only with consent and
a model, within the daily token budget, one bounded call, the answer validated strictly. Anything
doubtful (off-schema, unknown ids, too many entries, a timeout, a stop reason other than "stop")
writes nothing and is recorded as a failed job; each memory of the batch counts one failure, and
one that keeps failing is dropped after `max_failures`, never asked about again. A memory the
model leaves out is not asked about again either.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from pi_memory_bridge.backends.learning import EnrichRecord, JobConflict, LearnedMemories, MemoryRow
from pi_memory_bridge.learning.consolidate import JobOutcome, JobSettings, ModelJob
from pi_memory_bridge.learning.enrichment import (
    MAX_ENRICH_BATCH,
    EnrichAnswer,
    cues_from_answer,
    enrich_prompt,
    shown_refs,
)
from pi_memory_bridge.learning.model import CompletionModel
from pi_memory_bridge.learning.parse import Refused, parse_answer
from pi_memory_bridge.learning.reasons import FailReason
from pi_memory_bridge.plural import counted, noun

log = logging.getLogger(__name__)


def _now() -> datetime:
    return datetime.now(UTC)


class _EnrichJob(ModelJob):
    """A model job over memories instead of turns: its failures also count against them."""

    def __init__(
        self,
        memories: LearnedMemories,
        model: CompletionModel,
        settings: JobSettings,
        rows: Sequence[MemoryRow],
        now: Callable[[], datetime],
    ) -> None:
        super().__init__(memories, model, settings, (), now)
        self.rows = list(rows)

    async def fail(self, reason: FailReason, detail: str = "") -> JobOutcome:
        what = f"enriching {counted(len(self.rows), 'memory')}"
        if reason.counts_toward_drop:
            dropped = await asyncio.to_thread(
                self.memories.enrichment.record_failure,
                [r.memory_id for r in self.rows],
                reason.value,
                self.job_id,
                self.settings.max_failures,
            )
            if dropped:
                what += f", {dropped} given up after repeated failures"
        return await super().fail(reason, f"{what}: {detail}" if detail else what)


async def enrich_once(
    memories: LearnedMemories,
    model: CompletionModel,
    settings: JobSettings,
    *,
    batch: int = MAX_ENRICH_BATCH,
    now: Callable[[], datetime] = _now,
) -> JobOutcome:
    """Enrich the newest memories that have no questions yet (at most `batch` of them)."""
    rows = await asyncio.to_thread(memories.enrichment.waiting, min(batch, MAX_ENRICH_BATCH))
    if not rows:
        return JobOutcome("nothing")
    job = _EnrichJob(memories, model, settings, rows, now)
    shown = shown_refs(rows)
    answered = await job.call(enrich_prompt(shown))
    if isinstance(answered, JobOutcome):
        return answered
    parsed = parse_answer(answered.text, EnrichAnswer)
    if isinstance(parsed, Refused):
        return await job.fail(parsed.reason, parsed.detail)
    planned = cues_from_answer(parsed, shown)
    if isinstance(planned, Refused):
        return await job.fail(planned.reason, planned.detail)
    record = EnrichRecord(
        job.job_id,
        job.model_name,
        job.input_tokens,
        job.output_tokens,
        planned.cues,
        planned.declined,
        refused=planned.refused,
        reason=planned.refusal_note(),
    )
    try:
        summary = await asyncio.to_thread(memories.enrichment.apply, record)
    except JobConflict as exc:
        return await job.fail(FailReason.CONFLICT, str(exc))
    if summary is None:
        left = f"{counted(len(rows), 'memory')} left as {noun(len(rows), 'it is', 'they are')}"
        return JobOutcome("nothing", detail=left, dropped=planned.dropped)
    log.info("enrichment job %s: memories enriched: %d of %d", summary.job_id, summary.enriched, len(rows))
    return JobOutcome("applied", summary, dropped=planned.dropped)


async def enrich_backlog(
    memories: LearnedMemories,
    model: CompletionModel,
    settings: JobSettings,
    *,
    jobs: int,
    report: Callable[[JobOutcome], None],
) -> bool:
    """Up to `jobs` enrichment jobs, each outcome reported (the last one may be "nothing");
    False when one failed or has to wait, which ends the run."""
    for _ in range(jobs):
        outcome = await enrich_once(memories, model, settings)
        report(outcome)
        if outcome.kind == "nothing":
            return True
        if outcome.kind != "applied":
            return False
    return True
