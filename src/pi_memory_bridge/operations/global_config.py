"""The setup wizard's side of the global config file: read it, merge the new MemoryCore section
into it, render what would be written, and show the change as a diff.

The existing file is read on its own (no environment, no project file), because what setup
writes replaces that file: the user's other settings must survive, and a file with errors is
never overwritten (its author may be halfway through an edit we cannot read).
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from pi_memory_bridge.config import (
    BridgeConfig,
    MemoryCoreSettings,
    global_config_path,
    problems_from_validation,
    read_json_object,
)


@dataclass(frozen=True, slots=True)
class ExistingConfig:
    """The global file as it stands: `config` is None when there is no file or it has errors."""

    path: Path
    exists: bool
    config: BridgeConfig | None
    problems: tuple[str, ...]


def read_existing(agent_dir: Path) -> ExistingConfig:
    path = global_config_path(agent_dir)
    read = read_json_object(path)
    if not read.exists:
        return ExistingConfig(path, False, None, ())
    problems = [str(p) for p in read.problems if p.severity == "error"]
    if read.data is None or problems:
        return ExistingConfig(path, True, None, tuple(problems) or (f"{path}: cannot be used",))
    try:
        config = BridgeConfig.model_validate(read.data, by_alias=True, by_name=False)
    except ValidationError as exc:
        return ExistingConfig(
            path, True, None, tuple(str(p) for p in problems_from_validation(exc, BridgeConfig, path))
        )
    return ExistingConfig(path, True, config, ())


def merged_config(existing: BridgeConfig | None, memorycore: MemoryCoreSettings) -> BridgeConfig:
    """`existing` with memory on, the memorycore backend selected and `memorycore` as its section."""
    base = existing if existing is not None else BridgeConfig()
    if base.memorycore is not None:
        # A timeout the user tuned by hand is theirs to keep; the wizard does not ask for it.
        memorycore = memorycore.model_copy(update={"timeout_ms": base.memorycore.timeout_ms})
    return base.model_copy(update={"enabled": True, "backend": "memorycore", "memorycore": memorycore})


def render(config: BridgeConfig) -> str:
    """The text `write_global_config` writes for `config` (same dump options)."""
    checked = BridgeConfig.model_validate(config.model_dump(), by_alias=True, by_name=False)
    return json.dumps(checked.model_dump(mode="json", exclude_none=True), indent=2, ensure_ascii=False) + "\n"


def preview(existing: ExistingConfig, new: BridgeConfig) -> str:
    """A unified diff from the current file (in the canonical form it will be rewritten in)."""
    before = render(existing.config) if existing.config is not None else ""
    after = render(new)
    label = str(existing.path)
    lines = difflib.unified_diff(
        before.splitlines(),
        after.splitlines(),
        fromfile=f"{label} (current)" if existing.exists else "(no file yet)",
        tofile=f"{label} (new)",
        lineterm="",
        n=2,
    )
    return "\n".join(lines) or "(no change)"
