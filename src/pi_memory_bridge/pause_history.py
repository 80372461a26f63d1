"""When memory was paused, per project: what catch-up and import need to skip what was said then.

A pause is the user's word that nothing of that time is kept. Live capture honours it as it
happens; catch-up and import read Pi's session files later, after a resume, so they need the
times: `<data dir>/pause-history.json` holds, per project (the same key as `pausedProjects`: the
git root, else the directory), each period as `[paused at, resumed at or null]` in epoch ms.

A turn belongs to a paused period when its user message was said at or after the pause and
before the resume. A project listed as paused with no period on record (paused by a version
before this file) is paused for all of its turns, as it always was. A damaged or foreign history
file counts as no history (the current pause still holds) and is replaced on the next change.
"""

from __future__ import annotations

import json
import time
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pi_memory_bridge.private_files import write_atomically

HISTORY_FILE: Final = "pause-history.json"
MAX_HISTORY_BYTES: Final = 1 << 20
# Periods kept per project; the oldest go first (a turn that old was caught up long ago).
MAX_PERIODS: Final = 200

Period = tuple[int, int | None]  # (paused at, resumed at), epoch ms


class _History(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=True)
    schema_version: int = Field(1, alias="schemaVersion")
    projects: dict[str, list[tuple[int, int | None]]] = Field(default_factory=dict)


def history_path(data_dir: Path) -> Path:
    return data_dir / HISTORY_FILE


def _read(path: Path) -> _History:
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_HISTORY_BYTES + 1)
    except OSError:
        return _History()
    if len(raw) > MAX_HISTORY_BYTES:
        return _History()
    try:
        return _History.model_validate_json(raw)
    except ValidationError:
        return _History()


def _write(path: Path, history: _History) -> None:
    write_atomically(path, json.dumps(history.model_dump(by_alias=True), indent=1) + "\n")


def record(data_dir: Path, project: str, *, paused: bool, now_ms: int | None = None) -> None:
    """Note that `project` was paused (a period opens) or resumed (the open one closes) now.
    Raises OSError when the file cannot be written."""
    now = now_ms if now_ms is not None else int(time.time() * 1000)
    path = history_path(data_dir)
    history = _read(path)
    periods = list(history.projects.get(project, []))
    is_open = bool(periods) and periods[-1][1] is None
    if paused and not is_open:
        periods.append((now, None))
    elif not paused and is_open:
        periods[-1] = (periods[-1][0], max(now, periods[-1][0]))
    else:
        return
    history.projects[project] = periods[-MAX_PERIODS:]
    _write(path, history)


@dataclass(frozen=True, slots=True)
class PausedPeriods:
    """Which turns were said while their project was paused."""

    periods: dict[str, tuple[Period, ...]]
    paused_now: frozenset[str]

    @classmethod
    def load(cls, data_dir: Path, paused_now: Collection[str]) -> PausedPeriods:
        history = _read(history_path(data_dir))
        periods = {project: tuple(spans) for project, spans in history.projects.items()}
        return cls(periods, frozenset(paused_now))

    def covers(self, project: str, said_at_ms: int | None) -> bool:
        periods = self.periods.get(project, ())
        if project in self.paused_now and (not periods or periods[-1][1] is not None):
            return True  # paused with no period on record: all of it, as before this file
        if said_at_ms is None:
            return bool(periods)  # when it was said is unknown: doubtful, so not kept
        return any(start <= said_at_ms and (end is None or said_at_ms < end) for start, end in periods)

    @property
    def empty(self) -> bool:
        return not self.paused_now and not any(self.periods.values())
