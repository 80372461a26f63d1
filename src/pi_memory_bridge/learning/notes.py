"""The generated profile (L3) and per-project notes (L2), written from active L1 memories only.

They are a digest, not a model's prose: every line is an active memory as stored, grouped by
kind, so nothing in them is speculation and they change exactly when the memories do. They live
apart from the user's own files: `profile.learned.md` beside `profile.md` (which recall shows
first, and which wins where they differ), and `l2/learned/<project>.md` beside the user's notes.

A generated file carries the hash of what was generated. If its text no longer matches (the user
edited it), it is never overwritten again: the edit is theirs, and status says the file is kept.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pi_memory_bridge.backends.local.learning.learned_rows import MemoryRow
from pi_memory_bridge.backends.local.learning.memories import LearnedMemories
from pi_memory_bridge.backends.local.notes import NoteFiles
from pi_memory_bridge.project import project_name

PROFILE_FILENAME = "profile.learned.md"
PROJECT_DIR = "learned"
MAX_PROFILE_CHARS = 2000
MAX_NOTE_CHARS = 6000
_MARK = re.compile(r"^<!-- pi-memory-bridge generated sha256=([0-9a-f]{64}) -->\n", re.MULTILINE)

PROFILE_SECTIONS = (
    ("preference", "Preferences"),
    ("constraint", "Rules to keep"),
    ("fact", "About the user"),
)
PROJECT_SECTIONS = (
    ("fact", "Facts"),
    ("decision", "Decisions"),
    ("pitfall", "Pitfalls"),
    ("constraint", "Rules"),
    ("preference", "Preferences here"),
)


def _digest(body: str) -> str:
    return hashlib.sha256(body.encode()).hexdigest()


def _sections(rows: Sequence[MemoryRow], sections: Sequence[tuple[str, str]], limit: int) -> list[str]:
    """Markdown lines, newest memories first within a kind, cut to `limit` characters."""
    lines: list[str] = []
    size = 0
    for kind, title in sections:
        chosen = sorted((r for r in rows if r.kind == kind), key=lambda r: r.observed_at, reverse=True)
        if not chosen:
            continue
        block = [f"## {title}"]
        for row in chosen:
            line = f"- {' '.join(row.text.split())}"
            if size + len(line) + len(block[0]) + 2 > limit:
                break
            block.append(line)
            size += len(line) + 1
        if len(block) > 1:
            lines += [*block, ""]
            size += len(block[0]) + 2
    return lines


def render_profile(rows: Sequence[MemoryRow]) -> str:
    """The learned profile from the user's active, not project-bound memories ("" if none)."""
    lines = _sections([r for r in rows if r.project is None], PROFILE_SECTIONS, MAX_PROFILE_CHARS - 120)
    if not lines:
        return ""
    return "\n".join(["# Learned profile", "", *lines]).rstrip() + "\n"


def render_project(project: str, rows: Sequence[MemoryRow]) -> str:
    lines = _sections([r for r in rows if r.project == project], PROJECT_SECTIONS, MAX_NOTE_CHARS)
    if not lines:
        return ""
    summary = "; ".join(r.text for r in rows if r.project == project)[:280]
    header = ["---", f"summary: Learned about project {project_name(project)}: {summary}", "---", ""]
    return "\n".join([*header, f"# Project {project_name(project)} ({project})", "", *lines]).rstrip() + "\n"


def _with_mark(body: str) -> str:
    # at the end: a note's front matter must stay on its first line
    return f"{body}<!-- pi-memory-bridge generated sha256={_digest(body)} -->\n"


def edited_by_hand(text: str) -> bool:
    match = _MARK.search(text)
    if match is None:
        return True  # no mark: not ours, or the mark was removed
    body = text[: match.start()] + text[match.end() :]
    return _digest(body) != match.group(1)


@dataclass(frozen=True, slots=True)
class NotesReport:
    written: tuple[str, ...]
    kept: tuple[str, ...]  # edited by hand: left as they are


def _project_file(notes: NoteFiles, project: str) -> tuple[str, Path]:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", project_name(project)).strip("-.") or "project"
    rel = f"{PROJECT_DIR}/{slug}-{hashlib.sha256(project.encode()).hexdigest()[:8]}.md"
    return notes.resolve_scenario_path(rel)


def write_generated(memories: LearnedMemories, notes: NoteFiles, root: Path) -> NotesReport:
    """Regenerate the learned profile and every project's notes; files edited by hand are kept."""
    rows = memories.active(limit=5000)
    written: list[str] = []
    kept: list[str] = []
    targets: list[tuple[str, Path, str]] = [("profile", root / PROFILE_FILENAME, render_profile(rows))]
    for project in sorted({r.project for r in rows if r.project is not None}):
        rel, path = _project_file(notes, project)
        targets.append((f"l2/{rel}", path, render_project(project, rows)))
    learned_dir = notes.l2_dir / PROJECT_DIR
    listed = {path for _, path, _ in targets}
    if learned_dir.is_dir():  # notes of projects that have no active memory left
        for stale in sorted(learned_dir.glob("*.md")):
            if stale not in listed and not stale.is_symlink():
                targets.append((f"l2/{PROJECT_DIR}/{stale.name}", stale, ""))
    for name, path, body in targets:
        current = path.read_text(encoding="utf-8", errors="replace") if path.exists() else None
        if current is not None and edited_by_hand(current):
            kept.append(name)
            continue
        new = _with_mark(body) if body else ""
        if current == new or (current is None and not body):
            continue
        if not body:
            path.unlink(missing_ok=True)  # ours, and nothing active is left to say
        else:
            notes.write_generated(path, new)
        written.append(name)
    return NotesReport(tuple(written), tuple(kept))
