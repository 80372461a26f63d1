"""Pi's session files as written on disk (JSONL, session format version 3), read fail-closed.

Pi 0.84.4 and 1.6.0 both write `<agent-dir>/sessions/--<cwd>--/<time>_<session id>.jsonl`: a header
line `{type:"session", version:3, id, timestamp, cwd, parentSession?}`, then one entry per line,
each `{type, id, parentId, timestamp, ...}`, appended with one write per entry (the file is only
rewritten whole on a migration or when a branch is copied into a new file).

Reading rules, so that a file being written, torn or replaced never yields a guess:

* only complete lines count: a last line without its `\\n` is an entry still being written (or torn
  by a crash: Pi repairs it with a `\\n` when it opens the file again), read on a later pass;
* the first non-blank line must be a version-3 session header with a string id, otherwise the
  whole file is unreadable (another format, or a newer one this reader does not know);
* a line that is not a JSON object with a string `id`, a string or null `parentId` and a string
  `type` is counted as malformed and left out, as Pi itself skips it; the entries that hung from
  it are then unreachable from their user message, and what cannot be paired is not captured.

Nothing here raises for any content; `parse_session_log` is pure.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

SESSION_VERSION = 3


@dataclass(frozen=True, slots=True)
class LogEntry:
    id: str
    parent_id: str | None
    type: str
    body: Mapping[str, object]  # the whole JSON object of the line
    start: int  # byte offset of its line
    end: int  # byte offset just after its "\n"

    @property
    def message(self) -> object:
        return self.body.get("message")

    @property
    def role(self) -> str | None:
        message = self.message
        role = message.get("role") if isinstance(message, dict) else None
        return role if isinstance(role, str) else None

    @property
    def is_user_message(self) -> bool:
        return self.type == "message" and self.role == "user"

    @property
    def message_timestamp(self) -> int | None:
        """The message's own timestamp (ms), which a live run's copy of the message carries too."""
        message = self.message
        value = message.get("timestamp") if isinstance(message, dict) else None
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    @property
    def written_at(self) -> datetime | None:
        """The entry's `timestamp`: when Pi appended it (copied along when a fork copies it)."""
        return parse_iso(self.body.get("timestamp"))


@dataclass(frozen=True, slots=True)
class SessionLog:
    session_id: str
    created_at: datetime | None  # the header's timestamp
    parent_session: str | None  # set for a /fork or /clone: the entries up to the fork were copied
    entries: tuple[LogEntry, ...]
    complete_bytes: int  # the bytes that form complete lines; the rest is read on a later pass
    malformed_lines: int
    cwd: str | None = None  # the header's working directory: which project the session is in


@dataclass(frozen=True, slots=True)
class Unreadable:
    reason: str
    # True when the file may become readable as Pi writes on (no complete header line yet)
    transient: bool = False


def parse_iso(value: object) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else None


def _object(line: bytes) -> dict[str, object] | None:
    try:
        value = json.loads(line)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _header(obj: dict[str, object] | None) -> tuple[str, datetime | None, str | None] | Unreadable:
    if obj is None or obj.get("type") != "session":
        return Unreadable("the first line is not a Pi session header")
    session_id = obj.get("id")
    if not isinstance(session_id, str) or not session_id:
        return Unreadable("the session header has no id")
    version = obj.get("version")
    if version != SESSION_VERSION or isinstance(version, bool):
        # Pi upgrades older files when it opens them; a newer format is not guessed at
        return Unreadable(f"session format version {version!r} is not supported (only {SESSION_VERSION})")
    parent = obj.get("parentSession")
    return session_id, parse_iso(obj.get("timestamp")), parent if isinstance(parent, str) and parent else None


def _entry(obj: dict[str, object] | None, start: int, end: int) -> LogEntry | None:
    if obj is None:
        return None
    entry_id, parent_id, entry_type = obj.get("id"), obj.get("parentId"), obj.get("type")
    if not (isinstance(entry_id, str) and entry_id and isinstance(entry_type, str) and entry_type):
        return None
    if parent_id is not None and not isinstance(parent_id, str):
        return None
    return LogEntry(entry_id, parent_id, entry_type, obj, start, end)


def parse_session_log(data: bytes) -> SessionLog | Unreadable:
    """The session in `data` (a file's bytes from offset 0), complete lines only."""
    complete = data.rfind(b"\n") + 1
    header: tuple[str, datetime | None, str | None] | None = None
    entries: list[LogEntry] = []
    malformed = 0
    start = 0
    while start < complete:
        end = data.index(b"\n", start) + 1
        line = data[start : end - 1]
        if line.strip():
            obj = _object(line)
            if header is None:
                parsed = _header(obj)
                if isinstance(parsed, Unreadable):
                    return parsed
                header = parsed
            else:
                entry = _entry(obj, start, end)
                if entry is None:
                    malformed += 1
                else:
                    entries.append(entry)
        start = end
    if header is None:
        return Unreadable("no complete session header yet", transient=True)
    session_id, created_at, parent = header
    first = _object(data[: data.index(b"\n")]) if complete else None
    cwd = first.get("cwd") if first is not None else None
    project_dir = cwd if isinstance(cwd, str) else None
    return SessionLog(session_id, created_at, parent, tuple(entries), complete, malformed, project_dir)
