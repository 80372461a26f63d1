"""Model text -> a validated answer, or the reason it was refused (fail-closed, nothing guessed).

The only leniency: one Markdown code fence around the whole answer is taken off, since models
add it even when told not to. Prose around the JSON, two objects, a truncated object, a key we
did not ask for: all refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from pi_memory_bridge.learning.schemas import FailReason

T = TypeVar("T", bound=BaseModel)

_FENCE = re.compile(r"\A```[a-zA-Z]*[ \t]*\n(?P<body>.*)\n[ \t]*```\Z", re.DOTALL)
_LIST_FIELDS = frozenset({"memories", "decisions"})


@dataclass(frozen=True, slots=True)
class Refused:
    reason: FailReason
    detail: str = ""


def _unfenced(text: str) -> str:
    stripped = text.strip()
    match = _FENCE.match(stripped)
    return match.group("body").strip() if match else stripped


def parse_answer(text: str, schema: type[T]) -> T | Refused:
    body = _unfenced(text)
    if not body.startswith("{"):
        return Refused(FailReason.UNPARSEABLE, "the answer is not a JSON object")
    try:
        return schema.model_validate_json(body, strict=True)
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=False)
    types = {e["type"] for e in errors}
    # never the offending values: they may be conversation text, and this goes to logs and status
    detail = "; ".join(f"{'.'.join(map(str, e['loc'])) or '(answer)'}: {e['type']}" for e in errors[:3])
    if types & {"json_invalid", "json_type"}:
        return Refused(FailReason.UNPARSEABLE, detail)
    if any(e["type"] == "too_long" and tuple(e["loc"]) in {(f,) for f in _LIST_FIELDS} for e in errors):
        return Refused(FailReason.TOO_MANY, detail)
    return Refused(FailReason.OFF_SCHEMA, detail)
