"""Correct what memory holds: an L1 memory's text or type, an L2 scenario note, the L3 profile.

One implementation for every place that edits (the inspector page, and the `/tdai-memory` view and
terminal `edit` that reuse it): checked like the save tool, redacted before anything is written,
answered with one report line in the style of forget's (`edited ...`, `unchanged ...`, `FAILED ...`).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from pydantic import ValidationError

from pi_memory_bridge.backends.base import BackendError, Capability, MemoryBackend, NoteWriter
from pi_memory_bridge.backends.data_dir import MAX_NOTE_BYTES
from pi_memory_bridge.plural import counted
from pi_memory_bridge.redact import redact_text
from pi_memory_bridge.tools.memory import SaveArgs

PREVIEW_CHARS = 140


@dataclass(frozen=True, slots=True)
class EditReport:
    ok: bool
    changed: bool
    line: str
    redactions: int = 0


def _short(text: str) -> str:
    clean = " ".join(text.split())
    return clean if len(clean) <= PREVIEW_CHARS else clean[: PREVIEW_CHARS - 1] + "…"


def _redaction_note(count: int) -> str:
    return f" ({counted(count, 'secret')} redacted)" if count else ""


def _failed(what: str, reason: str) -> EditReport:
    return EditReport(ok=False, changed=False, line=f"FAILED  {what}: {redact_text(reason).text}")


async def edit_memory(backend: MemoryBackend, memory_id: str, content: str, type: str) -> EditReport:
    """Replace L1 memory `memory_id` with `content` of kind `type` (validated, redacted)."""
    what = f"[L1 {memory_id}]"
    if Capability.L1_EDIT not in backend.capabilities:
        return _failed(what, f"the {backend.name} backend cannot edit memories")
    try:
        args = SaveArgs.model_validate({"content": content, "type": type})
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        return _failed(what, problems)
    redacted = redact_text(args.content)
    try:
        result = await backend.memories.edit(memory_id, redacted.text, args.type.value)
    except BackendError as exc:
        return _failed(what, str(exc))
    verb = "edited   " if result.changed else "unchanged"
    line = f"{verb} [L1 {args.type.value}] {_short(redacted.text)}{_redaction_note(redacted.count)}"
    return EditReport(ok=True, changed=result.changed, line=line, redactions=redacted.count)


def _note_content(content: str) -> tuple[str, int] | str:
    """The redacted text to write, or why it cannot be written."""
    text = content.replace("\r\n", "\n")
    if len(text.encode("utf-8")) > MAX_NOTE_BYTES:
        return f"too long (more than {MAX_NOTE_BYTES // 1024} KiB)"
    if "\x00" in text:
        return "contains a NUL character"
    redacted = redact_text(text)
    return redacted.text, redacted.count


async def save_scenario(backend: MemoryBackend, path: str, content: str) -> EditReport:
    """Create or replace the L2 note at `path` (relative to l2/, `*.md`)."""
    what = f"[L2 {path}]"
    notes = backend.notes
    if not isinstance(notes, NoteWriter):
        return _failed(what, f"the {backend.name} backend keeps its notes on the server")
    checked = _note_content(content)
    if isinstance(checked, str):
        return _failed(what, checked)
    text, count = checked
    try:
        entry = await asyncio.to_thread(notes.write_scenario, path, text)
    except (BackendError, OSError) as exc:
        return _failed(what, str(exc))
    return EditReport(
        ok=True, changed=True, line=f"saved    [L2 {entry.path}]{_redaction_note(count)}", redactions=count
    )


async def save_profile(backend: MemoryBackend, content: str) -> EditReport:
    """Replace the L3 profile (the user's own `profile.md`)."""
    notes = backend.notes
    if not isinstance(notes, NoteWriter):
        return _failed("[L3 profile]", f"the {backend.name} backend keeps the profile on the server")
    checked = _note_content(content)
    if isinstance(checked, str):
        return _failed("[L3 profile]", checked)
    text, count = checked
    try:
        await asyncio.to_thread(notes.write_profile, text)
    except (BackendError, OSError) as exc:
        return _failed("[L3 profile]", str(exc))
    return EditReport(
        ok=True, changed=True, line=f"saved    [L3 profile]{_redaction_note(count)}", redactions=count
    )
