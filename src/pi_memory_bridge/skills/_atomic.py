"""Put a fully written skill directory in place so Pi sees the old version or the new, never half.

The new directory is staged next to the target (same file system), every file and directory is
fsynced, then it replaces the target: on Linux with one `renameat2(RENAME_EXCHANGE)` (a true
atomic swap); elsewhere, or where the kernel lacks it, with two renames whose gap is repaired on
the next run (`recover`) from the backup left beside the target.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import shutil
import uuid
from collections.abc import Iterable
from pathlib import Path

STAGE_PREFIX = ".pmb-stage-"
BACKUP_PREFIX = ".pmb-old-"
_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def _renameat2() -> object | None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
    return getattr(libc, "renameat2", None)


_RENAMEAT2 = _renameat2()


def exchange(a: Path, b: Path) -> bool:
    """Atomically swap two existing paths; False when the platform cannot."""
    func = _RENAMEAT2
    if func is None or not callable(func):
        return False
    result = func(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    if result == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), str(a))


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_tree(root: Path, files: Iterable[tuple[str, bytes]]) -> None:
    """Create `root` and write `files` (relative '/'-paths) into it, each fsynced, private (0600 files,
    0700 directories, like everything else we write: a skill can hold what a team learned)."""
    root.mkdir(mode=0o700)
    dirs = {root}
    for rel, data in files:
        path = root.joinpath(*rel.split("/"))
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        dirs.add(path.parent)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
    for d in sorted(dirs, key=lambda p: len(p.parts), reverse=True):
        fsync_dir(d)


def new_stage(parent: Path) -> Path:
    return parent / f"{STAGE_PREFIX}{uuid.uuid4().hex}"


def swap_in(stage: Path, target: Path) -> None:
    """Replace `target` (a directory, or nothing) with the staged directory `stage`."""
    parent = target.parent
    if not target.exists() and not target.is_symlink():
        os.rename(stage, target)
        fsync_dir(parent)
        return
    if not target.is_dir() or target.is_symlink():
        raise OSError(errno.ENOTDIR, "refusing to replace something that is not a directory", str(target))
    if exchange(stage, target):
        fsync_dir(parent)
        shutil.rmtree(stage)  # now holds the previous version
        return
    backup = parent / f"{BACKUP_PREFIX}{target.name}-{uuid.uuid4().hex[:8]}"
    os.rename(target, backup)
    try:
        os.rename(stage, target)
    except OSError:
        os.rename(backup, target)
        raise
    fsync_dir(parent)
    shutil.rmtree(backup, ignore_errors=True)


def discard(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        shutil.rmtree(path)


def recover(skills_dir: Path) -> list[str]:
    """Finish what a crash interrupted: restore orphaned backups, drop stale staging dirs."""
    restored: list[str] = []
    try:
        entries = list(os.scandir(skills_dir))
    except FileNotFoundError:
        return restored
    for entry in entries:
        if entry.name.startswith(STAGE_PREFIX):
            discard(Path(entry.path))
        elif entry.name.startswith(BACKUP_PREFIX):
            name = entry.name[len(BACKUP_PREFIX) :].rsplit("-", 1)[0]
            target = skills_dir / name
            if name and not target.exists():
                os.rename(entry.path, target)
                restored.append(name)
            else:
                discard(Path(entry.path))
    return restored
