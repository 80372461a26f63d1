"""Reading API keys from key files and env values, without ever letting them leak.

A key file must be a regular file (checked with lstat, so a symlink that could be repointed at
another secret is refused, and re-checked after opening, so a swap in between is caught), small,
and hold one key. Group- or other-accessible files load with a warning. Messages name the file,
never its content.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from pydantic import SecretStr

MAX_KEY_FILE_BYTES = 16 * 1024


@dataclass(frozen=True)
class KeyRead:
    """Exactly one of `key` and `error` is set; `warning` may accompany a key."""

    key: SecretStr | None
    error: str | None = None
    warning: str | None = None


def key_format_problem(text: str) -> str | None:
    """Why `text` (already stripped) cannot be a key, or None."""
    if not text:
        return "is empty"
    # Keys travel in HTTP headers: one token of printable ASCII, nothing that could split a header.
    if not all(33 <= ord(ch) <= 126 for ch in text):
        return "must hold one key: printable ASCII without spaces or line breaks"
    return None


def key_from_env(value: str) -> KeyRead:
    text = value.strip()
    problem = key_format_problem(text)
    if problem is not None:
        return KeyRead(key=None, error=problem)
    return KeyRead(key=SecretStr(text))


def read_key_file(path: Path) -> KeyRead:
    try:
        before = os.lstat(path)
    except FileNotFoundError:
        return KeyRead(key=None, error=f"{path} does not exist")
    except OSError as exc:
        return KeyRead(key=None, error=f"{path} cannot be read: {_reason(exc)}")
    kind_problem = _kind_problem(before.st_mode)
    if kind_problem is not None:
        return KeyRead(key=None, error=f"{path} {kind_problem}")
    if before.st_size > MAX_KEY_FILE_BYTES:
        return KeyRead(key=None, error=_too_large(path))
    try:
        raw = _read_same_file(path, before)
    except _Changed:
        return KeyRead(key=None, error=f"{path} changed while it was being read; try again")
    except OSError as exc:
        return KeyRead(key=None, error=f"{path} cannot be read: {_reason(exc)}")
    if len(raw) > MAX_KEY_FILE_BYTES:
        return KeyRead(key=None, error=_too_large(path))
    try:
        text = raw.decode("utf-8").strip()
    except UnicodeDecodeError:
        return KeyRead(key=None, error=f"{path} is not UTF-8 text")
    problem = key_format_problem(text)
    if problem is not None:
        return KeyRead(key=None, error=f"{path} {problem}")
    return KeyRead(key=SecretStr(text), warning=_permission_warning(path, before.st_mode))


class _Changed(Exception):
    pass


def _read_same_file(path: Path, before: os.stat_result) -> bytes:
    # O_NOFOLLOW and O_NONBLOCK: a symlink or FIFO swapped in after the lstat can neither
    # redirect nor block the read; the fstat comparison catches any other replacement.
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    fd = os.open(path, flags)
    try:
        after = os.fstat(fd)
        if (after.st_dev, after.st_ino) != (before.st_dev, before.st_ino):
            raise _Changed
        if not stat.S_ISREG(after.st_mode):
            raise _Changed
        return os.read(fd, MAX_KEY_FILE_BYTES + 1)
    finally:
        os.close(fd)


def _kind_problem(mode: int) -> str | None:
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISLNK(mode):
        kind = "a symbolic link"
    elif stat.S_ISDIR(mode):
        kind = "a directory"
    elif stat.S_ISFIFO(mode):
        kind = "a FIFO (named pipe)"
    else:
        kind = "not a regular file"
    return f"is {kind}; a key file must be a regular file (not a symlink, directory, pipe or device)"


def _permission_warning(path: Path, mode: int) -> str | None:
    if mode & 0o077 == 0:
        return None
    return (
        f"{path} is accessible to group or others (mode {stat.S_IMODE(mode):04o}); "
        f"restrict it with: chmod 600 {path}"
    )


def _too_large(path: Path) -> str:
    return f"{path} is larger than {MAX_KEY_FILE_BYTES} bytes; a key file holds a single key"


def _reason(exc: OSError) -> str:
    if isinstance(exc, PermissionError):
        return "permission denied"
    return exc.strerror or type(exc).__name__
