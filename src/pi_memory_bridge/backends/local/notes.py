"""L2 scenario notes (Markdown files under `l2/`) and the L3 profile (`profile.md`).

The files are the source of truth, so a user can read and edit them with any editor. Listing
tolerates what editors and users leave behind (unreadable files, broken links, binary junk):
such a file is skipped and reported, never fatal. Reading by path refuses anything that would
leave `l2/`: `..`, absolute paths, and symlinks whose target lies outside.
"""

from __future__ import annotations

import codecs
import os
import re
import tempfile
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath

from pi_memory_bridge.backends.base import (
    BackendCorrupt,
    BackendRejected,
    BackendUnavailable,
    Profile,
    ScenarioEntry,
    ScenarioNote,
)
from pi_memory_bridge.private_files import ensure_private_dir

MAX_NOTE_BYTES = 1 << 20  # a longer note or profile is read up to here
SUMMARY_SCAN_BYTES = 16_384
MAX_SUMMARY_CHARS = 300

_SUMMARY_LINE = re.compile(r"summary\s*:\s*(.*)", re.IGNORECASE)
# The profile generated from learned memories (learning/notes.py) sits beside the user's own.
LEARNED_PROFILE = "profile.learned.md"
_GENERATED_MARK = re.compile(r"^<!-- pi-memory-bridge generated sha256=[0-9a-f]{64} -->\n?", re.MULTILINE)


def summarize(text: str) -> str:
    """A note's summary: its front-matter `summary:` line, else its first heading or paragraph."""
    lines = text.splitlines()
    body_start = 0
    if lines and lines[0].strip() == "---":
        for index, line in enumerate(lines[1:], start=1):
            if line.strip() in ("---", "..."):
                body_start = index + 1
                break
            found = _SUMMARY_LINE.fullmatch(line.rstrip())
            if found and (value := found.group(1).strip().strip("\"'").strip()):
                return value[:MAX_SUMMARY_CHARS]
    paragraph: list[str] = []
    for line in lines[body_start:]:
        stripped = line.strip()
        if not stripped:
            if paragraph:
                break
            continue
        if stripped.startswith("#"):
            if paragraph:
                break
            if heading := stripped.lstrip("#").strip():
                return heading[:MAX_SUMMARY_CHARS]
            continue
        paragraph.append(stripped)
    return " ".join(paragraph)[:MAX_SUMMARY_CHARS]


def _decode_prefix(data: bytes, limit: int) -> str:
    """Decode UTF-8, dropping a character cut in half at `limit`; other bad bytes still raise."""
    if len(data) <= limit:
        return data.decode("utf-8")
    return codecs.getincrementaldecoder("utf-8")().decode(data[:limit], final=False)


def _read_prefix(path: Path, limit: int) -> bytes:
    with path.open("rb") as handle:
        return handle.read(limit + 1)


def _write_atomically(path: Path, content: str) -> None:
    """Write via a temporary file and rename, so readers see the old or the new note, whole."""
    ensure_private_dir(path.parent)
    fd, temp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(content.encode("utf-8"))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp_name, path)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


@dataclass(frozen=True, slots=True)
class ScenarioListing:
    entries: list[ScenarioEntry]
    problems: list[str]  # one line per skipped file or directory


@dataclass(frozen=True, slots=True)
class _CachedSummary:
    mtime_ns: int
    size: int
    summary: str


