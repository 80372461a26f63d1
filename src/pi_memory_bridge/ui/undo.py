"""Undo of a learning job from the learning page, through `/tdai-memory-undo`'s own flow.

The page does not undo anything itself: it drives `undo_flow` (the flow behind the command and
`pi-memory-bridge undo`), answering its question with the same "Yes" a user picks in Pi, so the
refusals (not applied, already undone, a later job builds on it) and the undo are the command's.
What the page adds is a preview as a list (which learned memories go, which replaced ones come
back, which memories lose the tags and questions an enrichment job gave them) read from the job's
records, and a per-item report checked against the store after the flow answered.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from pi_memory_bridge.backends.base import BackendError
from pi_memory_bridge.backends.local.learning.learned_rows import JobSummary, MemoryRow
from pi_memory_bridge.backends.local.learning.memories import LearnedMemories
from pi_memory_bridge.commands.learning import UNDO, UndoDeps, undo_flow
from pi_memory_bridge.redact import redact_text
from pi_memory_bridge.ui.job_additions import Addition, additions
from pi_memory_bridge.vocabulary.dialog import Cancelled, Outcome

JOB_LIST = 30


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


@dataclass(frozen=True, slots=True)
class JobLine:
    job: JobSummary
    additions: tuple[Addition, ...] = ()  # an enrichment job's tags and questions, per memory

    @property
    def can_undo(self) -> bool:
        return self.job.state == "applied"

    @property
    def did(self) -> str:
        """What the job changed, in words (a supersede writes a memory but adds none)."""
        job = self.job
        if job.state in ("failed", "dropped"):
            return job.reason or job.state
        if job.enriched and not job.turns:
            return (
                f"gave {_count(job.enriched, 'memory', 'memories')} you saved topics and questions "
                "to be found by"
            )
        parts = [
            _count(job.added, "memory added", "memories added") if job.added else "",
            _count(job.superseded, "memory replaced by a newer one", "memories replaced by newer ones")
            if job.superseded
            else "",
            _count(job.merged, "memory merged", "memories merged") if job.merged else "",
        ]
        said = ", ".join(p for p in parts if p) or "nothing new"
        if job.skipped:
            said += f" ({job.skipped} already known)"
        if job.proposed:
            said += (
                f"; {_count(job.proposed, 'change', 'changes')} to your own memories proposed, not applied"
            )
        return said


@dataclass(frozen=True, slots=True)
class UndoItem:
    memory_id: str
    kind: str
    text: str

    @property
    def shown(self) -> str:
        return f"[L1 {self.kind}] {' '.join(redact_text(self.text).text.split())}"


@dataclass(frozen=True, slots=True)
class UndoPlan:
    """What undoing the job would change, as its recorded decisions say; `refusal` is the
    command's answer when there is nothing to undo (then the page offers no button)."""

    job_id: str
    job: JobSummary | None = None
    remove: tuple[UndoItem, ...] = ()  # memories the job wrote: deleted
    restore: tuple[UndoItem, ...] = ()  # memories it replaced: current again
    unenrich: tuple[Addition, ...] = ()  # memories an enrichment job gave tags and questions: they go
    built_on: int = 0  # of `remove`, replaced since by a later job: the undo will be refused
    refusal: str = ""


@dataclass(frozen=True, slots=True)
class UndoResult:
    lines: tuple[str, ...]  # the command's answer first, then one line per memory
    changed: bool


def _item(row: MemoryRow) -> UndoItem:
    return UndoItem(row.memory_id, row.kind, row.text)


def _plan(memories: LearnedMemories, job: JobSummary) -> UndoPlan:
    ops = [op for op in memories.ledger.job_ops(job.job_id) if op.memory_id is not None]
    created = [str(op.memory_id) for op in ops]
    replaced = [t for op in ops for t in op.targets]
    rows = memories.rows([*created, *replaced])
    remove = [rows[i] for i in dict.fromkeys(created) if i in rows]
    # only what one of this job's memories replaced comes back (as the undo's UPDATE decides)
    restore = [rows[i] for i in dict.fromkeys(replaced) if i in rows and rows[i].superseded_by in created]
    return UndoPlan(
        job_id=job.job_id,
        job=job,
        remove=tuple(_item(r) for r in remove),
        restore=tuple(_item(r) for r in restore),
        unenrich=additions(memories, job.job_id),
        built_on=sum(1 for r in remove if r.superseded_by is not None),
    )


