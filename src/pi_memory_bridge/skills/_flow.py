"""`/tdai-memory-sync-skills`: write chosen server skills as Pi-native skills.

With a UI: list every server skill (all pages), let the user pick all, some or none (cancel means
nothing), show what goes where, confirm, then write each skill atomically. A skill edited locally
since we wrote it is never replaced silently: the user skips it or keeps both (the server version
goes under a new name and the edited copy becomes the user's). Skills deleted on the server are
removed only when the user agrees, and only if unedited.

Without a UI: list only. `--yes` writes new skills and updates unedited ones, and still never
touches local edits nor removes anything.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pi_memory_bridge.backends.base import BackendError
from pi_memory_bridge.commands.flows import Answer, Flow, done
from pi_memory_bridge.protocol import CommandStep
from pi_memory_bridge.redact import redact_text
from pi_memory_bridge.skills._atomic import recover
from pi_memory_bridge.skills._bundle import SKILL_FILE, SkillBundle, SkillBundleError, fetch_bundle
from pi_memory_bridge.skills._local import SyncedSkill, scan
from pi_memory_bridge.skills._source import RemoteSkillSummary, SkillSource, list_all_skills
from pi_memory_bridge.skills._sync import (
    Action,
    PlannedSkill,
    disown,
    install,
    plan_sync,
    remove_synced,
    server_deleted,
)

ALL = "Sync all of them"
CHOOSE = "Choose one by one"
CANCEL = "Cancel"
SKIP = "Skip it (keep my edits)"
KEEP_BOTH = "Keep both"
YES_FLAG = "--yes"
STATUS_SYNCED = "memory: skills synced"
STATUS_FAILED = "memory: skill sync failed"


@dataclass(frozen=True, slots=True)
class SyncDeps:
    source: SkillSource | None
    source_problem: str  # why there is no source (e.g. the local backend has no skills)
    skills_dir: Path  # <agent-dir>/skills


def _step(kind: str, title: str, message: str = "", options: Sequence[str] = ()) -> CommandStep:
    return CommandStep.model_validate(
        {"kind": kind, "title": title, "message": message, "options": list(options)}
    )


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


def _remove(deps: SyncDeps, gone: Sequence[SyncedSkill]) -> list[str]:
    lines: list[str] = []
    for skill in gone:
        try:
            remove_synced(deps.skills_dir, skill)
            lines.append(f"removed {skill.dir_name}/ (deleted on the server)")
        except OSError as exc:
            lines.append(f"FAILED  removing {skill.dir_name}/: {_error_text(exc)}")
    return lines


def _finish(lines: list[str], *, wrote: bool) -> CommandStep:
    failed = any(line.startswith("FAILED") for line in lines)
    if wrote:
        lines = [*lines, "Reload Pi (/reload) if the new skills do not show up."]
    return done(
        "\n".join(lines) or "Nothing to do.",
        "error" if failed else "info",
        STATUS_FAILED if failed else (STATUS_SYNCED if wrote else None),
    )


async def sync_skills_flow(deps: SyncDeps, args: str, *, has_ui: bool) -> Flow:
    if deps.source is None:
        yield done(f"Skills cannot be synced: {deps.source_problem}", "warning")
        return
    source = deps.source
    try:
        remote = await list_all_skills(source)
    except BackendError as exc:
        yield done(
            f"Could not list the server's skills, nothing was written: {_error_text(exc)}",
            "error",
            STATUS_FAILED,
        )
        return
    if not remote:
        yield done("The server has no skills yet; nothing to sync.")
        return
    await asyncio.to_thread(recover, deps.skills_dir)
    local = await asyncio.to_thread(scan, deps.skills_dir)
    listing = "\n".join(f"{i + 1}. {_label(r)}" for i, r in enumerate(remote))
    header = f"{len(remote)} skill(s) on the server:\n{listing}"
    gone = server_deleted(remote, local)

    if not has_ui:
        if YES_FLAG not in args.split():
            hint = (
                "No interactive UI here, so nothing was written. Run /tdai-memory-sync-skills in "
                f"interactive Pi, or add {YES_FLAG} to write new skills and update unedited ones "
                f"into {deps.skills_dir}."
            )
            yield done(f"{header}\n{hint}", "warning")
            return
        plans = plan_sync(remote, local)
        bundles, lines = await _fetch(source, plans)
        wrote = False
        for plan in plans:
            if plan.action is Action.UP_TO_DATE:
                lines.append(f"up to date {_label(plan.remote)}")
            elif plan.action is Action.CONFLICT:
                lines.append(f"skipped {plan.describe(deps.skills_dir)}; sync interactively to resolve")
            elif plan.remote.skill_id in bundles:
                lines.append(
                    await asyncio.to_thread(
                        _write, deps, plan, bundles[plan.remote.skill_id], keep_both=False
                    )
                )
                wrote = wrote or not lines[-1].startswith("FAILED")
        lines.extend(
            f"not removed {s.dir_name}/: deleted on the server (sync interactively to remove)" for s in gone
        )
        yield _finish(lines, wrote=wrote)
        return

    choice: Answer = yield _step(
        "select", f"Sync skills into {deps.skills_dir}", header, [ALL, CHOOSE, CANCEL]
    )
    chosen: list[RemoteSkillSummary]
    if choice == ALL:
        chosen = list(remote)
    elif choice == CHOOSE:
        chosen = []
        for i, item in enumerate(remote):
            pick: Answer = yield _step("confirm", f"Sync skill {i + 1} of {len(remote)}?", _label(item))
            if pick is True:
                chosen.append(item)
    else:
        yield done("Cancelled: nothing was written.")
        return
    if not chosen and not gone:
        yield done("Nothing chosen: nothing was written.")
        return

    plans = plan_sync(chosen, local)
    keep_both: set[str] = set()
    for plan in plans:
        if plan.action is Action.CONFLICT:
            answer: Answer = yield _step(
                "select",
                f"{plan.dir_name} was edited locally",
                f"{plan.describe(deps.skills_dir)}.\nKeep both writes the server version as "
                f"{deps.skills_dir / plan.alt_name}/ and leaves your edited copy to you.",
                [SKIP, KEEP_BOTH],
            )
            if answer == KEEP_BOTH:
                keep_both.add(plan.remote.skill_id)
    removable = [s for s in gone if not s.edited]
    remove = False
    if removable:
        names = ", ".join(f"{s.dir_name}/" for s in removable)
        answer = yield _step("confirm", f"Remove {len(removable)} skill(s) deleted on the server?", names)
        remove = answer is True

    todo = [p for p in plans if p.action in (Action.CREATE, Action.UPDATE) or p.remote.skill_id in keep_both]
    if not todo and not remove:
        lines = [f"up to date {_label(p.remote)}" for p in plans if p.action is Action.UP_TO_DATE]
        lines += [f"skipped {p.describe(deps.skills_dir)}" for p in plans if p.action is Action.CONFLICT]
        yield _finish([*lines, "Nothing was written."], wrote=False)
        return
    summary = [
        f"keep both: {_label(p.remote)} -> {deps.skills_dir / p.alt_name / SKILL_FILE}"
        if p.action is Action.CONFLICT
        else p.describe(deps.skills_dir)
        for p in todo
    ]
    if remove:
        summary += [f"remove {deps.skills_dir / s.dir_name}/ (deleted on the server)" for s in removable]
    sure: Answer = yield _step(
        "confirm", f"Write {len(todo)} skill(s) into {deps.skills_dir}?", "\n".join(summary)
    )
    if sure is not True:
        yield done("Not confirmed: nothing was written.")
        return

    bundles, lines = await _fetch(source, todo)
    wrote = False
    for plan in todo:
        bundle = bundles.get(plan.remote.skill_id)
        if bundle is None:
            continue
        line = await asyncio.to_thread(
            _write, deps, plan, bundle, keep_both=plan.remote.skill_id in keep_both
        )
        lines.append(line)
        wrote = wrote or not line.startswith("FAILED")
    for plan in plans:
        if plan.action is Action.UP_TO_DATE:
            lines.append(f"up to date {_label(plan.remote)}")
        elif plan.action is Action.CONFLICT and plan.remote.skill_id not in keep_both:
            lines.append(f"skipped {plan.describe(deps.skills_dir)}")
    if remove:
        removed = await asyncio.to_thread(_remove, deps, removable)
        lines.extend(removed)
        wrote = wrote or any(line.startswith("removed") for line in removed)
    lines.extend(f"kept {s.dir_name}/: deleted on the server but edited locally" for s in gone if s.edited)
    yield _finish(lines, wrote=wrote)
