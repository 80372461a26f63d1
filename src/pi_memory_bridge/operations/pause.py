"""Pausing memory for one project: `/tdai-memory-pause`, `/tdai-memory-resume`, and the terminal's
`pause` and `resume`.

A project is `project.project_of` (the git root with symlinks resolved, the same one learning
files its memories under). The paused ones are listed in the global config (`pausedProjects`),
written atomically (0600) like every config change; a file with errors is never rewritten. While
paused, nothing of this project is captured and nothing is recalled into it; other projects go on.

`ProjectPause` answers "is this project paused?" from the file, re-read only when it changed, so
a pause said in one Pi session holds in every other session of that project at its next turn.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from pi_memory_bridge.config import (
    BridgeConfig,
    global_config_path,
    read_json_object,
    write_global_config,
)
from pi_memory_bridge.operations.global_config import read_existing
from pi_memory_bridge.project import project_of


def _paused_in(data: dict[str, object] | None) -> frozenset[str] | None:
    if data is None:
        return frozenset()
    try:
        return frozenset(BridgeConfig.model_validate(data, by_alias=True, by_name=False).paused_projects)
    except ValidationError:
        return None  # a file being edited: keep what was known


def paused_check(agent_dir: Path) -> Callable[[str | None], bool]:
    """Whether a session started in a given working directory belongs to a paused project, as the
    global config says now (catch-up asks this of each session file it reads)."""
    read = read_json_object(global_config_path(agent_dir))
    listed = _paused_in(read.data if read.exists else None) or frozenset()

    def paused(cwd: str | None) -> bool:
        return bool(listed) and cwd is not None and project_of(Path(cwd)) in listed

    return paused


class ProjectPause:
    """Whether capture and recall are paused for the project at `cwd`."""

    def __init__(self, agent_dir: Path, cwd: Path) -> None:
        self.agent_dir = agent_dir
        self.project = project_of(cwd)
        self._path = global_config_path(agent_dir)
        self._seen: tuple[int, int, int] | None = None
        self._paused = False

    def paused(self) -> bool:
        try:
            info = os.stat(self._path)
            stamp = (info.st_ino, info.st_mtime_ns, info.st_size)
        except OSError:
            stamp = (0, 0, 0)
        if stamp != self._seen:
            read = read_json_object(self._path)
            listed = _paused_in(read.data if read.exists else None)
            if listed is not None:
                self._paused = self.project in listed
            self._seen = stamp
        return self._paused


@dataclass(frozen=True, slots=True)
class PauseOutcome:
    ok: bool
    changed: bool
    message: str


def set_paused(agent_dir: Path, project: str, paused: bool) -> PauseOutcome:
    """Add `project` to (or remove it from) the global file's `pausedProjects`."""
    existing = read_existing(agent_dir)
    if existing.exists and existing.config is None:
        problems = "; ".join(existing.problems)
        return PauseOutcome(False, False, f"{existing.path} has errors, so it was not changed: {problems}")
    config = existing.config or BridgeConfig()
    listed = list(config.paused_projects)
    if (project in listed) == paused:
        state = "already paused" if paused else "not paused"
        return PauseOutcome(True, False, f"Memory is {state} for {project}.")
    listed = [*listed, project] if paused else [p for p in listed if p != project]
    try:
        write_global_config(agent_dir, config.model_copy(update={"paused_projects": listed}))
    except OSError as exc:
        return PauseOutcome(False, False, f"could not write {existing.path}: {exc}")
    if paused:
        message = (
            f"Memory is paused for {project}: nothing here is captured or recalled, in every Pi "
            "session of this project, until /tdai-memory-resume. Other projects are not affected."
        )
    else:
        message = f"Memory is on again for {project}."
    return PauseOutcome(True, True, message)
