"""Files and directories only their owner can read: 0600 and 0700, whatever the umask.

The data dir holds every conversation, so nothing in it may be group- or world-readable. A file
is created with its final mode (never created open and chmodded later), and what an older
version left behind with a looser mode is tightened when it is opened again.

SQLite gives its `-wal`, `-shm` and `-journal` files the mode of the database file itself
(unix VFS, "findCreateFileMode"), so creating the database 0600 before SQLite opens it is what
makes those private too; `prepare_sqlite_file` does that and tightens the ones that exist.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path
from typing import Final

PRIVATE_FILE_MODE: Final = 0o600
PRIVATE_DIR_MODE: Final = 0o700
SQLITE_SUFFIXES: Final = ("", "-wal", "-shm", "-journal")


def _tighten(path: Path) -> None:
    """Drop the group/other bits of `path` if we own it (the owner's bits are kept as they are);
    symlinks and other users' files are left alone."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(info.st_mode) or info.st_uid != os.geteuid():
        return
    if stat.S_IMODE(info.st_mode) & 0o077:
        os.chmod(path, stat.S_IMODE(info.st_mode) & ~0o077)


def tighten_file(path: Path) -> None:
    _tighten(path)


def ensure_private_dir(path: Path) -> None:
    """Create `path` (and missing parents) 0700; tighten `path` itself if it exists looser."""
    missing: list[Path] = []
    current = path
    while not current.exists() and current != current.parent:
        missing.append(current)
        current = current.parent
    for directory in reversed(missing):
        try:
            directory.mkdir(mode=PRIVATE_DIR_MODE)
        except FileExistsError:
            pass  # another process made it meanwhile
        else:
            os.chmod(directory, PRIVATE_DIR_MODE)  # mkdir's mode is filtered by the umask
    _tighten(path)


def create_private_file(path: Path) -> bool:
    """Create `path` empty with mode 0600 unless it exists (then tighten it); True if created."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, PRIVATE_FILE_MODE)
    except FileExistsError:
        tighten_file(path)
        return False
    os.close(fd)
    return True


def prepare_sqlite_file(db_path: Path) -> None:
    """Before SQLite opens `db_path`: a private directory, a private database file (so SQLite's
    own files inherit 0600), and any `-wal`/`-shm`/`-journal` from an older version tightened."""
    ensure_private_dir(db_path.parent)
    if create_private_file(db_path):
        fsync_dir(db_path.parent)  # the new name is durable before anything is written into it
    for suffix in SQLITE_SUFFIXES[1:]:
        tighten_file(db_path.with_name(db_path.name + suffix))


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def private_opener(path: str, flags: int) -> int:
    """For `open(..., opener=private_opener)`: a file it creates is 0600 (tighten an existing
    one with `tighten_file`)."""
    return os.open(path, flags | os.O_CLOEXEC, PRIVATE_FILE_MODE)


def write_atomically(path: Path, text: str) -> None:
    """Replace `path` with `text` (0600) so that a reader or a crash sees the old file or the new
    one, never a part: a temp file beside it, fsynced, renamed over it, then the folder fsynced
    (without that, a crash can bring the old file back)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, temp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            os.fchmod(handle.fileno(), PRIVATE_FILE_MODE)
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp_name, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp_name)
        raise
    fsync_dir(path.parent)