class _PageDialog:
    """The page's side of the flow's one question: answered Yes when `undo` is set, else dismissed
    (then the flow changes nothing). `asked` tells whether the flow got as far as asking."""

    has_ui = True

    def __init__(self, undo: bool) -> None:
        self._undo = undo
        self.asked = False

    async def confirm(self, title: str, message: str = "") -> bool:
        self.asked = True
        return False  # the undo flow asks with a select; any other yes/no is not the page's to give

    async def select(self, title: str, options: Sequence[str], message: str = "") -> str:
        self.asked = True
        if self._undo and UNDO in options:
            return UNDO
        raise Cancelled

    async def input(self, title: str, message: str = "", placeholder: str = "") -> str:
        raise Cancelled

    async def editor(self, title: str, prefill: str = "") -> str:
        raise Cancelled


class JobUndo:
    """The learning page's reads and its one action, on the local store's learned memories."""

    def __init__(self, memories: LearnedMemories, changed: Callable[[], Awaitable[None]]) -> None:
        self.memories = memories
        self._changed = changed  # after an undo: the generated profile and notes follow, as in Pi

    async def _run(
        self, job_id: str, dialog: _PageDialog, on_change: Callable[[], None] = lambda: None
    ) -> Outcome:
        return await undo_flow(UndoDeps(self.memories, changed=on_change), job_id, dialog)

    async def jobs(self) -> list[JobLine]:
        return await asyncio.to_thread(self._job_lines)

    def _job_lines(self) -> list[JobLine]:
        return [
            JobLine(j, additions(self.memories, j.job_id) if j.enriched and j.state == "applied" else ())
            for j in self.memories.ledger.jobs(JOB_LIST)
        ]

    async def plan(self, job_id: str) -> UndoPlan:
        """The preview: the command's first answer decides whether there is anything to undo."""
        dialog = _PageDialog(undo=False)
        first = await self._run(job_id, dialog)
        if not dialog.asked:  # answered without a question: there is nothing to undo
            return UndoPlan(job_id=job_id, refusal=first.message)
        job = await asyncio.to_thread(self.memories.ledger.find_job, job_id)
        if job is None:  # gone between the two reads
            return UndoPlan(job_id=job_id, refusal=f"no consolidation job {job_id}")
        try:
            return await asyncio.to_thread(_plan, self.memories, job)
        except BackendError as exc:
            return UndoPlan(job_id=job_id, refusal=f"cannot read the job: {redact_text(str(exc)).text}")

    async def undo(self, plan: UndoPlan) -> UndoResult:
        """Run the command's flow on the planned job and answer its question with Yes; report per
        memory of the plan. The flow decides again: a job undone meanwhile is refused, not redone."""
        changed: list[bool] = []
        answer = await self._run(plan.job_id, _PageDialog(undo=True), lambda: changed.append(True))
        if answer.level != "info" or not changed:
            return UndoResult((f"FAILED  {answer.message}",), changed=False)
        await self._changed()
        ids = [i.memory_id for i in (*plan.remove, *plan.restore)]
        now = await asyncio.to_thread(self.memories.rows, ids)
        lines = [answer.message]
        for item in plan.remove:
            gone = item.memory_id not in now
            lines.append(f"{'removed' if gone else 'FAILED  still there:'} {item.shown}")
        for item in plan.restore:
            back = item.memory_id in now and now[item.memory_id].active
            lines.append(f"{'restored' if back else 'FAILED  not restored:'} {item.shown}")
        if plan.unenrich:
            kept = {a.memory_id for a in await asyncio.to_thread(additions, self.memories, plan.job_id)}
            for added in plan.unenrich:
                if added.memory_id in kept:
                    lines.append(f"FAILED  still has what the job added: {added.shown}")
                else:
                    lines.append(f"took away {added.counted} from {added.shown}")
        return UndoResult(tuple(lines), changed=True)


__all__ = ["JobLine", "JobUndo", "UndoItem", "UndoPlan", "UndoResult"]
