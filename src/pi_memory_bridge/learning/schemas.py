"""What the model may answer, exactly: anything else is refused before a single row is written.

Both answers are one JSON object with English keys and free text in the user's language. Ids are
the short local ones the prompts show (t1 for a turn, n1 for a new memory, m1 for an existing
one), never database ids, so the model cannot name a row it was not shown.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from pi_memory_bridge.learning.reasons import FailReason

# A job reads at most this many turns and keeps at most this many memories from them.
MAX_MEMORIES_PER_JOB = 20
MAX_TARGETS = 8
MAX_MEMORY_CHARS = 400
# write-time enrichment of each memory: topic tags (zh and en) and questions it answers
MAX_TAGS = 6
MAX_TAG_CHARS = 40
MAX_QUESTIONS = 3
MAX_QUESTION_CHARS = 160
__all__ = [
    "KINDS",
    "MAX_MEMORIES_PER_JOB",
    "Decision",
    "ExtractAnswer",
    "ExtractedMemory",
    "FailReason",
    "ReconcileAnswer",
]

Kind = Literal["preference", "constraint", "decision", "fact", "pitfall"]
KINDS: tuple[Kind, ...] = ("preference", "constraint", "decision", "fact", "pitfall")

TurnRef = Annotated[str, StringConstraints(pattern=r"^t[1-9][0-9]{0,2}$")]
NewRef = Annotated[str, StringConstraints(pattern=r"^n[1-9][0-9]{0,2}$")]
ExistingRef = Annotated[str, StringConstraints(pattern=r"^m[1-9][0-9]{0,2}$")]
MemoryText = Annotated[
    str, StringConstraints(strip_whitespace=True, min_length=3, max_length=MAX_MEMORY_CHARS)
]
Tag = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_TAG_CHARS)]
Question = Annotated[
    str, StringConstraints(strip_whitespace=True, min_length=3, max_length=MAX_QUESTION_CHARS)
]


class _Answer(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


class ExtractedMemory(_Answer):
    kind: Kind
    text: MemoryText
    turns: list[TurnRef] = Field(min_length=1, max_length=20)
    scope: Literal["user", "project"] = "user"
    # optional (a memory without them is still recalled, by its text), capped when present
    tags: list[Tag] = Field(default_factory=list, max_length=MAX_TAGS)
    questions: list[Question] = Field(default_factory=list, max_length=MAX_QUESTIONS)


class ExtractAnswer(_Answer):
    memories: list[ExtractedMemory] = Field(max_length=MAX_MEMORIES_PER_JOB)


class Decision(_Answer):
    new: NewRef
    action: Literal["add", "skip", "supersede", "merge"]
    targets: list[ExistingRef] = Field(default_factory=list, max_length=MAX_TARGETS)
    text: MemoryText | None = None  # the combined sentence, for merge only


class ReconcileAnswer(_Answer):
    decisions: list[Decision] = Field(max_length=MAX_MEMORIES_PER_JOB)
