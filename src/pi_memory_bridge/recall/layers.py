"""One fetch function per layer: backend calls in, `RecallItem`s out."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from pi_memory_bridge.backends.base import AtomicMemory, BackendError, MemoryBackend
from pi_memory_bridge.prompt_focus import focus_prompt
from pi_memory_bridge.recall.items import Layer, RecallItem, make_item
from pi_memory_bridge.textsearch import overlap_score, query_terms

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LayerQuery:
    query: str
    limit: int
    live_user_timestamps: frozenset[int]
    # turns left out because they are already in the model's context (for the recall trace)
    live_skipped: list[RecallItem] = field(default_factory=list)


async def fetch_l3(backend: MemoryBackend, q: LayerQuery) -> list[RecallItem]:
    profile = await backend.notes.read_profile()
    if profile is None:
        return []
    item = make_item(Layer.L3, "profile", profile.content, source_id=profile.path or "profile")
    return [item] if item else []


def l1_label(m: AtomicMemory) -> str:
    """The memory's kind; a learned one also says when it was said (the backend returns active
    memories only, so the date tells how current a decision or fact is)."""
    if m.origin == "learned" and m.observed_at is not None:
        return f"{m.type}, {m.observed_at:%Y-%m-%d}"
    return m.type


async def fetch_l1(backend: MemoryBackend, q: LayerQuery) -> list[RecallItem]:
    memories = await backend.memories.search(q.query, q.limit)
    items = (
        make_item(Layer.L1, l1_label(m), m.content, source_id=m.id, score=m.score)
        for m in memories[: q.limit]
    )
    return [i for i in items if i is not None]


async def fetch_l0(backend: MemoryBackend, q: LayerQuery) -> list[RecallItem]:
    # Ask for a few more than needed: turns of the live branch are dropped below.
    hits = await backend.conversation.search(q.query, q.limit + min(8, len(q.live_user_timestamps)))
    items: list[RecallItem] = []
    for hit in hits:
        sides = (("user", hit.user_text.strip()), ("assistant", hit.assistant_text.strip()))
        text = "\n".join(f"{role}: {said}" for role, said in sides if said)
        label = hit.created_at.strftime("%Y-%m-%d")
        item = make_item(Layer.L0, label, text, source_id=hit.turn_id, score=hit.score)
        if item is None:
            continue
        if round(hit.created_at.timestamp() * 1000) in q.live_user_timestamps:
            q.live_skipped.append(item)  # already in the model's context
            continue
        items.append(item)
        if len(items) >= q.limit:
            break
    return items


async def fetch_l2(backend: MemoryBackend, q: LayerQuery) -> list[RecallItem]:
    terms = query_terms(focus_prompt(q.query).text)
    if not terms:
        return []
    entries = await backend.notes.list_scenarios()
    scored = [(overlap_score(terms, f"{e.path}\n{e.summary}"), i, e) for i, e in enumerate(entries)]
    chosen = [e for score, _, e in sorted((s for s in scored if s[0] > 0), key=lambda s: (-s[0], s[1]))]
    chosen = chosen[: q.limit]
    notes = await asyncio.gather(
        *(backend.notes.read_scenario(e.path) for e in chosen), return_exceptions=True
    )
    items: list[RecallItem] = []
    for entry, note in zip(chosen, notes, strict=True):
        if isinstance(note, BaseException):
            # one unreadable note must not cost the others
            log.warning("scenario %s unreadable: %s", entry.path, note)
            if not isinstance(note, BackendError | OSError):
                raise note
            continue
        item = make_item(Layer.L2, note.path, note.content, source_id=note.path)
        if item is not None:
            items.append(item)
    return items


async def fetch_skills(backend: MemoryBackend, q: LayerQuery) -> list[RecallItem]:
    hits = await backend.search_skills(focus_prompt(q.query).text, q.limit)
    items: list[RecallItem] = []
    for hit in hits[: q.limit]:
        body = "\n".join(p for p in (hit.description.strip(), hit.snippet.strip()) if p)
        item = make_item(
            Layer.SKILL,
            f"{hit.name} id={hit.id}",
            body or hit.name,
            key_text=f"{hit.name}\n{body}",
            source_id=hit.id,
            score=hit.score,
        )
        if item is not None:
            items.append(item)
    return items
