"""Export everything memory holds (Markdown to read, JSON to keep or move) and import that JSON.

The JSON (`ExportFile`) is the import format: what `pi-memory-bridge export --json` writes,
`pi-memory-bridge import FILE.json` reads. Importing is additive and never overwrites: memories
are saved like any other (duplicates are recognised), turns are stored under their own ids (a
second import stores nothing twice), a note or profile is written only where there is none yet.
Everything read from the file is validated strictly and redacted again before it is stored.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from pi_memory_bridge.backends.base import (
    AtomicType,
    BackendError,
    Capability,
    ConversationTurn,
    MemoryBackend,
    NoteWriter,
)
from pi_memory_bridge.operations import memory_view as view
from pi_memory_bridge.operations.memory_view import MemoryItem
from pi_memory_bridge.plural import counted

EXPORT_FORMAT: Final = "pi-memory-bridge-export"
EXPORT_VERSION: Final = 1
EXPORT_LIMIT = 200  # per page of the backend; export pages through everything
MAX_EXPORT_ITEMS = 100_000


class _Json(BaseModel):
    model_config = ConfigDict(
        strict=True, extra="forbid", frozen=True, alias_generator=to_camel, validate_by_name=True,
        validate_by_alias=True, serialize_by_alias=True,
    )  # fmt: skip


class ItemJson(_Json):
    """One item as `list`, `show`, `search` and `export` print it."""

    ref: str
    layer: Literal["L1", "L0", "L2", "L3"]
    id: str
    kind: str
    text: str
    created_at: str | None
    updated_at: str | None
    source: str


class NoteJson(_Json):
    path: str = Field(min_length=1, max_length=1000)
    summary: str = ""
    content: str = Field(max_length=1 << 20)


class MemoryJson(_Json):
    id: str = Field(max_length=200)
    kind: AtomicType
    text: str = Field(min_length=1, max_length=16_384)
    created_at: str | None = None
    source: str = Field(default="", max_length=200)


class TurnJson(_Json):
    id: str = Field(min_length=1, max_length=200)
    session_id: str = Field(min_length=1, max_length=200)
    user: str = Field(max_length=200_000)
    assistant: str = Field(max_length=200_000)
    created_at: str


class ExportFile(_Json):
    format: Literal["pi-memory-bridge-export"]
    version: Literal[1]
    exported_at: str
    backend: str
    profile: str | None
    memories: list[MemoryJson]
    notes: list[NoteJson]
    conversation: list[TurnJson]


def item_json(item: MemoryItem) -> ItemJson:
    return ItemJson.model_validate(item.to_json())


async def _all_memories(backend: MemoryBackend) -> list[MemoryItem]:
    found: list[MemoryItem] = []
    while len(found) < MAX_EXPORT_ITEMS:
        page = await view.memories(backend, limit=EXPORT_LIMIT, offset=len(found))
        found += page
        if len(page) < EXPORT_LIMIT:
            break
    return found


async def _all_turns(backend: MemoryBackend) -> list[ConversationTurn]:
    if Capability.L0_LIST not in backend.capabilities:
        return []
    found: list[ConversationTurn] = []
    while len(found) < MAX_EXPORT_ITEMS:
        page = await backend.conversation.list(EXPORT_LIMIT, len(found))
        found += [
            ConversationTurn(h.turn_id, h.memory_session_id, h.user_text, h.assistant_text, h.created_at)
            for h in page
        ]
        if len(page) < EXPORT_LIMIT:
            break
    return found


async def export_memory(backend: MemoryBackend, *, now: datetime | None = None) -> ExportFile:
    clean = view.redacted
    profile = await view.profile(backend)
    notes: list[NoteJson] = []
    if Capability.L2_SCENARIOS in backend.capabilities:
        for entry in await backend.notes.list_scenarios():
            note = await backend.notes.read_scenario(entry.path)
            notes.append(NoteJson(path=note.path, summary=clean(note.summary), content=clean(note.content)))
    return ExportFile(
        format=EXPORT_FORMAT,
        version=EXPORT_VERSION,
        exported_at=(now or datetime.now(UTC)).isoformat(),
        backend=backend.name,
        profile=profile.text if profile else None,
        memories=[
            MemoryJson(
                id=m.id,
                kind=AtomicType(m.kind) if m.kind in set(AtomicType) else AtomicType.FACT,
                text=m.text,
                created_at=m.created_at.isoformat() if m.created_at else None,
                source=m.source,
            )
            for m in await _all_memories(backend)
        ],
        notes=notes,
        conversation=[
            TurnJson(
                id=t.turn_id,
                session_id=t.memory_session_id,
                user=clean(t.user_text),
                assistant=clean(t.assistant_text),
                created_at=t.created_at.isoformat(),
            )
            for t in await _all_turns(backend)
        ],
    )


def export_markdown(export: ExportFile) -> str:
    lines = [f"# What pi-memory-bridge remembers ({export.exported_at[:10]}, {export.backend} backend)", ""]
    lines += ["## Profile", "", export.profile.strip() if export.profile else "_No profile yet._", ""]
    lines += ["## Memories", ""]
    if not export.memories:
        lines += ["_None yet._", ""]
    for kind in AtomicType:
        of_kind = [m for m in export.memories if m.kind == kind]
        if of_kind:
            lines += [f"### {view.kind_label(kind.value, len(of_kind))}", ""]
            lines += [f"- {' '.join(m.text.split())} `{m.id}`" for m in of_kind] + [""]
    lines += ["## Notes", ""]
    if not export.notes:
        lines += ["_None yet._", ""]
    for note in export.notes:
        lines += [f"### {note.path}", "", note.content.strip(), ""]
    lines += ["## Conversation", ""]
    if not export.conversation:
        lines += ["_None stored._", ""]
    for turn in export.conversation:
        lines += [f"### {turn.created_at[:16].replace('T', ' ')} `{turn.id}`", ""]
        lines += [f"**You:** {turn.user.strip()}", "", f"**Pi:** {turn.assistant.strip()}", ""]
    return "\n".join(lines).rstrip() + "\n"


@dataclass
class ImportReport:
    memories_added: int = 0
    memories_known: int = 0
    turns_added: int = 0
    turns_known: int = 0
    notes_added: int = 0
    notes_kept: int = 0  # already there: the existing note stays
    profile: str = "absent in the file"
    failures: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        out = [
            f"memories: {self.memories_added} added, {self.memories_known} already known",
            f"conversation: {self.turns_added} added, {self.turns_known} already stored",
            f"notes: {self.notes_added} added, {self.notes_kept} kept as they were",
            f"profile: {self.profile}",
        ]
        return out + [f"FAILED  {f}" for f in self.failures]


def preview_import(data: ExportFile) -> str:
    return (
        f"{counted(len(data.memories), 'memory')}, {counted(len(data.conversation), 'conversation turn')}, "
        f"{counted(len(data.notes), 'note')}{', a profile' if data.profile else ''} "
        f"(exported {data.exported_at[:10]} from the {data.backend} backend)"
    )


def _when(text: str) -> datetime:
    parsed = datetime.fromisoformat(text)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


async def import_memory(backend: MemoryBackend, data: ExportFile) -> ImportReport:
    report = ImportReport()
    clean = view.redacted
    if data.memories and Capability.L1_SAVE not in backend.capabilities:
        report.failures.append(f"memories: the {backend.name} backend cannot save memories directly")
    elif data.memories:
        for memory in data.memories:
            try:
                saved = await backend.memories.save(clean(memory.text), memory.kind.value, "import")
            except BackendError as exc:
                report.failures.append(f"memory {memory.id}: {clean(str(exc))}")
                continue
            if saved.created:
                report.memories_added += 1
            else:
                report.memories_known += 1
    if data.conversation:
        await _import_turns(backend, data, report)
    writer = backend.notes if isinstance(backend.notes, NoteWriter) else None
    if (data.notes or data.profile) and writer is None:
        report.failures.append(f"notes and profile: the {backend.name} backend keeps them on its server")
        return report
    if writer is None:
        return report
    existing = {e.path for e in await backend.notes.list_scenarios()} if data.notes else set()
    for note in data.notes:
        if note.path in existing:
            report.notes_kept += 1
            continue
        try:
            await asyncio.to_thread(writer.write_scenario, note.path, clean(note.content))
            report.notes_added += 1
        except (BackendError, OSError) as exc:
            report.failures.append(f"note {note.path}: {clean(str(exc))}")
    if data.profile:
        try:
            current = await view.profile(backend)
            if current is not None:
                report.profile = "kept the existing one"
            else:
                await asyncio.to_thread(writer.write_profile, clean(data.profile))
                report.profile = "added"
        except (BackendError, OSError) as exc:  # what was imported above must still be reported
            report.profile = "not imported"
            report.failures.append(f"profile: {clean(str(exc))}")
    return report


async def _import_turns(backend: MemoryBackend, data: ExportFile, report: ImportReport) -> None:
    if Capability.L0_ADD not in backend.capabilities:
        report.failures.append(f"conversation: the {backend.name} backend cannot store turns")
        return
    clean = view.redacted
    try:
        turns = [
            ConversationTurn(t.id, t.session_id, clean(t.user), clean(t.assistant), _when(t.created_at))
            for t in data.conversation
        ]
    except ValueError as exc:
        report.failures.append(f"conversation: a timestamp is not ISO 8601 ({exc})")
        return
    try:
        known = await backend.conversation.stored_ids([t.turn_id for t in turns])
        await backend.conversation.add([t for t in turns if t.turn_id not in known])
    except BackendError as exc:
        report.failures.append(f"conversation: {clean(str(exc))}")
        return
    report.turns_known = len(known)
    report.turns_added = len(turns) - len(known)
