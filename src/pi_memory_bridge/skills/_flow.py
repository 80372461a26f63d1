"""`/tdai-memory-sync-skills`: write chosen server skills as Pi-native skills.

With a UI: list every server skill (all pages), let the user pick all, some or none (cancel means
nothing), show what goes where, confirm, then write each skill atomically. A skill edited locally
since we wrote it is never replaced silently: the user skips it or keeps both (the server version
goes under a new name and the edited copy becomes the user's). Skills deleted on the server are
removed only when the user agrees, and only if unedited.

Without a UI: list only. `--yes` writes new skills and updates unedited ones, and still never
touches local edits nor removes anything.

Writing happens under the skills directory's sync lock, re-planned from the directory as it is
then, because another Pi may have synced (or the user edited) while the dialogs were open.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pi_memory_bridge.backends.base import BackendError
from pi_memory_bridge.plural import counted
from pi_memory_bridge.redact import redact_text
from pi_memory_bridge.skills._atomic import recover
from pi_memory_bridge.skills._bundle import SKILL_FILE, SkillBundle, SkillBundleError, fetch_bundle
from pi_memory_bridge.skills._local import LocalSkills, SyncedSkill, scan
from pi_memory_bridge.skills._source import RemoteSkillSummary, SkillSource, list_all_skills
from pi_memory_bridge.skills._sync import (
    Action,
    PlannedSkill,
    SyncBusy,
    disown,
    install,
    plan_sync,
    remove_synced,
    replan,
    server_deleted,
    sync_lock,
)
from pi_memory_bridge.vocabulary.dialog import Cancelled, Dialog, Outcome

ALL = "Sync all of them"
CHOOSE = "Choose one by one"
CANCEL = "Cancel"
SKIP = "Skip it (keep my edits)"
KEEP_BOTH = "Keep both"
YES_FLAG = "--yes"


@dataclass(frozen=True, slots=True)
class SyncDeps:
    source: SkillSource | None
    source_problem: str  # why there is no source (e.g. the local backend has no skills)
    skills_dir: Path  # <agent-dir>/skills


def _label(remote: RemoteSkillSummary) -> str:
    return redact_text(f"{remote.name} (v{remote.version}, {remote.skill_id})").text


def _error_text(exc: BaseException) -> str:
    return redact_text(str(exc)).text


async def _fetch(
    source: SkillSource, plans: Sequence[PlannedSkill]
) -> tuple[dict[str, SkillBundle], list[str]]:
    wanted = [p for p in plans if p.action is not Action.UP_TO_DATE]
    results = await asyncio.gather(
        *(fetch_bundle(source, p.remote.skill_id) for p in wanted), return_exceptions=True
    )
    bundles: dict[str, SkillBundle] = {}
    failures: list[str] = []
    for plan, result in zip(wanted, results, strict=True):
        if isinstance(result, SkillBundle):
            bundles[plan.remote.skill_id] = result
        elif isinstance(result, (BackendError, SkillBundleError)):
            failures.append(f"FAILED  {_label(plan.remote)}: {_error_text(result)}")
        else:
            raise result
    return bundles, failures


def _write(deps: SyncDeps, plan: PlannedSkill, bundle: SkillBundle, *, keep_both: bool) -> str:
    target = plan.alt_name if keep_both else plan.dir_name
    try:
        install(deps.skills_dir, bundle, target)
        if keep_both:
            disown(deps.skills_dir, plan.dir_name)
    except (OSError, SkillBundleError) as exc:
        return f"FAILED  {_label(plan.remote)}: {_error_text(exc)}"
    where = deps.skills_dir / target / SKILL_FILE
    verb = "kept both:" if keep_both else ("updated" if plan.action is Action.UPDATE else "wrote  ")
    extra = f" (your edited copy stays in {plan.dir_name}/)" if keep_both else ""
    return f"{verb} {_label(plan.remote)} -> {where}{extra}"


def _remove(deps: SyncDeps, gone: Sequence[SyncedSkill], local: LocalSkills) -> list[str]:
    current = {s.dir_name: s for s in local.synced}
    lines: list[str] = []
    for skill in gone:
        now = current.get(skill.dir_name)
        if now is None or now.record.server_skill_id != skill.record.server_skill_id:
            lines.append(f"gone already {skill.dir_name}/")
            continue
        if now.edited:
            lines.append(f"kept {skill.dir_name}/: edited locally since you confirmed")
            continue
        try:
            remove_synced(deps.skills_dir, now)
            lines.append(f"removed {skill.dir_name}/ (deleted on the server)")
        except OSError as exc:
            lines.append(f"FAILED  removing {skill.dir_name}/: {_error_text(exc)}")
    return lines


def _apply(
    deps: SyncDeps,
    confirmed: Sequence[PlannedSkill],
    bundles: dict[str, SkillBundle],
    keep_both: set[str],
    removals: Sequence[SyncedSkill] = (),
) -> tuple[list[str], bool]:
    """Write (and remove) what the user confirmed, under the lock and re-planned from what is
    on disk now. Blocking: run it in a thread. Returns the report lines and whether anything
    changed."""
    lines: list[str] = []
    wrote = False
    with sync_lock(deps.skills_dir):
        local = scan(deps.skills_dir)
        fetched = [c for c in confirmed if c.remote.skill_id in bundles]
        for write in replan(fetched, keep_both, local):
            if write.skip:
                lines.append(f"skipped {_label(write.plan.remote)}: {write.skip}")
                continue
            bundle = bundles[write.plan.remote.skill_id]
            line = _write(deps, write.plan, bundle, keep_both=write.keep_both)
            lines.append(line)
            wrote = wrote or not line.startswith("FAILED")
        if removals:
            removed = _remove(deps, removals, local)
            lines.extend(removed)
            wrote = wrote or any(line.startswith("removed") for line in removed)
    return lines, wrote


def _recovered_scan(skills_dir: Path) -> LocalSkills:
    if not skills_dir.is_dir():
        return scan(skills_dir)  # nothing to recover, and nothing is created before a write
    with sync_lock(skills_dir):  # another sync's staging directories are not leftovers
        recover(skills_dir)
        return scan(skills_dir)


def _busy(exc: SyncBusy) -> Outcome:
    return Outcome(f"{_error_text(exc)}; try again in a moment. Nothing was written.", "warning")


def _finish(lines: list[str], *, wrote: bool) -> Outcome:
    failed = any(line.startswith("FAILED") for line in lines)
    if wrote:
        lines = [*lines, "Pi reloads now to list them."]
    # Pi reads skills at start-up: after a write it reloads, so the synced skills are listed
    return Outcome("\n".join(lines) or "Nothing to do.", "error" if failed else "info", reload=wrote)


async def sync_skills_flow(deps: SyncDeps, args: str, dialog: Dialog) -> Outcome:
    if deps.source is None:
        return Outcome(f"Skills cannot be synced: {deps.source_problem}", "warning")
    source = deps.source
    try:
        remote = await list_all_skills(source)
    except BackendError as exc:
        return Outcome(
            f"Could not list the server's skills, nothing was written: {_error_text(exc)}", "error"
        )
    if not remote:
        return Outcome("The server has no skills yet; nothing to sync.")
    try:
        local = await asyncio.to_thread(_recovered_scan, deps.skills_dir)
    except SyncBusy as exc:
        return _busy(exc)
    gone = server_deleted(remote, local)
    if not gone and all(p.action is Action.UP_TO_DATE for p in plan_sync(remote, local)):
        # nothing to do means no question
        current = [f"up to date {_label(r)}" for r in remote]
        return Outcome("\n".join([*current, f"Everything in {deps.skills_dir} is current; nothing to do."]))
    listing = "\n".join(f"{i + 1}. {_label(r)}" for i, r in enumerate(remote))
    header = f"{counted(len(remote), 'skill')} on the server:\n{listing}"
    try:
        if not dialog.has_ui:
            return await _unattended(deps, source, remote, local, gone, header, args)
        return await _interactive(deps, source, remote, local, gone, header, dialog)
    except SyncBusy as exc:
        return _busy(exc)


async def _unattended(
    deps: SyncDeps,
    source: SkillSource,
    remote: Sequence[RemoteSkillSummary],
    local: LocalSkills,
    gone: Sequence[SyncedSkill],
    header: str,
    args: str,
) -> Outcome:
    """No UI: list only, or with `--yes` write new skills and update unedited ones (never a
    local edit, never a removal)."""
    if YES_FLAG not in args.split():
        hint = (
            "No interactive UI here, so nothing was written. Run /tdai-memory-sync-skills in "
            f"interactive Pi, or add {YES_FLAG} to write new skills and update unedited ones "
            f"into {deps.skills_dir}."
        )
        return Outcome(f"{header}\n{hint}", "warning")
    plans = plan_sync(remote, local)
    bundles, lines = await _fetch(source, plans)
    for plan in plans:
        if plan.action is Action.UP_TO_DATE:
            lines.append(f"up to date {_label(plan.remote)}")
        elif plan.action is Action.CONFLICT:
            lines.append(f"skipped {plan.describe(deps.skills_dir)}; sync interactively to resolve")
    todo = [p for p in plans if p.action in (Action.CREATE, Action.UPDATE)]
    written, wrote = await asyncio.to_thread(_apply, deps, todo, bundles, set())
    lines[:0] = written
    lines.extend(
        f"not removed {s.dir_name}/: deleted on the server (sync interactively to remove)" for s in gone
    )
    return _finish(lines, wrote=wrote)


async def _choose(
    remote: Sequence[RemoteSkillSummary], header: str, dialog: Dialog, skills_dir: Path
) -> list[RemoteSkillSummary]:
    choice = await dialog.select(f"Sync skills into {skills_dir}", [ALL, CHOOSE, CANCEL], header)
    if choice == ALL:
        return list(remote)
    if choice != CHOOSE:
        raise Cancelled
    return [
        item
        for i, item in enumerate(remote)
        if await dialog.confirm(f"Sync skill {i + 1} of {len(remote)}?", _label(item))
    ]


async def _resolve_conflicts(deps: SyncDeps, plans: Sequence[PlannedSkill], dialog: Dialog) -> set[str]:
    """The skill ids the user wants as "keep both" (skipping, which keeps the edits, comes first)."""
    keep_both: set[str] = set()
    for plan in plans:
        if plan.action is not Action.CONFLICT:
            continue
        answer = await dialog.select(
            f"{plan.dir_name} was edited locally",
            [SKIP, KEEP_BOTH],
            f"{plan.describe(deps.skills_dir)}.\nKeep both writes the server version as "
            f"{deps.skills_dir / plan.alt_name}/ and leaves your edited copy to you.",
        )
        if answer == KEEP_BOTH:
            keep_both.add(plan.remote.skill_id)
    return keep_both


async def _interactive(
    deps: SyncDeps,
    source: SkillSource,
    remote: Sequence[RemoteSkillSummary],
    local: LocalSkills,
    gone: Sequence[SyncedSkill],
    header: str,
    dialog: Dialog,
) -> Outcome:
    try:
        chosen = await _choose(remote, header, dialog, deps.skills_dir)
    except Cancelled:
        return Outcome("Cancelled: nothing was written.")
    if not chosen and not gone:
        return Outcome("Nothing chosen: nothing was written.")
    plans = plan_sync(chosen, local)
    keep_both = await _resolve_conflicts(deps, plans, dialog)
    removable = [s for s in gone if not s.edited]
    remove = bool(removable) and await dialog.confirm(
        f"Remove {counted(len(removable), 'skill')} deleted on the server?",
        ", ".join(f"{s.dir_name}/" for s in removable),
    )
    todo = [p for p in plans if p.action in (Action.CREATE, Action.UPDATE) or p.remote.skill_id in keep_both]
    if not todo and not remove:
        lines = [f"up to date {_label(p.remote)}" for p in plans if p.action is Action.UP_TO_DATE]
        lines += [f"skipped {p.describe(deps.skills_dir)}" for p in plans if p.action is Action.CONFLICT]
        return _finish([*lines, "Nothing was written."], wrote=False)
    summary = [
        f"keep both: {_label(p.remote)} -> {deps.skills_dir / p.alt_name / SKILL_FILE}"
        if p.action is Action.CONFLICT
        else p.describe(deps.skills_dir)
        for p in todo
    ]
    if remove:
        summary += [f"remove {deps.skills_dir / s.dir_name}/ (deleted on the server)" for s in removable]
    if not await dialog.confirm(
        f"Write {counted(len(todo), 'skill')} into {deps.skills_dir}?", "\n".join(summary)
    ):
        return Outcome("Not confirmed: nothing was written.")
    bundles, lines = await _fetch(source, todo)
    written, wrote = await asyncio.to_thread(
        _apply, deps, todo, bundles, keep_both, removable if remove else ()
    )
    lines.extend(written)
    for plan in plans:
        if plan.action is Action.UP_TO_DATE:
            lines.append(f"up to date {_label(plan.remote)}")
        elif plan.action is Action.CONFLICT and plan.remote.skill_id not in keep_both:
            lines.append(f"skipped {plan.describe(deps.skills_dir)}")
    lines.extend(f"kept {s.dir_name}/: deleted on the server but edited locally" for s in gone if s.edited)
    return _finish(lines, wrote=wrote)
