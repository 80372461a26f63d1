"""What kind of trouble a sqlite3 error is, for the stores that turn it into their own errors."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from typing import Literal, TypeVar

SqliteFault = Literal["busy", "corrupt", "denied", "io", "other"]
E = TypeVar("E", bound=Exception)

# Primary result codes (the low byte of an extended code), from sqlite3.h.
_SQLITE_PERM = 3
_SQLITE_BUSY = 5
_SQLITE_LOCKED = 6
_SQLITE_READONLY = 8
_SQLITE_IOERR = 10
_SQLITE_CORRUPT = 11
_SQLITE_FULL = 13
_SQLITE_CANTOPEN = 14
_SQLITE_AUTH = 23
_SQLITE_NOTADB = 26

_CORRUPT_HINTS = ("malformed", "not a database", "no such table", "no such column", "corrupt")


def classify(exc: sqlite3.Error) -> SqliteFault:
    code = getattr(exc, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    if primary in (_SQLITE_BUSY, _SQLITE_LOCKED):
        return "busy"
    if primary in (_SQLITE_CORRUPT, _SQLITE_NOTADB) or any(h in str(exc).lower() for h in _CORRUPT_HINTS):
        return "corrupt"
    if primary in (_SQLITE_READONLY, _SQLITE_PERM, _SQLITE_CANTOPEN, _SQLITE_AUTH):
        return "denied"
    if primary in (_SQLITE_IOERR, _SQLITE_FULL):
        return "io"
    return "other"


def to_error(
    exc: sqlite3.Error, what: str, kinds: Mapping[SqliteFault, tuple[type[E], str]], default: type[E]
) -> E:
    """`exc` as the caller's own error class for its kind of fault, with the hint for that kind."""
    cls, hint = kinds.get(classify(exc), (default, ""))
    return cls(f"{what} ({hint})" if hint else what)
