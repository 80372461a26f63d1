"""Plan a sync of server skills into `<agent-dir>/skills/`, and carry out one skill at a time.

Planning is pure: it decides for each chosen server skill which directory it goes to and whether
that is a new skill, an update of one we wrote, one already up to date, or a conflict with a
local edit. Names never collide: a skill we synced keeps its directory; every other skill gets its
sanitised name, or `<name>-2`, `<name>-3`, ... when that is taken by anything (a user's skill,
another server skill, a file).

Several Pi processes may sync at once. Each takes `sync_lock` to write, and re-plans under it
(`replan`) from what is on disk then, so two syncs never pick the same new name, never write one
skill twice under two names, and never replace an edit made after the user confirmed.
"""

from __future__ import annotations

import contextlib
import enum
import fcntl
import os
import time
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from pi_memory_bridge.skills._atomic import discard, new_stage, swap_in, write_tree
from pi_memory_bridge.skills._bundle import RECORD_FILE, SKILL_FILE, SkillBundle, SkillBundleError
from pi_memory_bridge.skills._frontmatter import (
    FrontMatterError,
    render_skill_md,
    sanitize_name,
    split_front_matter,
    with_suffix,
)
from pi_memory_bridge.skills._local import LocalSkills, OwnershipRecord, SyncedSkill, sha256_hex
from pi_memory_bridge.skills._source import RemoteSkillSummary

_MAX_SUFFIX = 1000
LOCK_WAIT_S = 30.0


class SyncBusy(Exception):
    """Another process held the skills directory's sync lock for longer than we waited."""


class Action(enum.StrEnum):
    CREATE = "new"
    UPDATE = "update"
    UP_TO_DATE = "up to date"
    CONFLICT = "edited locally"


@dataclass(frozen=True, slots=True)
class PlannedSkill:
    remote: RemoteSkillSummary
    action: Action
    dir_name: str  # the directory written (for CONFLICT: the edited one)
    alt_name: str = ""  # CONFLICT only: where "keep both" writes the server version
    edited: tuple[str, ...] = ()
    renamed_from: str = ""  # the sanitised name was taken, so `dir_name` carries a suffix

    def describe(self, skills_dir: Path) -> str:
        where = skills_dir / self.dir_name / SKILL_FILE
        label = f"{self.remote.name} (v{self.remote.version})"
        if self.action is Action.CONFLICT:
            return f"{label}: {where} was edited locally ({', '.join(self.edited[:5])})"
        note = f" (name {self.renamed_from!r} is taken)" if self.renamed_from else ""
        return f"{label}: {self.action.value} -> {where}{note}"


def base_name(remote: RemoteSkillSummary) -> str:
    return sanitize_name(remote.name) or sanitize_name(f"skill-{remote.skill_id}") or "skill"


def _free_name(base: str, taken: set[str]) -> str:
    if base not in taken:
        return base
    for n in range(2, _MAX_SUFFIX):
        candidate = with_suffix(base, n)
        if candidate not in taken:
            return candidate
    raise ValueError(f"no free skill name near {base!r}")


def plan_sync(chosen: Sequence[RemoteSkillSummary], local: LocalSkills) -> list[PlannedSkill]:
    owned = local.by_server_id()
    taken = {name.casefold() for name in local.taken}
    planned: dict[str, PlannedSkill] = {}
    for remote in chosen:  # skills we wrote before keep their directories
        mine = owned.get(remote.skill_id)
        if mine is None:
            continue
        fresh = mine.record.version == remote.version
        if mine.edited and not fresh:
            continue  # a conflict: its alternative name is chosen below, with the new skills
        # An edited copy of the version the server still has is the user's to keep; nothing to ask.
        planned[remote.skill_id] = PlannedSkill(
            remote, Action.UP_TO_DATE if fresh else Action.UPDATE, mine.dir_name, edited=mine.edited
        )
    for remote in chosen:
        if remote.skill_id in planned:
            continue
        base = base_name(remote)
        name = _free_name(base, taken)
        taken.add(name)
        mine = owned.get(remote.skill_id)
        if mine is not None:  # edited locally: never replaced without asking
            planned[remote.skill_id] = PlannedSkill(
                remote, Action.CONFLICT, mine.dir_name, alt_name=name, edited=mine.edited
            )
        else:
            planned[remote.skill_id] = PlannedSkill(
                remote, Action.CREATE, name, renamed_from=base if name != base else ""
            )
    return [planned[r.skill_id] for r in chosen if r.skill_id in planned]


