"""What an enrichment job added, memory by memory, in the words the learning page shows: the
memory (as it is stored now), the topic tags the job added to it and the questions it wrote for
it. Read from the job's own record (`memories.enrichment.enriched_by`), so what is listed is
exactly what undoing the job takes away; redacted again, as every text the inspector shows."""

from __future__ import annotations

from dataclasses import dataclass

from pi_memory_bridge.backends.local.learning.memories import LearnedMemories
from pi_memory_bridge.redact import redact_text


def _clean(text: str) -> str:
    return " ".join(redact_text(text).text.split())


@dataclass(frozen=True, slots=True)
class Addition:
    memory_id: str
    kind: str
    text: str
    tags: tuple[str, ...]
    questions: tuple[str, ...]

    @property
    def shown(self) -> str:
        return f"[L1 {self.kind}] {self.text}"

    @property
    def counted(self) -> str:
        tags, asked = len(self.tags), len(self.questions)
        return f"{tags} tag{'' if tags == 1 else 's'}, {asked} question{'' if asked == 1 else 's'}"


def additions(memories: LearnedMemories, job_id: str) -> tuple[Addition, ...]:
    """What job `job_id` added and still holds (nothing once it is undone; synchronous)."""
    return tuple(
        Addition(
            e.memory_id,
            e.kind,
            _clean(e.text),
            tuple(_clean(t) for t in e.tags),
            tuple(_clean(q) for q in e.questions),
        )
        for e in memories.enrichment.enriched_by(job_id)
    )


__all__ = ["Addition", "additions"]
