"""Shared pieces of the learning tests: a real local store, turns, and a scripted model.

The model is the one remote part of consolidation, so it is scripted here: each call takes the
next queued answer (text, stop reason, or an exception), and every prompt is recorded.
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from pi_memory_bridge.backends.base import ConversationTurn
from pi_memory_bridge.backends.local import LocalBackend
from pi_memory_bridge.backends.local.learning.memories import LearnedMemories
from pi_memory_bridge.learning.consolidate import JobOutcome, JobSettings, consolidate_once
from pi_memory_bridge.learning.enrichment import ENRICH_TAG
from pi_memory_bridge.learning.model import Completion, ModelError
from pi_memory_bridge.learning.prompts import EXTRACT_TAG, RECONCILE_TAG

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def turn(
    n: int, user: str, assistant: str = "ok", session: str = "mem-1", minutes: int | None = None
) -> ConversationTurn:
    return ConversationTurn(
        turn_id=f"turn-{session}-{n}",
        memory_session_id=session,
        user_text=user,
        assistant_text=assistant,
        created_at=T0 + timedelta(minutes=n if minutes is None else minutes),
        pi_session_id="pi-1",
    )


def extract(*memories: tuple[str, str, list[str]] | dict[str, Any]) -> str:
    items = [m if isinstance(m, dict) else {"kind": m[0], "text": m[1], "turns": m[2]} for m in memories]
    return json.dumps({"memories": items}, ensure_ascii=False)


def enrich(*entries: tuple[str, list[str], list[str]]) -> str:
    """An enrichment answer: (memory ref, tags, questions) per entry."""
    items = [{"id": ref, "tags": tags, "questions": questions} for ref, tags, questions in entries]
    return json.dumps({"memories": items}, ensure_ascii=False)


def decide(*decisions: dict[str, Any]) -> str:
    return json.dumps({"decisions": list(decisions)}, ensure_ascii=False)


@dataclass
class Call:
    system: str
    user: str
    max_tokens: int
    timeout_s: float

    @property
    def task(self) -> str:
        if self.system.startswith(EXTRACT_TAG):
            return "extract"
        if self.system.startswith(RECONCILE_TAG):
            return "reconcile"
        if self.system.startswith(ENRICH_TAG):
            return "enrich"
        return "other"


Answer = str | tuple[str, str] | ModelError  # text, (text, stop reason), or a failure


class ScriptedModel:
    def __init__(self, *answers: Answer, usage: tuple[int, int] = (100, 20)) -> None:
        self.answers: deque[Answer] = deque(answers)
        self.calls: list[Call] = []
        self.usage = usage

    @property
    def label(self) -> str:
        return "scripted/test-model"

    def queue(self, *answers: Answer) -> None:
        self.answers.extend(answers)

    async def complete(self, system: str, user: str, *, max_tokens: int, timeout_s: float) -> Completion:
        self.calls.append(Call(system, user, max_tokens, timeout_s))
        if not self.answers:
            raise AssertionError(f"unexpected model call ({self.calls[-1].task})")
        answer = self.answers.popleft()
        if isinstance(answer, ModelError):
            raise answer
        text, stop = (answer, "stop") if isinstance(answer, str) else answer
        return Completion(text, stop, self.usage[0], self.usage[1], "scripted/test-model")


def search_for(backend: LocalBackend) -> Any:
    async def search(text: str, k: int) -> list[str]:
        return [m.id for m in await backend.memories.search(text, k)]

    return search


async def run(
    backend: LocalBackend,
    model: ScriptedModel,
    settings: JobSettings | None = None,
    session: str | None = None,
) -> JobOutcome:
    return await consolidate_once(
        LearnedMemories(backend.store), search_for(backend), model, settings or JobSettings(), session=session
    )


def active_texts(backend: LocalBackend) -> list[str]:
    return sorted(m.text for m in LearnedMemories(backend.store).active())
