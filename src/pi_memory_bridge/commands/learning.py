"""`/tdai-memory-undo` and `/tdai-memory-learning`: undo a consolidation job, allow or stop learning.

Undo shows what the job did and asks with a choice whose first (default) answer is No; without a
UI it only shows. `learning` asks the consent question (what is sent where, what it costs) with No
first, and stores the answer in the global config file.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pi_memory_bridge.backends.base import BackendError
from pi_memory_bridge.backends.learning import JobSummary, LearnedMemories, StoredOp
from pi_memory_bridge.config import global_config_path
from pi_memory_bridge.learning.consent import NO, YES, ModelPrice, consent_question, store_consent
from pi_memory_bridge.learning.prompts import clean_text
from pi_memory_bridge.plural import counted, noun
from pi_memory_bridge.redact import redact_text
from pi_memory_bridge.vocabulary.dialog import Cancelled, Dialog, Outcome

KEEP = "No, keep it"
UNDO = "Yes, undo this job"


def describe_job(job: JobSummary) -> str:
    when = job.created_at.strftime("%Y-%m-%d %H:%M UTC")
    if job.state in ("failed", "dropped"):
        return f"{job.job_id} {job.state} at {when} ({job.reason})"
    if job.enriched and not job.turns:  # tags and questions for memories saved without them
        what = f"enriched {counted(job.enriched, 'memory')}"
        said = f"{job.job_id} {job.state} at {when}: {what}, {job.tokens:,} tokens"
        return f"{said} ({job.reason})" if job.reason else said
    counts = f"+{job.added} added, {job.skipped} skipped, {job.superseded} superseded, {job.merged} merged"
    if job.proposed:
        counts += f", {job.proposed} proposed"
    if job.refused:
        counts += f", {job.refused} refused"
    said = (
        f"{job.job_id} {job.state} at {when}: {counts} from "
        f"{counted(job.turns, 'turn')}, {job.tokens:,} tokens"
    )
    return f"{said} ({job.reason})" if job.reason else said


def _line(text: str) -> str:
    return clean_text(text, 200).replace("\n", " ")


def describe_ops(ops: list[StoredOp], texts: dict[str, str]) -> list[str]:
    """What a job did, one line per decision; `texts` holds the memories' current texts by id."""
    lines: list[str] = []
    for op in ops:
        new = texts.get(op.memory_id or "", op.text)
        old = "; ".join(_line(texts.get(t, "(gone)")) for t in op.targets)
        if op.op == "add":
            lines.append(f"  + [{op.kind}] {_line(new)}")
        elif op.op in ("supersede", "merge"):
            lines.append(f"  ~ [{op.kind}] {_line(new)}")
            lines.append(f"      replaced: {old}")
        elif op.op == "propose":
            lines.append(f"  ? proposed, not applied: {_line(op.text)}")
            if op.targets:
                lines.append(f"      instead of: {old}")
            else:
                lines.append(f"      ({_line(op.why)})")
    skipped = sum(1 for op in ops if op.op == "skip")
    if skipped:
        lines.append(f"  = {skipped} already known (skipped)")
    return lines


@dataclass(frozen=True, slots=True)
class UndoDeps:
    memories: LearnedMemories | None
    problem: str = ""
    changed: Callable[[], None] = lambda: None  # after an undo (the generated notes follow)


@dataclass(frozen=True, slots=True)
class _UndoPreview:
    text: str
    removes: int  # learned memories the undo takes away
    restores: int  # memories they had replaced, active again
    unenriches: int = 0  # memories whose added tags and questions it takes away
    withdraws: int = 0  # its proposals still waiting for an answer


def _preview(memories: LearnedMemories, job: JobSummary) -> _UndoPreview:
    ops = memories.ledger.job_ops(job.job_id)
    ids = [i for op in ops for i in ((op.memory_id,) if op.memory_id else ()) + op.targets]
    texts = {k: v.text for k, v in memories.rows(ids).items()}
    changing = [op for op in ops if op.memory_id]  # what `undo_job` takes back
    restores = len({t for op in changing for t in op.targets})
    enriched = memories.enrichment.enriched_by(job.job_id)
    aids = [
        f"  * {_line(e.text)}\n      added: {counted(len(e.tags), 'tag')}, "
        f"{counted(len(e.questions), 'question')}"
        for e in enriched
    ]
    waiting = memories.ledger.open_proposals(job.job_id)
    answered = sum(1 for op in ops if op.op == "propose") - len(waiting)
    notes = (
        [
            f"  ({counted(answered, 'proposal')} already answered "
            f"{noun(answered, 'stays as you answered it', 'stay as you answered them')})"
        ]
        if answered > 0
        else []
    )
    return _UndoPreview(
        "\n".join([f"job {describe_job(job)}", *describe_ops(ops, texts), *aids, *notes]),
        len(changing),
        restores,
        len(enriched),
        len(waiting),
    )


