"""Import: the settled turns of sessions from before memory ran here, when the user asks.

The same reading as catch-up (`files.scan_file`: fail-closed parsing, redaction, branch identity,
keys by Pi entry id), over every session file of the agent dir (or one file), from the start of
each file, optionally only turns said since a date. A turn already in memory is not queued again:
its key is known to the outbox (whichever path queued it, even if it was forgotten since), or the
turn was stored before keys were entry ids (its content-derived id is known).

`plan_import` previews; `run_import` queues file by file and records each finished file in the
import job, so an interrupted import resumes with the files it had not finished (the sidecar also
resumes it in the background), and a second import adds nothing.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from pi_memory_bridge.backends.base import BackendError, ConversationTurn
from pi_memory_bridge.catchup.files import (
    PAUSED_REASON,
    FileScan,
    PausedCheck,
    never_paused,
    scan_file,
    session_files,
    sessions_dir,
)
from pi_memory_bridge.catchup.segments import Captured
from pi_memory_bridge.catchup.state import CatchUpState, ImportJob, StateError
from pi_memory_bridge.operations.pause import paused_check
from pi_memory_bridge.plural import counted, noun

log = logging.getLogger(__name__)

KnownIds = Callable[[Sequence[str]], Awaitable[set[str]]]
Submit = Callable[[Sequence[ConversationTurn]], Awaitable[int]]
Progress = Callable[[int, int, int], Awaitable[None]]  # (files done, files in all, turns queued)


@dataclass(frozen=True, slots=True)
class ImportScope:
    since_ms: int | None = None
    session_file: Path | None = None

    def describe(self) -> str:
        """A noun phrase ("import from <this>")."""
        where = (
            "every session of this agent dir" if self.session_file is None else f"session {self.session_file}"
        )
        if self.since_ms is None:
            return where
        since = f"{datetime.fromtimestamp(self.since_ms / 1000).astimezone():%Y-%m-%d %H:%M}"
        return f"sessions since {since}" if self.session_file is None else f"{where}, turns since {since}"

    def same_as(self, job: ImportJob) -> bool:
        session = str(self.session_file) if self.session_file is not None else None
        return job.since_ms == self.since_ms and job.session_file == session


@dataclass(frozen=True, slots=True)
class PlannedFile:
    path: Path
    session_id: str
    new_turns: int


@dataclass(frozen=True, slots=True)
class ImportPlan:
    scope: ImportScope
    files: tuple[PlannedFile, ...]  # the files with turns to import
    files_scanned: int
    already: int  # turns already in memory
    skipped: int  # turns whose shape is not captured (fail-closed)
    unfinished: int  # turns still waiting for an answer at the end of their file
    unreadable: tuple[tuple[str, str], ...]  # (path, why)
    resuming: ImportJob | None = None
    paused: int = 0  # turns said while their project was paused: never imported
    # the pauses on record when the plan was made: the import skips what the preview said
    said_while_paused: PausedCheck = field(default=never_paused, compare=False, repr=False)

    @property
    def turns(self) -> int:
        return sum(f.new_turns for f in self.files)

    def preview(self) -> str:
        lines = [
            f"import from {self.scope.describe()}: {counted(self.turns, 'turn')} "
            f"in {counted(len(self.files), 'session')} "
            f"to add ({counted(self.files_scanned, 'session file')} read)"
        ]
        if self.resuming is not None:
            done = len(self.resuming.files) - len(self.resuming.remaining)
            lines.append(
                f"resuming an interrupted import: {done} of "
                f"{counted(len(self.resuming.files), 'session')} done, "
                f"{counted(self.resuming.queued, 'turn')} added so far"
            )
        if self.already:
            lines.append(
                f"{counted(self.already, 'turn')} {noun(self.already, 'is', 'are')} "
                f"already in memory and left as {noun(self.already, 'it is', 'they are')}"
            )
        if self.paused:
            lines.append(
                f"{counted(self.paused, 'turn')} {noun(self.paused, 'was', 'were')} "
                "said while memory was paused for their project; "
                "not imported (a pause keeps nothing of its time)"
            )
        if self.skipped:
            lines.append(
                f"{counted(self.skipped, 'turn')} {noun(self.skipped, 'has', 'have')} "
                "no final answer in a shape memory keeps; not imported"
            )
        if self.unfinished:
            lines.append(
                f"{counted(self.unfinished, 'turn')} {noun(self.unfinished, 'is', 'are')} "
                "still waiting for their answer; not imported"
            )
        for path, why in self.unreadable[:5]:
            lines.append(f"cannot read {path}: {why}")
        if len(self.unreadable) > 5:
            lines.append(f"... and {counted(len(self.unreadable) - 5, 'more unreadable file')}")
        return "\n".join(lines)


@dataclass(slots=True)
class ImportResult:
    queued: int = 0
    files_done: int = 0
    errors: list[str] = field(default_factory=list)


def candidate_files(agent_dir: Path, scope: ImportScope) -> list[Path]:
    if scope.session_file is not None:
        return [scope.session_file]
    found = sorted(session_files(sessions_dir(agent_dir)), key=lambda item: item[1].mtime_ns)
    if scope.since_ms is not None:
        # a file last written before the date holds no turn said after it
        found = [item for item in found if item[1].mtime_ns // 1_000_000 >= scope.since_ms - 1000]
    return [path for path, _ in found]


async def _new_turns(scan: FileScan, known_ids: KnownIds) -> tuple[list[Captured], int]:
    """The captured turns of the scan that memory does not hold yet, and how many it holds."""
    captured = list(scan.captured)
    if not captured:
        return [], 0
    ids = [c.turn.turn_id for c in captured] + [c.legacy_id for c in captured]
    known = await known_ids(ids)
    fresh = [c for c in captured if c.turn.turn_id not in known and c.legacy_id not in known]
    return fresh, len(captured) - len(fresh)


async def plan_import(
    agent_dir: Path, scope: ImportScope, known_ids: KnownIds, state: CatchUpState | None
) -> ImportPlan:
    """What an import of `scope` would add (reads every file; nothing is written)."""
    resuming = None
    if state is not None:
        try:
            job = await asyncio.to_thread(state.unfinished_import)
        except StateError as exc:
            log.warning("import: cannot read the import job: %s", exc)
            job = None
        if job is not None and scope.same_as(job):
            resuming = job
    paths = (
        [Path(p) for p in resuming.remaining] if resuming is not None else candidate_files(agent_dir, scope)
    )
    planned: list[PlannedFile] = []
    unreadable: list[tuple[str, str]] = []
    already = skipped = unfinished = paused_turns = 0
    paused = await asyncio.to_thread(paused_check, agent_dir)
    for path in paths:
        try:
            scan = await asyncio.to_thread(scan_file, path, None, since_ms=scope.since_ms, paused=paused)
        except OSError as exc:
            unreadable.append((str(path), exc.strerror or str(exc)))
            continue
        if scan.unreadable is not None:
            unreadable.append((str(path), scan.unreadable))
            continue
        fresh, known = await _new_turns(scan, known_ids)
        already += known
        said_while_paused = sum(1 for turn in scan.turns.skipped if PAUSED_REASON in turn.reasons)
        paused_turns += said_while_paused
        skipped += len(scan.turns.skipped) - said_while_paused
        unfinished += len(scan.turns.open)
        if fresh and scan.session_id is not None:
            planned.append(PlannedFile(path, scan.session_id, len(fresh)))
    return ImportPlan(
        scope,
        tuple(planned),
        len(paths),
        already,
        skipped,
        unfinished,
        tuple(unreadable),
        resuming,
        paused_turns,
        paused,
    )


async def import_file(
    path: Path, since_ms: int | None, known_ids: KnownIds, submit: Submit, paused: PausedCheck = never_paused
) -> int:
    """Queue the turns of one file memory does not hold yet, except those said while their
    project was paused; how many were queued."""
    scan = await asyncio.to_thread(scan_file, path, None, since_ms=since_ms, paused=paused)
    fresh, _known = await _new_turns(scan, known_ids)
    if not fresh:
        return 0
    return await submit([c.turn for c in fresh])


async def run_import(
    plan: ImportPlan,
    *,
    state: CatchUpState | None,
    known_ids: KnownIds,
    submit: Submit,
    progress: Progress | None = None,
) -> ImportResult:
    """Queue what the plan found, file by file, recording progress in the import job."""
    result = ImportResult()
    paths = [f.path for f in plan.files]
    job = plan.resuming
    if state is not None:
        try:
            if job is None:
                job = await asyncio.to_thread(
                    state.begin_import,
                    plan.scope.since_ms,
                    str(plan.scope.session_file) if plan.scope.session_file is not None else None,
                    [str(p) for p in paths],
                )
        except StateError as exc:
            # the import still works; only resuming after an interruption would not
            log.warning("import: cannot record the import job: %s", exc)
            job = None
    total = len(paths)
    for path in paths:
        try:
            queued = await import_file(path, plan.scope.since_ms, known_ids, submit, plan.said_while_paused)
        except (OSError, BackendError) as exc:
            result.errors.append(f"{path}: {exc}")
            if isinstance(exc, BackendError):
                break  # the outbox cannot take more now (disk full, locked): resume later
            continue
        result.queued += queued
        result.files_done += 1
        if state is not None and job is not None:
            try:
                await asyncio.to_thread(state.import_file_done, job.id, str(path), queued)
            except StateError as exc:
                log.warning("import: cannot record progress: %s", exc)
        if progress is not None:
            await progress(result.files_done, total, result.queued)
    if state is not None and job is not None and not result.errors:
        try:
            await asyncio.to_thread(state.finish_import, job.id)
        except StateError as exc:
            log.warning("import: cannot record the end of the import: %s", exc)
    return result


async def resume_import(
    state: CatchUpState,
    job: ImportJob,
    *,
    known_ids: KnownIds,
    submit: Submit,
    max_files: int,
    paused: PausedCheck = never_paused,
) -> tuple[int, int]:
    """Continue an interrupted import with up to `max_files` of its remaining files, in the
    background; (turns queued, files still remaining)."""
    remaining = list(job.remaining)
    queued = 0
    for path in remaining[:max_files]:
        try:
            n = await import_file(Path(path), job.since_ms, known_ids, submit, paused)
        except OSError:
            n = 0  # gone since: nothing of it to import
        queued += n
        await asyncio.to_thread(state.import_file_done, job.id, path, n)
    left = max(len(remaining) - max_files, 0)
    if left == 0:
        await asyncio.to_thread(state.finish_import, job.id)
    return queued, left
