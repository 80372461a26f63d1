"""The project file sandbox: a repository may tune recall, and only to make it cheaper.

A project file comes from whoever wrote the repository. It may set `recall` keys and nothing
else (no endpoint, identity, keys, TLS, backend or permissions), and each value may only lower
the cost of recall relative to the user's own settings. A value that would raise it is a
warning and is ignored (the user's value stays): the file is well-formed and the rest of it is
a legitimate request, so dropping just that value keeps the user's budget as the ceiling
without punishing the project for asking.
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
    error,
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
    "skip_trivial_prompts": "higher",
    "min_prompt_chars": "higher",
}


@dataclass(frozen=True)
class SandboxedProject:
    """`recall` holds the camelCase recall keys to apply, or None when the file is refused."""

    recall: dict[str, Any] | None
    problems: tuple[ConfigProblem, ...]


def sandbox_project(data: dict[str, Any], path: Path, ceiling: RecallSettings) -> SandboxedProject:
    problems = _forbidden_keys(data, path)
    recall = data.get("recall", {})
    try:
        BridgeConfig.model_validate({"recall": recall}, by_alias=True, by_name=False)
    except ValidationError as exc:
        problems.extend(problems_from_validation(exc, BridgeConfig, path))
    if problems:
        return SandboxedProject(recall=None, problems=tuple(problems))
    kept: dict[str, Any] = {}
    ignored: list[ConfigProblem] = []
    for alias, value in recall.items():
        name = _field_name(alias)
        refusal = _raise_refusal(name, value, getattr(ceiling, name))
        if refusal is None:
            kept[alias] = value
        else:
            ignored.append(warning(f"recall.{alias}", path, refusal))
    return SandboxedProject(recall=kept, problems=tuple(ignored))


def _forbidden_keys(data: dict[str, Any], path: Path) -> list[ConfigProblem]:
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
        problems.append(error(key, path, message))
    return problems


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