def _undo_question(job: JobSummary, preview: _UndoPreview) -> str:
    parts: list[str] = []
    if preview.removes or not (preview.withdraws or preview.unenriches):
        part = f"remove {counted(preview.removes, 'learned memory')}"
        if preview.restores:
            part += f" and restore {preview.restores} it replaced"
        parts.append(part)
    if preview.unenriches:
        parts.append(f"take away the tags and questions it added to {counted(preview.unenriches, 'memory')}")
    if preview.withdraws:
        parts.append(f"withdraw {counted(preview.withdraws, 'proposal')} waiting in /tdai-memory-review")
    return f"Undo consolidation job {job.job_id}? It would {' and '.join(parts)}."


async def undo_flow(deps: UndoDeps, args: str, dialog: Dialog) -> Outcome:
    memories = deps.memories
    if memories is None:
        return Outcome(f"nothing to undo: {deps.problem or 'consolidation is not available'}", "warning")
    ref = args.strip()
    try:
        if ref == "list":
            jobs = await asyncio.to_thread(memories.ledger.jobs, 15)
            listing = "\n".join(f"  {describe_job(j)}" for j in jobs) or "  (none yet)"
            return Outcome(f"consolidation jobs, newest first:\n{listing}")
        if ref:
            job = await asyncio.to_thread(memories.ledger.find_job, ref)
        else:
            applied = await asyncio.to_thread(memories.ledger.jobs, 1, states=("applied",))
            job = applied[0] if applied else None
        if job is None:
            what = f"no single job matches {redact_text(ref).text!r}" if ref else "no applied job to undo"
            return Outcome(f"{what} (see /tdai-memory-undo list)", "warning")
        if job.state != "applied":
            return Outcome(f"job {job.job_id} is {job.state}: there is nothing to undo", "warning")
        preview = await asyncio.to_thread(_preview, memories, job)
    except BackendError as exc:
        return Outcome(f"cannot read the jobs: {redact_text(str(exc)).text}", "error")
    if not dialog.has_ui:
        return Outcome(
            f"{preview.text}\nnothing was undone (no dialog here: run /tdai-memory-undo interactively)",
            "warning",
        )
    try:
        answer = await dialog.select(_undo_question(job, preview), [KEEP, UNDO], preview.text)
    except Cancelled:
        answer = KEEP
    if answer != UNDO:
        return Outcome("nothing was undone")
    try:
        report = await asyncio.to_thread(memories.ledger.undo_job, job.job_id)
    except BackendError as exc:
        return Outcome(f"undo refused: {redact_text(str(exc)).text}", "error")
    deps.changed()
    aids = f", tags and questions taken from {len(report.unenriched)}" if report.unenriched else ""
    withdrawn = f", {counted(len(report.withdrawn), 'proposal')} withdrawn" if report.withdrawn else ""
    return Outcome(
        f"undid job {report.job_id}: {counted(len(report.removed), 'learned memory')} removed, "
        f"{len(report.restored)} restored{aids}{withdrawn}"
    )


@dataclass(frozen=True, slots=True)
class LearningDeps:
    agent_dir: Path
    model_label: str
    every_turns: int
    daily_budget: int
    current: bool | None
    set_consent: Callable[[bool], None]
    model_configured: bool = False  # learning.model or .endpoint: the shim's session model is not used
    session_model: tuple[str, ModelPrice] | None = None  # what the session runs on, named and priced


async def learning_flow(deps: LearningDeps, args: str, dialog: Dialog) -> Outcome:
    """`on`, `off`, `ask` (the one-time question), or nothing (show the state and ask)."""
    word = args.strip().partition(" ")[0].lower()
    # a configured learning.model or endpoint is what jobs run on, whatever the session uses
    model: str = deps.model_label
    price: ModelPrice | None = None
    if not deps.model_configured and deps.session_model is not None:
        model, price = deps.session_model
    if word == "ask" and deps.current is not None:
        return Outcome("")  # answered meanwhile (another session, or by hand): never ask twice
    if word in ("on", "off"):
        enabled = word == "on"
    else:
        if not dialog.has_ui:
            state = {None: "not allowed yet", True: "on", False: "off"}[deps.current]
            return Outcome(f"learning is {state}; /tdai-memory-learning on|off changes it")
        question = consent_question(
            model, price, deps.every_turns, deps.daily_budget, global_config_path(deps.agent_dir)
        )
        try:
            answer = await dialog.select("Let Pi learn from your sessions?", [NO, YES], question)
        except Cancelled:
            answer = NO
        enabled = answer == YES
    problem = await asyncio.to_thread(store_consent, deps.agent_dir, enabled)
    deps.set_consent(enabled)
    state = "on: consolidation runs in the background" if enabled else "off: nothing is sent to a model"
    if problem:
        return Outcome(f"learning is {state} for this session only; {problem}", "warning")
    return Outcome(f"learning is {state} (kept in {global_config_path(deps.agent_dir)})")
