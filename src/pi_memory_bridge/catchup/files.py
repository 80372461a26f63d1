"""Finding Pi's session files and reading one of them against its watermark (blocking I/O).

`scan_file` reads the whole file as a stream (the tree above a new turn decides its branch
identity; only the entries' places are kept, see `reader`), but only the user messages at or after
the watermark's offset become turns; an unchanged file (same
device, inode, size and modification time as when it was last read) is not read at all.
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from pi_memory_bridge.catchup.reader import FileLines, LogEntry, SessionLog, Unreadable, parse_session_stream
from pi_memory_bridge.catchup.segments import Captured, LogTurns, Open, Skipped, log_turns
from pi_memory_bridge.catchup.state import Mark, StoredMark

SESSIONS_DIR = "sessions"
MAX_FILE_BYTES = 256 * 1024 * 1024  # a session file larger than this is reported, not read


@dataclass(frozen=True, slots=True)
class FileStat:
    dev: int
    ino: int
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, st: os.stat_result) -> FileStat:
        return cls(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)

    def same_as(self, mark: StoredMark) -> bool:
        return (self.dev, self.ino, self.size, self.mtime_ns) == mark.stat_key


def sessions_dir(agent_dir: Path) -> Path:
    return agent_dir / SESSIONS_DIR


def session_files(root: Path) -> Iterator[tuple[Path, FileStat]]:
    """`root/*.jsonl` and `root/*/*.jsonl` (Pi's layout is `sessions/--<cwd>--/<file>.jsonl`),
    regular files only (a symlink may point anywhere)."""
    try:
        top = list(os.scandir(root))
    except OSError:
        return
    for item in top:
        if item.is_dir(follow_symlinks=False):
            try:
                inner = list(os.scandir(item.path))
            except OSError:
                continue
            for leaf in inner:
                found = _session_file(leaf)
                if found is not None:
                    yield found
        else:
            found = _session_file(item)
            if found is not None:
                yield found


def _session_file(item: os.DirEntry[str]) -> tuple[Path, FileStat] | None:
    if not item.name.endswith(".jsonl") or not item.is_file(follow_symlinks=False):
        return None
    try:
        return Path(item.path), FileStat.of(item.stat(follow_symlinks=False))
    except OSError:
        return None


@dataclass(frozen=True, slots=True)
class FileScan:
    path: Path
    stat: FileStat
    session_id: str | None
    turns: LogTurns
    mark: Mark | None  # the watermark to store once the captured turns are queued
    bytes_read: int
    unreadable: str | None = None

    @property
    def captured(self) -> tuple[Captured, ...]:
        return self.turns.captured


_CHUNK_BYTES = 1 << 20


@contextlib.contextmanager
def open_session(
    path: Path, max_bytes: int = MAX_FILE_BYTES
) -> Iterator[tuple[FileStat, SessionLog | Unreadable, int]]:
    """(stat, parsed log, bytes read) of a session file, read as a stream up to its size when
    opened; the file stays open inside the block, where entries' bodies are read again from it.

    O_NONBLOCK: a FIFO swapped in for the file after the scan would block the open until a
    writer came; opened at once instead, it is refused as not a regular file."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        file_stat = FileStat.of(st)
        if not stat.S_ISREG(st.st_mode):
            yield file_stat, Unreadable("not a regular file"), 0
            return
        if st.st_size > max_bytes:
            mib = st.st_size // (1024 * 1024)
            yield file_stat, Unreadable(f"too large to read ({mib} MiB)"), 0
            return
        read = 0

        def chunks() -> Iterator[bytes]:
            nonlocal read
            while read < st.st_size:
                chunk = os.read(fd, min(st.st_size - read, _CHUNK_BYTES))
                if not chunk:
                    return  # truncated while reading: what was read is still complete lines or not
                read += len(chunk)
                yield chunk

        lines = FileLines(fd)
        try:
            yield file_stat, parse_session_stream(chunks(), lines), read
        finally:
            lines.close()
    finally:
        os.close(fd)


def _resume_offset(mark: Mark | None, file_stat: FileStat, log: SessionLog) -> int:
    """Where the decided part ends, if the file still holds the bytes that were decided."""
    if mark is None or (mark.dev, mark.ino) != (file_stat.dev, file_stat.ino):
        return 0
    if mark.session_id != log.session_id or mark.offset > log.complete_bytes:
        return 0
    if mark.boundary_end == 0:
        return mark.offset
    for entry in log.entries:
        if entry.end == mark.boundary_end:
            return mark.offset if entry.id == mark.boundary_id else 0
        if entry.end > mark.boundary_end:
            break
    return 0


PAUSED_REASON = "paused-project"
# (the session's working directory, when the turn was said in epoch ms) -> said while paused?
PausedCheck = Callable[[str | None, int | None], bool]


def _said_at_ms(entry: LogEntry) -> int | None:
    if entry.message_timestamp is not None:
        return entry.message_timestamp
    written = entry.written_at
    return int(written.timestamp() * 1000) if written is not None else None


def _paused_turns(turns: LogTurns, cwd: str | None, paused: PausedCheck) -> LogTurns:
    """Turns said while their project was paused: decided as skipped, so none is captured now or
    after a resume (what was said while paused stays unremembered, as on the live path)."""
    return LogTurns(
        tuple(
            Skipped(o.user_entry, (PAUSED_REASON,))
            if not isinstance(o, Open) and paused(cwd, _said_at_ms(o.user_entry))
            else o
            for o in turns.outcomes
        )
    )


def never_paused(_cwd: str | None, _said_at_ms: int | None) -> bool:
    return False


def scan_file(
    path: Path,
    mark: Mark | None,
    *,
    since_ms: int | None,
    max_bytes: int = MAX_FILE_BYTES,
    paused: PausedCheck = never_paused,
) -> FileScan:
    """The turns of `path` not decided yet (all of them without a `mark`), said at or after
    `since_ms`, and the watermark that records them as decided. Raises OSError when the file
    cannot be opened (gone, permissions)."""
    with open_session(path, max_bytes) as (file_stat, log, size):
        if isinstance(log, Unreadable):
            return FileScan(path, file_stat, None, LogTurns(()), None, size, log.reason)
        start = _resume_offset(mark, file_stat, log)
        turns = log_turns(log, from_offset=start, since_ms=since_ms)
        turns = _paused_turns(turns, log.cwd, paused)
    offset = min((o.user_entry.start for o in turns.open), default=log.complete_bytes)
    boundary = None
    for entry in log.entries:
        if entry.end > offset:
            break
        boundary = entry
    new_mark = Mark(
        path=str(path),
        dev=file_stat.dev,
        ino=file_stat.ino,
        session_id=log.session_id,
        offset=offset,
        boundary_id=boundary.id if boundary is not None else None,
        boundary_end=boundary.end if boundary is not None else 0,
        size=file_stat.size,
        mtime_ns=file_stat.mtime_ns,
        open_turns=len(turns.open),
        updated_at=time.time(),
    )
    return FileScan(path, file_stat, log.session_id, turns, new_mark, size)
