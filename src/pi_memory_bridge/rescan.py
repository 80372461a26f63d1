"""Re-apply the current redaction rules to what is already stored.

Data captured before a rule existed stays unredacted unless it is looked at again. This covers
everything the bridge keeps under its data dir: the local store's L0 turns (text and tool
evidence) and L1 memories with their full-text index, the outbox's records not delivered yet
(pending, in flight, dead, and the raw text of quarantined ones), the L2 notes and the profile.

It runs on demand (`pi-memory-bridge redact --rescan`) and once after an upgrade that changed the
rules: the fingerprint of the rules that last scanned the data dir is kept in
`redaction-rules.json`, and a sidecar that finds another one re-scans in the background (one
process at a time, under `redaction-rules.lock`). Nothing is created that did not exist: a data
dir without a store has no store scanned.

Hook for the vector index: `add_rows_listener(fn)` registers `fn(RowsChanged)`, called after
each committed batch with the L0 turn ids / L1 memory ids whose text changed (re-embed them) or
that were deleted as duplicates (drop their vectors). Listeners run in the re-scan's thread.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import tempfile
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from pi_memory_bridge.backends.data_dir import (
    NoteFiles,
    RowsChanged,
    RowsListener,
    SecretsFound,
    StoreRescan,
    TableReport,
    redact_arguments,
    redact_counted,
    upgrade_store,
)
from pi_memory_bridge.outbox._records import ToolPayload, TurnPayload
from pi_memory_bridge.plural import counted
from pi_memory_bridge.redact import rules_fingerprint

__all__ = [
    "RescanReport",
    "RowsChanged",
    "add_rows_listener",
    "needs_rescan",
    "rescan",
    "rescan_if_rules_changed",
    "start_after_upgrade",
]

log = logging.getLogger(__name__)

STATE_FILE: Final = "redaction-rules.json"
LOCK_FILE: Final = "redaction-rules.lock"
STORE_FILE: Final = "memory.sqlite3"
OUTBOX_FILE: Final = "outbox.sqlite3"
MAX_NOTE_BYTES: Final = 8 << 20  # a bigger "note" is not one we wrote; it is reported, not read

_listeners: list[RowsListener] = []


def add_rows_listener(listener: RowsListener) -> None:
    """Have `listener` told about every store row a re-scan changes (see the module docstring)."""
    _listeners.append(listener)


@dataclass
class FilesReport(SecretsFound):
    scanned: int = 0
    changed: int = 0


@dataclass
class RescanReport:
    fingerprint: str
    turns: TableReport | None = None  # None: there is no local store
    atomic: TableReport | None = None
    outbox: FilesReport | None = None  # records, counted like files
    notes: FilesReport = field(default_factory=FilesReport)
    profile: FilesReport = field(default_factory=FilesReport)
    problems: list[str] = field(default_factory=list)

    @property
    def changed(self) -> int:
        parts = [self.notes.changed, self.profile.changed]
        if self.turns is not None and self.atomic is not None:
            parts += [self.turns.changed, self.atomic.changed, self.atomic.merged]
        if self.outbox is not None:
            parts.append(self.outbox.changed)
        return sum(parts)

    def render(self) -> str:
        lines = [f"redaction re-scan with rules {self.fingerprint}:"]

        def secrets(count: int, kinds: Counter[str]) -> str:
            if not count:
                return ""
            shown = ", ".join(f"{kind} {n}" for kind, n in kinds.most_common())
            return f" ({counted(count, 'secret')}: {shown})"

        if self.turns is None or self.atomic is None:
            lines.append("  local store     none")
        else:
            t, a = self.turns, self.atomic
            lines.append(
                f"  L0 turns        {t.scanned} scanned, {t.changed} changed{secrets(t.secrets, t.kinds)}"
            )
            lines.append(
                f"  L1 memories     {a.scanned} scanned, {a.changed} changed, {a.merged} merged into a "
                f"duplicate{secrets(a.secrets, a.kinds)}"
            )
            if t.changed or a.changed or a.merged:
                lines.append("                  full-text index updated, old segments merged away, WAL reset")
        if self.outbox is None:
            lines.append("  outbox          none")
        else:
            o = self.outbox
            lines.append(
                f"  outbox          {counted(o.scanned, 'record')}, "
                f"{o.changed} changed{secrets(o.secrets, o.kinds)}"
            )
        for name, files in (("L2 notes", self.notes), ("profile", self.profile)):
            lines.append(
                f"  {name:<15} {counted(files.scanned, 'file')}, {files.changed} changed"
                + secrets(files.secrets, files.kinds)
            )
        lines.extend(f"  problem: {p}" for p in self.problems)
        return "\n".join(lines)


# ---- the pieces ------------------------------------------------------------------------------------


def _scan_store(ddir: Path, report: RescanReport) -> None:
    db = ddir / STORE_FILE
    if not db.exists():
        return
    upgrade_store(db)  # the schema (and the tokenizer) up to date first
    scan = StoreRescan(db, listeners=list(_listeners))
    scan.run()
    report.turns, report.atomic = scan.turns, scan.atomic


def _scan_outbox(ddir: Path, report: RescanReport) -> None:
    if not (ddir / OUTBOX_FILE).exists():
        return
    from pi_memory_bridge.outbox import Outbox

    records = FilesReport()

    def rewrite(payload: TurnPayload) -> TurnPayload:
        tools = tuple(
            ToolPayload(
                tool_call_id=t.tool_call_id,
                tool_name=t.tool_name,
                arguments=redact_arguments(t.arguments, records),
                result=redact_counted(t.result, records),
                is_error=t.is_error,
            )
            for t in payload.tools
        )
        return payload.model_copy(
            update={
                "user_text": redact_counted(payload.user_text, records),
                "assistant_text": redact_counted(payload.assistant_text, records),
                "tools": tools,
            }
        )

    with Outbox.open(ddir) as box:
        records.scanned, records.changed = box.admin.rewrite_waiting(
            rewrite, lambda raw: redact_counted(raw, records)
        )
    report.outbox = records


def _scan_text_file(path: Path, shown: str, files: FilesReport, problems: list[str]) -> str | None:
    """The redacted text of `path` when it changes, else None (problems reported by name)."""
    try:
        size = path.stat().st_size
        if size > MAX_NOTE_BYTES:
            problems.append(f"{shown}: larger than {MAX_NOTE_BYTES >> 20} MiB, not scanned")
            return None
        text = path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        problems.append(f"{shown}: not scanned ({exc})")
        return None
    files.scanned += 1
    new = redact_counted(text, files)
    if new == text:
        return None
    files.changed += 1
    return new


def _scan_notes(ddir: Path, report: RescanReport) -> None:
    notes = NoteFiles(ddir)
    listing = notes.list_scenarios()
    for entry in listing.entries:
        _, path = notes.resolve_scenario_path(entry.path)
        new = _scan_text_file(path, f"l2/{entry.path}", report.notes, report.problems)
        if new is not None:
            notes.write_scenario(entry.path, new)
    if notes.profile_path.is_file():
        new = _scan_text_file(notes.profile_path, "profile.md", report.profile, report.problems)
        if new is not None:
            notes.write_profile(new)


# ---- state -----------------------------------------------------------------------------------------


def _read_state(ddir: Path) -> str | None:
    try:
        data = json.loads((ddir / STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    value = data.get("fingerprint") if isinstance(data, dict) else None
    return value if isinstance(value, str) else None


def _write_state(ddir: Path, report: RescanReport) -> None:
    body = json.dumps(
        {
            "fingerprint": report.fingerprint,
            "rescannedAt": datetime.now(UTC).isoformat(timespec="seconds"),
            "changed": report.changed,
        }
    )
    fd, temp = tempfile.mkstemp(prefix=f".{STATE_FILE}.", suffix=".tmp", dir=ddir)  # 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(body)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, ddir / STATE_FILE)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def needs_rescan(ddir: Path) -> bool:
    """Has the data dir not been scanned by the current rules yet?"""
    return ddir.is_dir() and _read_state(ddir) != rules_fingerprint()


@contextlib.contextmanager
def _exclusive(ddir: Path) -> Iterator[bool]:
    """Hold the re-scan lock if no other process does; yields whether it is held."""
    fd = os.open(ddir / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


# ---- entry points ----------------------------------------------------------------------------------


def rescan(ddir: Path) -> RescanReport:
    """Re-scan everything under the data dir now, and record the rules that did it.

    Raises BackendError (store or outbox unusable) with nothing recorded, so the next start tries
    again."""
    report = RescanReport(fingerprint=rules_fingerprint())
    if not ddir.is_dir():
        return report
    # outbox first: a record delivered while the store is scanned arrives already redacted
    _scan_outbox(ddir, report)
    _scan_store(ddir, report)
    _scan_notes(ddir, report)
    _write_state(ddir, report)
    return report


def rescan_if_rules_changed(ddir: Path) -> RescanReport | None:
    """The re-scan after an upgrade: only when the rules changed since the last one and no other
    process is at it; None when nothing was done."""
    if not needs_rescan(ddir):
        return None
    with _exclusive(ddir) as held:
        if not held or not needs_rescan(ddir):
            return None
        return rescan(ddir)


def start_after_upgrade(ddir: Path) -> threading.Thread:
    """Run `rescan_if_rules_changed` in a daemon thread (a sidecar must exit at once when Pi goes;
    a re-scan cut short commits whole batches only and runs again on the next start)."""

    def run() -> None:
        try:
            report = rescan_if_rules_changed(ddir)
        except Exception:  # background work: never let it escape, but say so
            log.exception("the redaction re-scan failed; it runs again on the next start")
            return
        if report is not None:
            log.info("%s", report.render())

    thread = threading.Thread(target=run, name="redaction-rescan", daemon=True)
    thread.start()
    return thread
