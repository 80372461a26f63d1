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

The file is read as a stream (`parse_session_stream`): each entry keeps its place in the tree,
its line's offsets and the few fields deciding a turn needs, and its whole object is read again
from the open file when a turn is built from it, so memory holds one line at a time, not the file.
Nothing here raises for any content; reading an entry's `body` again raises `LogChanged` (an
OSError) when its line is no longer what it was.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

SESSION_VERSION = 3


class LogChanged(OSError):
    """A line read again is not the entry it was: the file was rewritten while being read (read
    it again on a later pass rather than guess)."""


class LineSource(Protocol):
    def read(self, start: int, end: int) -> bytes: ...


@dataclass(frozen=True, slots=True)
class BytesLines:
    data: bytes

    def read(self, start: int, end: int) -> bytes:
        return self.data[start:end]


class FileLines:
    """Lines read again from an open file by offset (Pi only appends, so they stay put), until
    `close` (then the descriptor's number may be another file's)."""

    __slots__ = ("fd",)

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def close(self) -> None:
        self.fd = -1

    def read(self, start: int, end: int) -> bytes:
        if self.fd < 0:
            raise LogChanged("the session file was closed after it was read")
        parts: list[bytes] = []
        while start < end:
            part = os.pread(self.fd, end - start, start)
            if not part:
                raise LogChanged("the session file became shorter while it was read")
            parts.append(part)
            start += len(part)
        return b"".join(parts)


@dataclass(frozen=True, slots=True)
class LogEntry:
    """One entry's place in the tree and what deciding a turn needs; its whole JSON object
    (`body`) is read again from the file when asked for, so a large file is never held whole."""

    id: str
    parent_id: str | None
    type: str
    start: int  # byte offset of its line
    end: int  # byte offset just after its "\n"
    role: str | None = None  # its message's role
    message_timestamp: int | None = None  # its message's own timestamp (ms), as a live run's copy has
    stop_reason: str | None = None  # its message's stopReason
    timestamp: object = None  # the entry's `timestamp`: when Pi appended it
    target_id: str | None = None  # a context_edit's targetId
    drops_target: bool = False  # a context_edit whose replacement is null
    source: LineSource = field(default=BytesLines(b""), compare=False, repr=False)

    @property
    def body(self) -> Mapping[str, object]:
        """The whole JSON object of the line."""
        obj = _object(self.source.read(self.start, self.end - 1))
        if obj is None or obj.get("id") != self.id:
            raise LogChanged("a session file line changed while it was read")
        return obj

    @property
    def message(self) -> object:
        return self.body.get("message")

    @property
    def is_user_message(self) -> bool:
        return self.type == "message" and self.role == "user"

    @property
    def written_at(self) -> datetime | None:
        """The entry's `timestamp`: when Pi appended it (copied along when a fork copies it)."""
        return parse_iso(self.timestamp)


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


def _entry(obj: dict[str, object] | None, start: int, end: int, source: LineSource) -> LogEntry | None:
    if obj is None:
        return None
    entry_id, parent_id, entry_type = obj.get("id"), obj.get("parentId"), obj.get("type")
    if not (isinstance(entry_id, str) and entry_id and isinstance(entry_type, str) and entry_type):
        return None
    if parent_id is not None and not isinstance(parent_id, str):
        return None
    message = obj.get("message")
    role = stop_reason = None
    message_timestamp = None
    if isinstance(message, dict):
        role = message.get("role") if isinstance(message.get("role"), str) else None
        stop_reason = message.get("stopReason") if isinstance(message.get("stopReason"), str) else None
        value = message.get("timestamp")
        message_timestamp = value if isinstance(value, int) and not isinstance(value, bool) else None
    target = obj.get("targetId")
    return LogEntry(
        entry_id,
        parent_id,
        entry_type,
        start,
        end,
        role,
        message_timestamp,
        stop_reason,
        obj.get("timestamp"),
        target if isinstance(target, str) else None,
        "replacement" in obj and obj["replacement"] is None,
        source,
    )


def parse_session_log(data: bytes) -> SessionLog | Unreadable:
    """The session in `data` (a file's bytes from offset 0), complete lines only."""
    return parse_session_stream((data,), BytesLines(data))


def _lines(chunks: Iterable[bytes]) -> Iterable[tuple[bytes, int, int]]:
    """(line without its "\\n", start, end) of every complete line, the chunks read one by one: only
    the line being read is held (a line is searched for its end once, however many chunks it spans)."""
    pending = bytearray()
    base = 0  # offset of pending[0] in the file
    for chunk in chunks:
        searched = len(pending)
        pending += chunk
        position = 0
        while True:
            newline = pending.find(b"\n", max(position, searched))
            if newline < 0:
                break
            yield bytes(pending[position:newline]), base + position, base + newline + 1
            position = newline + 1
        del pending[:position]
        base += position


def parse_session_stream(chunks: Iterable[bytes], source: LineSource) -> SessionLog | Unreadable:
    """The session read from `chunks` (a file's bytes from offset 0, in order), complete lines
    only; each entry keeps where its line is in `source`, not its content."""
    header: dict[str, object] | None = None
    parsed: tuple[str, datetime | None, str | None] | None = None
    entries: list[LogEntry] = []
    malformed = 0
    complete = 0
    for line, start, end in _lines(chunks):
        complete = end
        if not line.strip():
            continue
        obj = _object(line)
        if parsed is None:
            found = _header(obj)
            if isinstance(found, Unreadable):
                return found
            header, parsed = obj, found
            continue
        entry = _entry(obj, start, end, source)
        if entry is None:
            malformed += 1
        else:
            entries.append(entry)
    if parsed is None or header is None:
        return Unreadable("no complete session header yet", transient=True)
    session_id, created_at, parent = parsed
    cwd = header.get("cwd")
    project_dir = cwd if isinstance(cwd, str) else None
    return SessionLog(session_id, created_at, parent, tuple(entries), complete, malformed, project_dir)
