"""Enrichment of memories saved without retrieval aids: the prompt, the only answer accepted, and
the checks between them (pure; the job is `learning.enrich_job`).

Consolidation asks for topic tags and the questions a memory answers when it extracts the memory
(`prompts.EXTRACT_SYSTEM`). A memory saved by hand never went through that call, so a learning job
later shows the model a small batch of such memories (by local refs m1, m2, ...) and asks for
the same aids. The memory's own text is never up for change: the answer has no field for it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from pi_memory_bridge.backends.learning import Cue, MemoryRow, content_key
from pi_memory_bridge.instruction_rules import instruction_in
from pi_memory_bridge.learning.parse import Refused
from pi_memory_bridge.learning.plan import INSTRUCTION, looks_like_file_content
from pi_memory_bridge.learning.prompts import Prompt, clean_text
from pi_memory_bridge.learning.reasons import FailReason
from pi_memory_bridge.learning.schemas import (
    MAX_QUESTIONS,
    MAX_TAGS,
    ExistingRef,
    Question,
    Tag,
)
from pi_memory_bridge.plural import counted
from pi_memory_bridge.redact import redact_text

ENRICH_TAG = "[pi-memory-bridge:enrich v1]"
MAX_ENRICH_BATCH = 8  # memories per call: a bounded answer (~150 tokens each)
MAX_SHOWN_CHARS = 600  # of one memory's text; a long hand-saved note is clipped


class _Answer(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


class EnrichedMemory(_Answer):
    id: ExistingRef
    tags: list[Tag] = Field(default_factory=list, max_length=MAX_TAGS)
    # what lifts recall by meaning: an entry without a question is no enrichment
    questions: list[Question] = Field(min_length=1, max_length=MAX_QUESTIONS)


class EnrichAnswer(_Answer):
    memories: list[EnrichedMemory] = Field(max_length=MAX_ENRICH_BATCH)


ENRICH_SYSTEM = f"""{ENRICH_TAG}
You help a memory store find its memories again when they are needed. Each MEMORY (m1, m2, ...)
is one note about the user or their work, saved earlier. For each one write:
- "tags": 3 to {MAX_TAGS} short topic tags (one to three words each) in both Chinese and English,
  the topics someone would have in mind when this memory is needed ("code style", "代码风格").
- "questions": 2 to {MAX_QUESTIONS} short questions this memory answers, as the user might ask them
  in a later session, at least one in the memory's language and one in the other of Chinese and
  English.
Never rewrite, correct or extend a memory: only describe what it is about. Tags and questions
hold nothing secret and no file contents. Leave out a memory when it is unclear what it is about.
Use only the ids shown, each at most once.

Answer with one JSON object and nothing else, in this shape:
{{"memories": [{{"id": "m1", "tags": ["...", "..."], "questions": ["...?", "...？"]}}]}}"""


def shown_refs(rows: Sequence[MemoryRow]) -> dict[str, MemoryRow]:
    return {f"m{i}": row for i, row in enumerate(rows, 1)}


def enrich_prompt(shown: Mapping[str, MemoryRow]) -> Prompt:
    lines = ["MEMORIES:"]
    for ref, row in shown.items():
        text = clean_text(row.text, MAX_SHOWN_CHARS).replace("\n", " ")
        lines.append(f"[{ref}] ({row.kind}) {text}")
    return Prompt(ENRICH_SYSTEM, "\n".join(lines))


@dataclass(frozen=True, slots=True)
class Cues:
    cues: tuple[Cue, ...]
    declined: tuple[str, ...]  # memory ids shown and left out (or their aids refused)
    dropped: Counter[str]  # entries refused, by reason (for status)

    @property
    def refused(self) -> int:
        """Entries the post-check refused as instructions to the agent (the job record's count)."""
        return sum(n for k, n in self.dropped.items() if k.startswith(INSTRUCTION))

    def refusal_note(self) -> str:
        """The job record's word on what the post-check refused."""
        what = "; ".join(f"{n} {k}" for k, n in sorted(self.dropped.items()) if k.startswith(INSTRUCTION))
        return f"refused the tags and questions of {counted(self.refused, 'memory')}: {what}" if what else ""


def cues_from_answer(answer: EnrichAnswer, shown: Mapping[str, MemoryRow]) -> Cues | Refused:
    """The answer checked against what the model was shown: fail-closed on any id not shown,
    one answered twice or more entries than memories; an entry whose tags or questions hold a
    secret or file contents, or tell the agent to act (`instruction_rules`: a recalled
    question or tag is read by the model like the memory itself), is dropped (the memory counts
    as declined)."""
    if len(answer.memories) > len(shown):
        return Refused(FailReason.TOO_MANY, f"{len(answer.memories)} entries for {len(shown)} memories")
    refs = [m.id for m in answer.memories]
    unknown = sorted({r for r in refs if r not in shown})
    if unknown:
        return Refused(FailReason.UNKNOWN_ID, f"memory ids not shown: {', '.join(unknown)}")
    if len(set(refs)) != len(refs):
        return Refused(FailReason.OFF_SCHEMA, "a memory id is answered twice")
    dropped: Counter[str] = Counter()
    cues: list[Cue] = []
    for entry in answer.memories:
        texts = (*entry.tags, *entry.questions)
        if any(redact_text(t).count for t in texts):
            dropped["held a secret"] += 1
            continue
        if any(looks_like_file_content(t) or "[REDACTED" in t for t in texts):
            dropped["looked like file contents"] += 1
            continue
        rule = instruction_in(texts)
        if rule is not None:
            dropped[f"{INSTRUCTION} ({rule})"] += 1
            continue
        row = shown[entry.id]
        cues.append(Cue(row.memory_id, content_key(row.text), tuple(entry.tags), tuple(entry.questions)))
    enriched = {c.memory_id for c in cues}
    declined = tuple(r.memory_id for r in shown.values() if r.memory_id not in enriched)
    return Cues(tuple(cues), declined, dropped)
