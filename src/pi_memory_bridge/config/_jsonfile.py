"""Reading one JSON config file safely: never hangs, never guesses.

The file is opened non-blocking and must turn out to be a regular file (a FIFO or device swapped
in by a project could otherwise block the sidecar), is size-capped, must hold one JSON object,
and may not repeat a key (JSON parsers keep the last value silently; we say so instead).
Symbolic links are followed here, unlike key files, because people keep dotfiles in git.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pi_memory_bridge.config._problems import ConfigProblem, error

MAX_CONFIG_FILE_BYTES = 256 * 1024


@dataclass(frozen=True)
class JsonFileRead:
    """`exists` is False when there is no such file; `data` is None when it could not be used."""

    exists: bool
    data: dict[str, Any] | None = None
    problems: tuple[ConfigProblem, ...] = field(default=())


class _KeyRecordingDict(dict[str, Any]):
    duplicates: list[str]


class _NonStandardNumber(ValueError):
    pass


class _Unusable(Exception):
    """The path exists but is not something we may read as a config file."""


def read_json_object(path: Path) -> JsonFileRead:
    try:
        raw = _read_bounded(path)
    except FileNotFoundError:
        if _is_dangling_link(path):
            return _refused(path, "is a symbolic link to a file that does not exist")
        return JsonFileRead(exists=False)
    except NotADirectoryError:
        return JsonFileRead(exists=False)
    except _Unusable as exc:
        return _refused(path, str(exc))
    except OSError as exc:
        return _refused(path, f"cannot be read: {exc.strerror or exc}")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        return _refused(path, "is not UTF-8 text")
    return _parse(path, text)


def _read_bounded(path: Path) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
            raise _Unusable(f"is {kind}; a config file must be a regular file")
        chunks: list[bytes] = []
        remaining = MAX_CONFIG_FILE_BYTES + 1
        while remaining > 0:
            chunk = os.read(fd, remaining)
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
        if remaining <= 0:
            raise _Unusable(f"is larger than {MAX_CONFIG_FILE_BYTES} bytes")
        return b"".join(chunks)
    finally:
        os.close(fd)


def _is_dangling_link(path: Path) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(path).st_mode)
    except OSError:
        return False


def _parse(path: Path, text: str) -> JsonFileRead:
    try:
        value = json.loads(text, object_pairs_hook=_record_keys, parse_constant=_refuse_constant)
    except json.JSONDecodeError as exc:
        return _refused(path, f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}")
    except _NonStandardNumber as exc:
        return _refused(path, f"invalid JSON: {exc} is not a JSON number")
    if not isinstance(value, dict):
        return _refused(path, f"must hold a JSON object ({{...}}), not {_json_kind(value)}")
    duplicates = list(_duplicate_keys(value, ()))
    if duplicates:
        problems = tuple(
            error(key, path, "appears more than once in the same object; keep only one") for key in duplicates
        )
        return JsonFileRead(exists=True, problems=problems)
    return JsonFileRead(exists=True, data=_plain(value))


def _record_keys(pairs: list[tuple[str, Any]]) -> _KeyRecordingDict:
    result = _KeyRecordingDict()
    result.duplicates = []
    for key, value in pairs:
        if key in result and key not in result.duplicates:
            result.duplicates.append(key)
        result[key] = value
    return result


def _refuse_constant(name: str) -> None:
    raise _NonStandardNumber(name)


def _duplicate_keys(value: Any, path: tuple[str, ...]) -> list[str]:
    found: list[str] = []
    if isinstance(value, _KeyRecordingDict):
        found.extend(".".join((*path, key)) for key in value.duplicates)
        for key, child in value.items():
            found.extend(_duplicate_keys(child, (*path, key)))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found.extend(_duplicate_keys(child, (*path, str(index))))
    return found


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _plain(child) for key, child in value.items()}
    if isinstance(value, list):
        return [_plain(child) for child in value]
    return value


def _json_kind(value: Any) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return "a number"


def _refused(path: Path, message: str) -> JsonFileRead:
    return JsonFileRead(exists=True, problems=(error("", path, message),))
