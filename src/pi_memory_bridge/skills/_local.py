"""What we synced before: the ownership record in each skill directory, and local-edit detection.

A directory under `<agent-dir>/skills/` is ours only if it holds `.pi-memory-bridge.json` naming
the server skill and the sha256 of every file we wrote. A directory without one belongs to the
user and is never touched. A directory with one whose files no longer match (changed, missing or
added) was edited locally: a sync must ask before replacing it.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pi_memory_bridge.skills._bundle import RECORD_FILE

MAX_RECORD_BYTES = 256 * 1024


class OwnershipRecord(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    format: int = Field(default=1, ge=1, le=1)
    server_skill_id: str = Field(min_length=1)
    server_name: str
    version: int
    synced_at: datetime
    files: dict[str, str]  # relative path -> sha256 hex of the bytes written


@dataclass(frozen=True, slots=True)
class SyncedSkill:
    dir_name: str
    record: OwnershipRecord
    edited: tuple[str, ...]  # paths that differ from what we wrote (changed, missing, added)


@dataclass(frozen=True, slots=True)
class LocalSkills:
    synced: tuple[SyncedSkill, ...]
    taken: frozenset[str]  # every entry name in the skills directory (ours or not)

    def by_server_id(self) -> dict[str, SyncedSkill]:
        found: dict[str, SyncedSkill] = {}
        for skill in sorted(self.synced, key=lambda s: s.dir_name):
            found.setdefault(skill.record.server_skill_id, skill)
        return found


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def read_record(skill_dir: Path) -> OwnershipRecord | None:
    path = skill_dir / RECORD_FILE
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_RECORD_BYTES:
            return None
        return OwnershipRecord.model_validate_json(path.read_bytes())
    except (OSError, ValidationError):
        return None


def _current_files(skill_dir: Path) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for root, dirs, names in os.walk(skill_dir, followlinks=False):
        dirs.sort()
        for name in names:
            full = Path(root, name)
            rel = full.relative_to(skill_dir).as_posix()
            if rel != RECORD_FILE:
                found[rel] = full
        for name in dirs:  # a symlinked directory is content we did not write
            if Path(root, name).is_symlink():
                found[Path(root, name).relative_to(skill_dir).as_posix()] = Path(root, name)
    return found


def edited_files(skill_dir: Path, record: OwnershipRecord) -> tuple[str, ...]:
    current = _current_files(skill_dir)
    changed: list[str] = []
    for rel, digest in record.files.items():
        path = current.pop(rel, None)
        try:
            if path is None or path.is_symlink() or sha256_hex(path.read_bytes()) != digest:
                changed.append(rel)
        except OSError:
            changed.append(rel)
    changed.extend(current)  # files the user added
    return tuple(sorted(changed))


def scan(skills_dir: Path) -> LocalSkills:
    try:
        entries = sorted(os.scandir(skills_dir), key=lambda e: e.name)
    except FileNotFoundError:
        return LocalSkills((), frozenset())
    synced: list[SyncedSkill] = []
    for entry in entries:
        if entry.name.startswith(".pmb-") or not entry.is_dir(follow_symlinks=False):
            continue
        record = read_record(Path(entry.path))
        if record is not None:
            synced.append(SyncedSkill(entry.name, record, edited_files(Path(entry.path), record)))
    return LocalSkills(tuple(synced), frozenset(e.name for e in entries))
