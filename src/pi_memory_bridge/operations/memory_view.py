"""What memory holds, as items a person can browse: the profile, memories by kind, recent
conversation, notes. One reader for `/tdai-memory` and `pi-memory-bridge list|show|search`.

Every item has a `ref` ("L1:at-…", "L0:<turn id>", "L2:<note path>", "L3:profile") that
`show`, `edit` and `forget --id` take; a bare L1 or L0 id works too. Texts are redacted again on
the way out (they were redacted at capture; a rule added since then still applies).
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, TypeVar

from pi_memory_bridge.backends.base import (
    AtomicMemory,
    AtomicType,
    BackendError,
    BackendRejected,
    Capability,
    ConversationHit,
    MemoryBackend,
)
from pi_memory_bridge.redact import redact_text

T = TypeVar("T")
Layer = Literal["L1", "L0", "L2", "L3"]
LAYER_NAMES: dict[str, str] = {
    "L3": "profile",
    "L1": "memory",
    "L0": "conversation",
    "L2": "note",
}
PREVIEW_CHARS = 100
DEFAULT_LIMIT = 20
PROFILE_REF = "L3:profile"


@dataclass(frozen=True, slots=True)
class MemoryItem:
    layer: Layer
    id: str
    kind: str  # L1: fact/preference/...; L0: "turn"; L2: "note"; L3: "profile"
    text: str
    created_at: datetime | None = None
    updated_at: datetime | None = None
    source: str = ""  # L1: who saved it (user, model, import, ...); L2: the note's summary

    @property
    def ref(self) -> str:
        return f"{self.layer}:{self.id}"

    @property
    def editable(self) -> bool:
        return self.layer == "L1"

    def preview(self, chars: int = PREVIEW_CHARS) -> str:
        clean = " ".join(self.text.split())
        short = clean if len(clean) <= chars else clean[: chars - 1] + "…"
        when = self.updated_at or self.created_at
        day = when.strftime("%Y-%m-%d") if when else ""
        label = self.kind if self.layer != "L2" else self.id
        return f"[{label}{' ' + day if day else ''}] {short}"

    def full(self) -> str:
        lines = [f"{self.ref} ({LAYER_NAMES[self.layer]}, {self.kind})"]
        if self.created_at:
            lines.append(f"saved:   {self.created_at.strftime('%Y-%m-%d %H:%M')} UTC")
        if self.updated_at and self.updated_at != self.created_at:
            lines.append(f"changed: {self.updated_at.strftime('%Y-%m-%d %H:%M')} UTC")
        if self.source and self.layer == "L1":
            lines.append(f"from:    {self.source}")
        lines += ["", self.text]
        return "\n".join(lines)

    def to_json(self) -> dict[str, object]:
        return {
            "ref": self.ref,
            "layer": self.layer,
            "id": self.id,
            "kind": self.kind,
            "text": self.text,
            "createdAt": self.created_at.isoformat() if self.created_at else None,
            "updatedAt": self.updated_at.isoformat() if self.updated_at else None,
            "source": self.source,
        }


def redacted(text: str) -> str:
    return redact_text(text).text


def atomic_item(m: AtomicMemory) -> MemoryItem:
    return MemoryItem("L1", m.id, m.type, redacted(m.content), m.created_at, m.updated_at, m.source)


def turn_item(h: ConversationHit) -> MemoryItem:
    text = f"user: {redacted(h.user_text)}\nassistant: {redacted(h.assistant_text)}"
    return MemoryItem("L0", h.turn_id, "turn", text, h.created_at, h.created_at)


@dataclass(frozen=True, slots=True)
class Overview:
    """Counts per section, for the view's first menu."""

    profile: bool
    kinds: dict[str, int]  # L1 per kind (only what the first page shows when it cannot count)
    conversation: int | None  # None: the backend cannot list it
    notes: int
    problems: tuple[str, ...] = ()


async def _guard(what: str, problems: list[str], job: Awaitable[T]) -> T | None:
    try:
        return await job
    except BackendError as exc:
        problems.append(f"{what}: {redacted(str(exc))}")
        return None


async def profile(backend: MemoryBackend) -> MemoryItem | None:
    if Capability.L3_PROFILE not in backend.capabilities:
        return None
    found = await backend.notes.read_profile()
    if found is None or not found.content.strip():
        return None
    return MemoryItem("L3", "profile", "profile", redacted(found.content))