class NoteFiles:
    """The Markdown side of the local store, rooted at the store directory."""

    def __init__(self, root: Path) -> None:
        self.l2_dir = root / "l2"
        self.profile_path = root / "profile.md"
        self.learned_profile_path = root / LEARNED_PROFILE
        # Recall lists the notes on every prompt; unchanged files are not read again.
        self._summaries: dict[str, _CachedSummary] = {}
        self._lock = threading.Lock()

    # --- L2 -----------------------------------------------------------------------------------

    def list_scenarios(self) -> ScenarioListing:
        entries: list[ScenarioEntry] = []
        problems: list[str] = []
        if not self.l2_dir.is_dir():
            return ScenarioListing(entries, problems)
        real_root = self.l2_dir.resolve()

        def walk_error(exc: OSError) -> None:
            problems.append(f"l2: cannot list {exc.filename}: {exc.strerror or exc}")

        for directory, subdirs, files in os.walk(self.l2_dir, onerror=walk_error):
            subdirs[:] = sorted(d for d in subdirs if not d.startswith("."))
            for name in sorted(files):
                if name.startswith(".") or not name.lower().endswith(".md"):
                    continue
                full = Path(directory) / name
                rel = full.relative_to(self.l2_dir).as_posix()
                try:
                    entries.append(self._entry(full, rel, real_root))
                # RuntimeError: a symlink loop, as `Path.resolve` says it before Python 3.13
                except (OSError, UnicodeError, ValueError, RuntimeError) as exc:
                    problems.append(f"l2/{rel}: skipped ({exc})")
        return ScenarioListing(entries, problems)

    def _entry(self, full: Path, rel: str, real_root: Path) -> ScenarioEntry:
        if full.is_symlink() and not full.resolve().is_relative_to(real_root):
            raise ValueError("symlink points outside l2/")
        info = full.stat()
        updated = datetime.fromtimestamp(info.st_mtime, tz=UTC)
        with self._lock:
            cached = self._summaries.get(rel)
        if cached is None or (cached.mtime_ns, cached.size) != (info.st_mtime_ns, info.st_size):
            head = _read_prefix(full, SUMMARY_SCAN_BYTES)[:SUMMARY_SCAN_BYTES]
            if b"\x00" in head:
                raise ValueError("not a text file")
            cached = _CachedSummary(
                info.st_mtime_ns, info.st_size, summarize(head.decode("utf-8", errors="replace"))
            )
            with self._lock:
                self._summaries[rel] = cached
        return ScenarioEntry(path=rel, summary=cached.summary, updated_at=updated)

    def resolve_scenario_path(self, path: str) -> tuple[str, Path]:
        """The canonical relative path and the file for `path`; BackendRejected if unsafe."""
        if not path or "\x00" in path or "\\" in path:
            raise BackendRejected(f"invalid scenario path {path!r}")
        pure = PurePosixPath(path)
        if pure.is_absolute() or ".." in pure.parts:
            raise BackendRejected(f"scenario path {path!r} escapes l2/")
        if pure.suffix.lower() != ".md" or any(part.startswith(".") for part in pure.parts):
            raise BackendRejected(f"scenario path {path!r} is not a Markdown note (*.md)")
        candidate = self.l2_dir / pure
        try:
            resolved = candidate.resolve()
        except (OSError, RuntimeError) as exc:  # a symlink loop (RuntimeError before Python 3.13)
            raise BackendRejected(f"scenario path {path!r} cannot be resolved: {exc}") from None
        if not resolved.is_relative_to(self.l2_dir.resolve()):
            raise BackendRejected(f"scenario path {path!r} escapes l2/ through a symlink")
        return pure.as_posix(), candidate

    def read_scenario(self, path: str) -> ScenarioNote:
        rel, full = self.resolve_scenario_path(path)
        try:
            data = _read_prefix(full, MAX_NOTE_BYTES)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise BackendRejected(f"no scenario note l2/{rel}") from None
        except OSError as exc:
            raise BackendUnavailable(f"cannot read scenario note l2/{rel}: {exc}") from exc
        content = codecs.getincrementaldecoder("utf-8")(errors="replace").decode(
            data[:MAX_NOTE_BYTES], final=len(data) <= MAX_NOTE_BYTES
        )
        return ScenarioNote(path=rel, summary=summarize(content), content=content)

    def write_scenario(self, path: str, content: str) -> ScenarioEntry:
        """Create or replace a note atomically; the parent folders are created as needed."""
        rel, full = self.resolve_scenario_path(path)
        try:
            _write_atomically(full, content)
            updated = datetime.fromtimestamp(full.stat().st_mtime, tz=UTC)
        except OSError as exc:
            raise BackendUnavailable(f"cannot write scenario note l2/{rel}: {exc}") from exc
        return ScenarioEntry(path=rel, summary=summarize(content), updated_at=updated)

    # --- L3 -----------------------------------------------------------------------------------

    def read_profile(self) -> Profile | None:
        """The profile, or None when there is none (no file, or only whitespace in it).

        The user's `profile.md` comes first; the one learned from memories follows, marked as
        such, so that the user's own words win where the two differ."""
        own = self._read_profile_file(self.profile_path)
        learned = self._read_profile_file(self.learned_profile_path)
        if learned is not None:
            learned = _GENERATED_MARK.sub("", learned).strip()
        if own is None and not learned:
            return None
        if not learned:
            return Profile(content=own or "", path=str(self.profile_path))
        note = "(learned from earlier sessions; where it differs from the profile above, that one holds)"
        content = learned if own is None else f"{own.rstrip()}\n\n{note}\n{learned}"
        return Profile(
            content=content, path=str(self.profile_path if own is not None else self.learned_profile_path)
        )

    @staticmethod
    def _read_profile_file(path: Path) -> str | None:
        try:
            data = _read_prefix(path, MAX_NOTE_BYTES)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise BackendUnavailable(f"cannot read the profile {path}: {exc}") from exc
        try:
            content = _decode_prefix(data, MAX_NOTE_BYTES)
        except UnicodeDecodeError as exc:
            raise BackendCorrupt(
                f"the profile {path} is not valid UTF-8 text ({exc.reason} at byte {exc.start})"
            ) from exc
        return content if content.strip() else None

    def write_generated(self, path: Path, content: str) -> None:
        """Write a generated file (the learned profile, a learned note) atomically."""
        try:
            _write_atomically(path, content)
        except OSError as exc:
            raise BackendUnavailable(f"cannot write {path}: {exc}") from exc

    def write_profile(self, content: str) -> None:
        try:
            _write_atomically(self.profile_path, content)
        except OSError as exc:
            raise BackendUnavailable(f"cannot write the profile {self.profile_path}: {exc}") from exc
