"""The project file sandbox: a repository may tune recall, and only to make it cheaper.

A project file comes from whoever wrote the repository. It may set `recall` keys and nothing
else (no endpoint, identity, keys, TLS, backend or permissions), and each value may only lower
the cost of recall relative to the user's own settings.

Whatever a project file gets wrong is refused by name and the rest of it is kept: a key it may
not set, an unknown or ill-typed key, a value that would raise the cost (the user's value
stays). Each refusal is a warning. Refusing the whole file, or switching recall off because of
one bad key, would let a cloned repository silence the user's memory by writing a key it knows
will be refused; keeping the user's budget as the ceiling is enough.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from pi_memory_bridge.config._models import BridgeConfig, RecallSettings
from pi_memory_bridge.config._problems import (
    ConfigProblem,
    problems_from_validation,
    unknown_key_message,
    warning,
)

_Cheaper = Literal["lower", "higher"]

# For every recall setting, which direction makes recall cheaper (fewer or smaller lookups).
CHEAPER_DIRECTION: dict[str, _Cheaper] = {
    "enabled": "lower",
    "deadline_ms": "lower",
    "l0_limit": "lower",
    "l1_limit": "lower",
    "l2_limit": "lower",
    "skill_limit": "lower",
    "max_chars": "lower",
    "branch_max_chars": "lower",
    "skip_trivial_prompts": "higher",
    "min_prompt_chars": "higher",
}


@dataclass(frozen=True)
class SandboxedProject:
    """`recall` holds the camelCase recall keys to apply; `problems` names each refused key."""

    recall: dict[str, Any]
    problems: tuple[ConfigProblem, ...]


def sandbox_project(data: dict[str, Any], path: Path, ceiling: RecallSettings) -> SandboxedProject:
    problems = _refused_top_level_keys(data, path)
    recall = data.get("recall", {})
    if not isinstance(recall, dict):
        problems.append(warning("recall", path, "must be an object of recall settings; ignored"))
        recall = {}
    kept: dict[str, Any] = {}
    for alias, value in recall.items():
        invalid = _invalid_recall_value(alias, value, path)
        if invalid:
            problems.extend(invalid)
            continue
        name = _field_name(alias)
        refusal = _raise_refusal(name, value, getattr(ceiling, name))
        if refusal is None:
            kept[alias] = value
        else:
            problems.append(warning(f"recall.{alias}", path, refusal))
    return SandboxedProject(recall=kept, problems=tuple(problems))


def _refused_top_level_keys(data: dict[str, Any], path: Path) -> list[ConfigProblem]:
    allowed = {"recall"}
    known = {field.alias or name for name, field in BridgeConfig.model_fields.items()}
    problems: list[ConfigProblem] = []
    for key in data:
        if key in allowed:
            continue
        if key in known:
            message = f"a project file may set only recall settings; set {key} in the global config"
        else:
            message = unknown_key_message(key, allowed)
        problems.append(warning(key, path, f"{message}; ignored"))
    return problems


def _invalid_recall_value(alias: str, value: Any, path: Path) -> list[ConfigProblem]:
    """Why `recall.<alias>: value` is refused (unknown key, wrong type or range), as warnings."""
    try:
        BridgeConfig.model_validate({"recall": {alias: value}}, by_alias=True, by_name=False)
    except ValidationError as exc:
        return [
            warning(p.key, p.source, f"{p.message}; ignored")
            for p in problems_from_validation(exc, BridgeConfig, path)
        ]
    return []


def _field_name(alias: str) -> str:
    return next(name for name, field in RecallSettings.model_fields.items() if alias in (field.alias, name))


def _raise_refusal(name: str, value: Any, current: Any) -> str | None:
    direction = CHEAPER_DIRECTION.get(name)
    if direction is None:
        # A setting nobody classified yet cannot be proven cheaper, so a project may not touch it.
        return "cannot be set by a project file; ignored"
    allowed = value <= current if direction == "lower" else value >= current
    if allowed:
        return None
    shown, limit = json.dumps(value), json.dumps(current)
    if isinstance(current, bool):
        verb = "turn it on" if value else "turn it off"
        return f"a project may make recall only cheaper, not {verb} (the current value is {limit}); ignored"
    bound = "above" if direction == "lower" else "below"
    return (
        f"{shown} is {bound} the current {limit}; a project may make recall only cheaper, "
        "so this value is ignored"
    )
