"""The catch-up runner of one sidecar: passes over this agent dir's session files in the background.

A pass (at start, then on a slow timer, sooner while work is left or after a failure) reads the
session files that changed since their watermark, queues the settled turns the outbox has never
seen (marked as possibly sent, so delivery checks the backend before sending), then moves the
watermark. Work per pass is bounded (files and bytes read); the rest waits for the next pass.
Only one process runs a pass at a time (an advisory lock beside the state), so eight Pi processes
starting together read each file once. All file work runs in a thread: the handshake and recall
never wait for it.

With capture turned off in the config the runner *declines* instead: it moves the watermarks
over the turns settled meanwhile without queueing them, so turning capture back on later does
not capture what was said while it was off.

An interrupted import (see `importer`) is continued in the same passes, after catch-up's own work.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pi_memory_bridge.backends.base import BackendError, ConversationTurn
from pi_memory_bridge.catchup.files import FileScan, FileStat, scan_file, session_files, sessions_dir
from pi_memory_bridge.catchup.importer import KnownIds, resume_import
from pi_memory_bridge.catchup.state import LOCK_FILENAME, CatchUpState, StateError, StoredMark, capture_since
from pi_memory_bridge.operations.pause import paused_check
from pi_memory_bridge.outbox import Outbox
from pi_memory_bridge.plural import counted
from pi_memory_bridge.redact import redact_text

log = logging.getLogger(__name__)

INTERVAL_S = 60.0  # the slow timer
SOON_S = 0.5  # the next pass when the budget ran out with work left
RETRY_S = (2.0, 5.0, 15.0, 30.0, 60.0)  # after a failure (disk full, outbox locked)
LOCKED_RETRY_S = 5.0  # another process is running a pass
MAX_FILES_PER_PASS = 64
MAX_BYTES_PER_PASS = 32 * 1024 * 1024
MAX_IMPORT_FILES_PER_PASS = 16
_MTIME_SLACK_MS = 1000
STOP_RECHECK_S = 0.1  # how often `stop` cancels again a loop that lost the first cancel


@dataclass(frozen=True, slots=True)
class Budget:
    files: int = MAX_FILES_PER_PASS
    bytes: int = MAX_BYTES_PER_PASS


@dataclass(slots=True)
class CatchUpProgress:
    """What status shows about catch-up."""

    declining: bool = False
    since_ms: int | None = None
    passes: int = 0
    last_pass_at: float | None = None
    files_known: int = 0
    files_read: int = 0  # in the last pass
    bytes_read: int = 0  # in the last pass
    files_waiting: int = 0  # left for a later pass by the budget
    queued: int = 0  # turns recovered and queued by this process
    already: int = 0  # turns found already captured (live, or by another pass)
    declined: int = 0  # turns passed over because capture is off
    skipped: int = 0
    unfinished: int = 0  # turns still waiting for their answer
    behind: int = 0  # settled turns found but not queued yet (see last_error)
    unreadable: dict[str, str] = field(default_factory=dict)
    last_error: str | None = None
    imported: int = 0
    import_files_left: int = 0

    def describe(self, now: float | None = None) -> str:
        if self.last_pass_at is None:
            first = "declining (capture is off)" if self.declining else "starting"
            # a pass that fails before it ends (state unreadable) would otherwise say "starting" for good
            return f"{first}; no pass finished: {self.last_error}" if self.last_error else first
        ago = (now if now is not None else time.time()) - self.last_pass_at
        parts = [f"last pass {ago:.0f} s ago ({self.files_known} session files, {self.files_read} read)"]
        if self.declining:
            parts.append(f"capture is off: {counted(self.declined, 'settled turn')} passed over")
        else:
            parts.append(f"{counted(self.queued, 'turn')} recovered, {self.already} already captured")
        if self.behind:
            parts.append(f"BEHIND by {counted(self.behind, 'turn')}: {self.last_error or 'retrying'}")
        elif self.last_error:
            parts.append(f"last problem: {self.last_error}")
        if self.files_waiting:
            parts.append(f"{counted(self.files_waiting, 'file')} still to read")
        if self.unfinished:
            parts.append(f"{counted(self.unfinished, 'turn')} waiting for their answer")
        if self.skipped:
            parts.append(f"{self.skipped} skipped (fail-closed)")
        if self.unreadable:
            parts.append(f"{counted(len(self.unreadable), 'unreadable file')}")
        if self.imported or self.import_files_left:
            parts.append(
                f"import: {counted(self.imported, 'turn')} added, "
                f"{counted(self.import_files_left, 'file')} left"
            )
        return "; ".join(parts)


@dataclass(frozen=True, slots=True)
class PassOutcome:
    more: bool = False  # the budget ran out with files left
    failed: bool = False
    locked: bool = False


def _clean(exc: BaseException) -> str:
    return redact_text(f"{type(exc).__name__}: {exc}").text[:300]


class _PassLock:
    """An advisory lock held for one pass; released when the process dies."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._fd: int | None = None

    def acquire(self) -> bool:
        fd = os.open(self._path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


class CatchUpRunner:
    def __init__(
        self,
        *,
        agent_dir: Path,
        data_dir: Path,
        outbox: Outbox | None,
        wake: Callable[[], None] | None = None,
        known_ids: KnownIds | None = None,
        interval_s: float = INTERVAL_S,
        budget: Budget | None = None,
    ) -> None:
        """`outbox=None` declines (capture is off): watermarks move, nothing is queued."""
        self._agent_dir = agent_dir
        self._data_dir = data_dir
        self._outbox = outbox
        self._wake = wake
        self._known_ids = known_ids
        self._interval_s = interval_s
        self._budget = budget or Budget()
        self._state: CatchUpState | None = None
        self._task: asyncio.Task[None] | None = None
        self._nudged = asyncio.Event()
        self.passed = asyncio.Event()  # set once a pass finished (whatever its outcome)
        self._failures = 0
        self._skipped: set[tuple[str, str]] = set()
        self._already: set[str] = set()
        self.progress = CatchUpProgress(declining=outbox is None)

    # ---- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._loop(), name="catch-up")

    async def stop(self) -> None:
        task, self._task = self._task, None
        # A cancel that meets a nudge can be lost (Python 3.11's wait_for then returns the wait's
        # result): cancel again until the loop has ended. Our own caller's cancel still reaches us.
        while task is not None and not task.done():
            task.cancel()
            await asyncio.wait({task}, timeout=STOP_RECHECK_S)
        if self._state is not None:
            await asyncio.to_thread(self._state.close)
            self._state = None

    def nudge(self) -> None:
        """Run a pass soon (live capture just failed: the turn is still in the session file)."""
        self._nudged.set()

    async def _loop(self) -> None:
        delay = 0.0
        while True:
            if delay > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._nudged.wait(), timeout=delay)
            self._nudged.clear()
            try:
                outcome = await self.run_pass()
            except Exception as exc:  # background work: never let it escape, but say so
                log.exception("catch-up pass failed")
                self.progress.last_error = _clean(exc)
                outcome = PassOutcome(failed=True)
            self.passed.set()
            if outcome.failed:
                delay = RETRY_S[min(self._failures, len(RETRY_S) - 1)]
                self._failures += 1
            else:
                self._failures = 0
                delay = LOCKED_RETRY_S if outcome.locked else SOON_S if outcome.more else self._interval_s

    # ---- one pass -----------------------------------------------------------------------------

    async def _open_state(self) -> CatchUpState:
        if self._state is None:
            self._state = await asyncio.to_thread(CatchUpState.open, self._data_dir)
        return self._state

    async def run_pass(self) -> PassOutcome:
        """One bounded pass (also callable directly, e.g. by tests)."""
        lock = _PassLock(self._data_dir / LOCK_FILENAME)
        try:
            if not await asyncio.to_thread(lock.acquire):
                return PassOutcome(locked=True)
        except OSError as exc:
            self.progress.last_error = _clean(exc)
            return PassOutcome(failed=True)
        try:
            return await self._pass()
        finally:
            await asyncio.to_thread(lock.release)

    async def _pass(self) -> PassOutcome:
        progress = self.progress
        try:
            state = await self._open_state()
            since = (await asyncio.to_thread(capture_since, self._data_dir)).ms
            paused = await asyncio.to_thread(paused_check, self._agent_dir)  # per pass: a pause holds at once
            marks = await asyncio.to_thread(state.marks)
        except StateError as exc:
            progress.last_error = _clean(exc)
            return PassOutcome(failed=True)
        progress.since_ms = since
        files = await asyncio.to_thread(lambda: list(session_files(sessions_dir(self._agent_dir))))
        files.sort(key=lambda item: item[1].mtime_ns, reverse=True)  # just-lost turns first
        progress.files_known = len(files)
        read = read_bytes = waiting = unfinished = 0
        failed = False
        behind = 0
        for path, file_stat in files:
            mark = marks.get(str(path))
            if not self._needs_read(file_stat, mark, since):
                if mark is not None:
                    unfinished += mark.open_turns
                continue
            if read >= self._budget.files or read_bytes >= self._budget.bytes or failed:
                waiting += 1
                continue
            try:
                scan = await asyncio.to_thread(
                    scan_file,
                    path,
                    mark.validated() if mark is not None else None,
                    since_ms=since,
                    paused=paused,
                )
            except OSError as exc:
                progress.unreadable[str(path)] = exc.strerror or str(exc)
                continue
            read += 1
            read_bytes += scan.bytes_read
            if scan.unreadable is not None:
                progress.unreadable[str(path)] = scan.unreadable
                continue
            progress.unreadable.pop(str(path), None)
            unfinished += len(scan.turns.open)
            # a file read again from an open turn on meets the same turns again: count each once
            self._skipped.update((scan.session_id or "", o.user_entry.id) for o in scan.turns.skipped)
            progress.skipped = len(self._skipped)
            queued, missing = await self._queue(scan)
            if not queued:
                failed = True
                behind += missing
                continue
            if scan.mark is not None:
                try:
                    await asyncio.to_thread(state.save_mark, scan.mark)
                except StateError as exc:  # the turns are queued; the file is read again next time
                    progress.last_error = _clean(exc)
        await self._forget_vanished(state, marks, {str(p) for p, _ in files})
        if not failed and read < self._budget.files:
            failed = not await self._continue_import(state)
        progress.passes += 1
        progress.last_pass_at = time.time()
        progress.files_read, progress.bytes_read, progress.files_waiting = read, read_bytes, waiting
        progress.unfinished = unfinished
        progress.behind = behind  # settled turns this pass found but could not queue
        if not failed and progress.last_error and progress.behind == 0 and waiting == 0:
            progress.last_error = None  # caught up again
        return PassOutcome(more=waiting > 0, failed=failed)

    @staticmethod
    def _needs_read(file_stat: FileStat, mark: StoredMark | None, since_ms: int) -> bool:
        if mark is not None and file_stat.same_as(mark):
            return False
        # a file last written before capture started holds nothing catch-up may take
        return file_stat.mtime_ns // 1_000_000 >= since_ms - _MTIME_SLACK_MS

    async def _queue(self, scan: FileScan) -> tuple[bool, int]:
        """Queue the scan's captured turns the outbox has never seen; (ok, turns not queued). A
        read comes first: turns already known need no write, which a full disk would refuse."""
        turns = [c.turn for c in scan.captured]
        if not turns:
            return True, 0
        if self._outbox is None:
            self.progress.declined += len(turns)
            return True, 0
        outbox = self._outbox
        try:
            known = await asyncio.to_thread(outbox.known_ids, [t.turn_id for t in turns])
        except BackendError as exc:
            return self._failed(exc, scan, len(turns))
        fresh = [t for t in turns if t.turn_id not in known]
        new = 0
        if fresh:
            try:
                new = await asyncio.to_thread(outbox.enqueue, fresh, possibly_sent=True)
            except BackendError as exc:
                return self._failed(exc, scan, len(fresh))
        self.progress.queued += new
        self._already.update(t.turn_id for t in turns if t.turn_id in known)
        self.progress.already = len(self._already)
        if new:
            log.info("catch-up: turns recovered: %d from %s", new, scan.path.name)
            if self._wake is not None:
                self._wake()
        return True, 0

    def _failed(self, exc: BackendError, scan: FileScan, missing: int) -> tuple[bool, int]:
        self.progress.last_error = _clean(exc)
        log.warning("catch-up: cannot queue the turns missing from %s (%d): %s", scan.path.name, missing, exc)
        return False, missing

    async def _forget_vanished(
        self, state: CatchUpState, marks: dict[str, StoredMark], present: set[str]
    ) -> None:
        for path in [p for p in self.progress.unreadable if p not in present]:
            del self.progress.unreadable[path]
        gone = [p for p in marks if p not in present]
        if not gone:
            return
        try:
            await asyncio.to_thread(state.forget_marks, gone)
        except StateError as exc:
            self.progress.last_error = _clean(exc)

    async def _continue_import(self, state: CatchUpState) -> bool:
        """Continue an interrupted import (the user agreed to it); False when queueing failed."""
        if self._outbox is None or self._known_ids is None:
            return True
        try:
            job = await asyncio.to_thread(state.unfinished_import)
            if job is None:
                self.progress.import_files_left = 0
                return True
            paused = await asyncio.to_thread(paused_check, self._agent_dir)
            queued, left = await resume_import(
                state,
                job,
                known_ids=self._known_ids,
                submit=self._submit,
                max_files=MAX_IMPORT_FILES_PER_PASS,
                paused=paused,
            )
        except (BackendError, StateError) as exc:
            self.progress.last_error = _clean(exc)
            return False
        self.progress.imported += queued
        self.progress.import_files_left = left
        return True

    async def _submit(self, turns: Sequence[ConversationTurn]) -> int:
        assert self._outbox is not None
        new = await asyncio.to_thread(self._outbox.enqueue, list(turns), possibly_sent=True)
        if new and self._wake is not None:
            self._wake()
        return new
