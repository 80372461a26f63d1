"""Redaction of JSON-like values (tool arguments and results, pasted JSON)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from ._keys import classify_key
from ._shapes import is_placeholder_only, placeholder

MAX_DEPTH: Final = 32
DEPTH_PLACEHOLDER: Final = placeholder("max-depth")

TextRedactor = Callable[[str], tuple[str, int]]


def _keeps_nothing_secret(value: object) -> bool:
    # None and booleans cannot carry a secret; an empty or already-redacted string holds none.
    if value is None or isinstance(value, bool):
        return True
    return isinstance(value, str) and (value == "" or is_placeholder_only(value))


class StructuralRedactor:
    """Walks a value once; blanks values under credential names, redacts every string."""

    __slots__ = ("_redact_text", "count")

    def __init__(self, redact_text: TextRedactor) -> None:
        self._redact_text = redact_text
        self.count = 0

    def _text(self, value: str) -> str:
        redacted, count = self._redact_text(value)
        self.count += count
        return redacted

    def _mapping(self, value: dict[object, object], depth: int) -> dict[object, object]:
        result: dict[object, object] = {}
        for key, item in value.items():
            name = key if isinstance(key, str) else str(key)
            kind = classify_key(name)
            new_key: object = self._text(key) if isinstance(key, str) else key
            while new_key in result:  # two keys redacted to the same placeholder
                new_key = f"{new_key}#"
            if kind is not None and not _keeps_nothing_secret(item):
                result[new_key] = placeholder(kind)
                self.count += 1
            else:
                result[new_key] = self.walk(item, depth + 1)
        return result

    def walk(self, value: object, depth: int = 0) -> object:
        if value is None or isinstance(value, bool | int | float):
            return value
        if isinstance(value, str):
            return self._text(value)
        if depth >= MAX_DEPTH:
            return DEPTH_PLACEHOLDER
        if isinstance(value, dict):
            return self._mapping(value, depth)
        if isinstance(value, list):
            return [self.walk(item, depth + 1) for item in value]
        if isinstance(value, tuple):
            return tuple(self.walk(item, depth + 1) for item in value)
        # Not JSON-like: keep nothing we cannot inspect, but keep what it says once redacted.
        return self._text(str(value))