@dataclass(frozen=True, slots=True)
class Write:
    """One confirmed skill as it stands at write time: what to do now, or why not."""

    plan: PlannedSkill  # planned afresh against the directory as it is now
    keep_both: bool = False
    skip: str = ""  # not written, and why


def replan(confirmed: Sequence[PlannedSkill], keep_both: Collection[str], local: LocalSkills) -> list[Write]:
    """Re-plan what the user confirmed against the directory as it is now (under `sync_lock`):
    a skill written meanwhile by another sync is up to date, a name taken meanwhile gives way to
    the next free one, and a skill edited after the confirmation is skipped unless the user
    already chose to keep both."""
    fresh = {p.remote.skill_id: p for p in plan_sync([c.remote for c in confirmed], local)}
    writes: list[Write] = []
    for chosen in confirmed:
        plan = fresh[chosen.remote.skill_id]
        if plan.action is Action.UP_TO_DATE:
            writes.append(Write(plan, skip="already up to date (synced meanwhile by another Pi)"))
        elif plan.action is Action.CONFLICT and chosen.remote.skill_id not in keep_both:
            writes.append(Write(plan, skip="edited locally since you confirmed; sync again to resolve"))
        else:
            writes.append(Write(plan, keep_both=plan.action is Action.CONFLICT))
    return writes


@contextlib.contextmanager
def sync_lock(skills_dir: Path, *, wait_s: float | None = None, poll_s: float = 0.05) -> Iterator[None]:
    """Hold the skills directory's sync lock: an flock on the directory itself, so no lock file
    litters it and a crashed holder releases it. Creates the directory. Raises `SyncBusy` after
    `wait_s`: the caller says so rather than blocking a command for good."""
    skills_dir.mkdir(mode=0o755, parents=True, exist_ok=True)
    fd = os.open(skills_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        deadline = time.monotonic() + (LOCK_WAIT_S if wait_s is None else wait_s)
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise SyncBusy(f"another skill sync is writing into {skills_dir}") from None
                time.sleep(poll_s)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def server_deleted(all_remote: Sequence[RemoteSkillSummary], local: LocalSkills) -> list[SyncedSkill]:
    """Skills we synced whose server skill is gone (listed from a complete server listing only)."""
    alive = {r.skill_id for r in all_remote}
    return [s for s in local.synced if s.record.server_skill_id not in alive]


def render_files(bundle: SkillBundle, dir_name: str) -> list[tuple[str, bytes]]:
    try:
        doc = split_front_matter(bundle.skill_md)
        skill_md = render_skill_md(
            dir_name, doc.fields.get("description") or bundle.description or bundle.name, doc.body
        )
    except FrontMatterError as exc:
        raise SkillBundleError(f"SKILL.md of {bundle.name!r}: {exc}") from None
    return [(SKILL_FILE, skill_md.encode("utf-8")), *bundle.files]


def install(skills_dir: Path, bundle: SkillBundle, dir_name: str, *, now: datetime | None = None) -> None:
    """Write `bundle` as `<skills_dir>/<dir_name>/`, replacing what is there in one step."""
    files = render_files(bundle, dir_name)
    record = OwnershipRecord(
        server_skill_id=bundle.skill_id,
        server_name=bundle.name,
        version=bundle.version,
        synced_at=now or datetime.now(UTC),
        files={rel: sha256_hex(data) for rel, data in files},
    )
    skills_dir.mkdir(mode=0o755, parents=True, exist_ok=True)
    stage = new_stage(skills_dir)
    try:
        write_tree(stage, [*files, (RECORD_FILE, record.model_dump_json(indent=2).encode("utf-8"))])
        swap_in(stage, skills_dir / dir_name)
    finally:
        discard(stage)


def disown(skills_dir: Path, dir_name: str) -> None:
    """Hand a synced directory over to the user: drop our record, keep every file."""
    (skills_dir / dir_name / RECORD_FILE).unlink(missing_ok=True)


def remove_synced(skills_dir: Path, skill: SyncedSkill) -> None:
    """Delete a skill we wrote (callers check it is unedited); it vanishes in one rename."""
    doomed = new_stage(skills_dir)
    os.rename(skills_dir / skill.dir_name, doomed)
    discard(doomed)