async def memories(
    backend: MemoryBackend, *, kind: str | None = None, limit: int = DEFAULT_LIMIT, offset: int = 0
) -> list[MemoryItem]:
    if Capability.L1_LIST not in backend.capabilities:
        return []
    return [atomic_item(m) for m in await backend.memories.list(limit, offset, kind)]


async def conversation(
    backend: MemoryBackend, *, limit: int = DEFAULT_LIMIT, offset: int = 0
) -> list[MemoryItem]:
    if Capability.L0_LIST not in backend.capabilities:
        return []
    return [turn_item(h) for h in await backend.conversation.list(limit, offset)]


async def notes(backend: MemoryBackend) -> list[MemoryItem]:
    if Capability.L2_SCENARIOS not in backend.capabilities:
        return []
    entries = await backend.notes.list_scenarios()
    return [
        MemoryItem("L2", e.path, "note", redacted(e.summary), e.updated_at, e.updated_at, redacted(e.summary))
        for e in entries
    ]


async def overview(backend: MemoryBackend) -> Overview:
    problems: list[str] = []
    kinds: dict[str, int] = {}
    for kind in AtomicType:
        count = await _guard("memories", problems, (_count_kind(backend, kind.value)))
        if count:
            kinds[kind.value] = count
    prof = await _guard("profile", problems, (profile(backend)))
    turns: int | None = None
    if Capability.L0_LIST in backend.capabilities:
        listed = await _guard("conversation", problems, (conversation(backend, limit=200)))
        turns = len(listed) if listed is not None else None
    listed_notes = await _guard("notes", problems, (notes(backend)))
    return Overview(prof is not None, kinds, turns, len(listed_notes or []), tuple(problems))


COUNT_CAP = 200  # the view says "200+" rather than paging through everything to count


async def _count_kind(backend: MemoryBackend, kind: str) -> int:
    if Capability.L1_LIST not in backend.capabilities:
        return 0
    return len(await backend.memories.list(COUNT_CAP, 0, kind))


async def search(backend: MemoryBackend, query: str, limit: int = DEFAULT_LIMIT) -> list[MemoryItem]:
    """L1 then L0 matches; an empty query lists the most recent items instead of nothing."""
    query = query.strip()
    if not query:
        recent = await memories(backend, limit=limit)
        recent += await conversation(backend, limit=limit)
        recent.sort(key=lambda i: i.updated_at or i.created_at or datetime.min, reverse=True)
        return recent[:limit]
    found: list[MemoryItem] = []
    if Capability.L1_SEARCH in backend.capabilities:
        found += [atomic_item(m) for m in await backend.memories.search(query, limit)]
    if Capability.L0_SEARCH in backend.capabilities:
        found += [turn_item(h) for h in await backend.conversation.search(query, limit)]
    return found


def split_ref(ref: str) -> tuple[str | None, str]:
    layer, sep, rest = ref.partition(":")
    if sep and layer in LAYER_NAMES:
        return layer, rest
    return None, ref


async def find(backend: MemoryBackend, ref: str) -> MemoryItem | None:
    """The item a ref (or a bare L1/L0 id) names, or None."""
    layer, key = split_ref(ref.strip())
    if not key:
        return None
    if layer == "L3":
        return await profile(backend)
    if layer == "L2":
        if Capability.L2_SCENARIOS not in backend.capabilities:
            return None
        try:
            note = await backend.notes.read_scenario(key)
        except BackendRejected:
            return None
        return MemoryItem("L2", note.path, "note", redacted(note.content), source=redacted(note.summary))
    if layer in (None, "L1") and Capability.L1_LIST in backend.capabilities:
        hits = await backend.memories.list(1, 0, None, [key])
        if hits:
            return atomic_item(hits[0])
    if layer in (None, "L0") and Capability.L0_LIST in backend.capabilities:
        turns = await backend.conversation.list(1, 0, [key])
        if turns:
            return turn_item(turns[0])
    return None


def kind_label(kind: str, count: int) -> str:
    plural = {"fact": "Facts", "preference": "Preferences", "constraint": "Constraints",
              "event": "Events", "instruction": "Instructions"}  # fmt: skip
    return f"{plural.get(kind, kind.title())} ({count}{'+' if count >= COUNT_CAP else ''})"


def render_list(title: str, items: Sequence[MemoryItem]) -> str:
    if not items:
        return f"{title}: nothing yet."
    return "\n".join([f"{title} ({len(items)}):", *(f"  {i.ref}  {i.preview()}" for i in items)])
