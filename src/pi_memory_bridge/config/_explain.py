"""Wording for config problems: pydantic's validation errors and unknown keys, from the schema.

Imported only when the configuration has something wrong with it (see `_problems`).
"""

from __future__ import annotations

import difflib
import types
import typing
from pathlib import Path
from typing import Any, Literal

import annotated_types
from pydantic import BaseModel, ValidationError
from pydantic.alias_generators import to_camel
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails

from pi_memory_bridge.config._problems import TLS_OFF_MESSAGE, ConfigProblem, error, is_tls_key


def explain_validation(
    exc: ValidationError, model: type[BaseModel], source: str | Path
) -> list[ConfigProblem]:
    """One problem per distinct failing key, worded from the schema rather than pydantic's prose."""
    problems: list[ConfigProblem] = []
    seen: set[str] = set()
    for detail in exc.errors():
        loc = tuple(str(part) for part in detail["loc"])
        problem = error(".".join(loc), source, _message(detail, model, loc))
        if str(problem) not in seen:
            seen.add(str(problem))
            problems.append(problem)
    return problems


def explain_unknown_key(name: str, known: typing.Iterable[str]) -> str:
    if is_tls_key(name):
        return TLS_OFF_MESSAGE
    known = sorted(known)
    camel = to_camel(name)
    if camel != name and camel in known:
        return f'unknown key (keys are camelCase: did you mean "{camel}"?)'
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.75)
    if close:
        return f'unknown key (did you mean "{close[0]}"?)'
    return "unknown key"


def _message(detail: ErrorDetails, model: type[BaseModel], loc: tuple[str, ...]) -> str:
    kind = detail["type"]
    if kind == "extra_forbidden":
        parent = _model_at(model, loc[:-1])
        known = _aliases(parent) if parent is not None else ()
        return explain_unknown_key(loc[-1], known)
    if kind in ("value_error", "assertion_error"):
        cause = (detail.get("ctx") or {}).get("error")
        return str(cause) if cause is not None else detail["msg"]
    if kind == "literal_error" and loc == ("schemaVersion",):
        return "must be 1 (this version of pi-memory-bridge reads schema version 1)"
    field = _field_at(model, loc)
    expectation = describe_field(field) if field is not None else None
    return expectation or detail["msg"]


def describe_field(field: FieldInfo) -> str | None:
    """What a valid value for `field` looks like, e.g. "must be an integer between 0 and 20"."""
    return _describe_type(field.annotation, field.metadata)


def _describe_type(annotation: Any, metadata: list[Any]) -> str | None:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return _describe_type(args[0], [*metadata, *args[1:]])
    if origin in (typing.Union, types.UnionType):
        described = [_describe_type(arg, metadata) for arg in args if arg is not type(None)]
        text = " or ".join(d.removeprefix("must be ") for d in described if d)
        nullable = type(None) in args
        return f"must be {text}{' or null' if nullable else ''}" if text else None
    if origin is Literal:
        return "must be one of " + ", ".join(_json_literal(arg) for arg in args)
    if annotation is bool:
        return "must be true or false"
    if annotation is int:
        return _describe_int(metadata)
    if annotation is str:
        return "must be a string"
    if annotation is Path:
        return "must be a path (a string)"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "must be an object"
    return None


def _describe_int(metadata: list[Any]) -> str:
    low = next((m.ge for m in metadata if isinstance(m, annotated_types.Ge)), None)
    high = next((m.le for m in metadata if isinstance(m, annotated_types.Le)), None)
    if low is not None and high is not None:
        return f"must be an integer between {low} and {high}"
    if low is not None:
        return f"must be an integer of at least {low}"
    return "must be an integer"


def _json_literal(value: Any) -> str:
    return f'"{value}"' if isinstance(value, str) else str(value).lower()


def _aliases(model: type[BaseModel]) -> list[str]:
    return [field.alias or name for name, field in model.model_fields.items()]


def _field_at(model: type[BaseModel], loc: tuple[str, ...]) -> FieldInfo | None:
    if not loc:
        return None
    parent = _model_at(model, loc[:-1])
    if parent is None:
        return None
    for name, field in parent.model_fields.items():
        if loc[-1] in (field.alias, name):
            return field
    return None


def _model_at(model: type[BaseModel], loc: tuple[str, ...]) -> type[BaseModel] | None:
    current: type[BaseModel] | None = model
    for part in loc:
        if current is None:
            return None
        field = _field_at(current, (part,))
        current = _model_in(field.annotation) if field is not None else None
    return current


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None
