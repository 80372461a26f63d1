"""Read-only checks of the files the bridge owns, for `doctor`.

Nothing here creates, migrates or repairs anything: databases are opened read-only (without
even taking a lock when no other process has them open), and the only write is the disk probe,
a temporary file of real bytes removed at once. Each check names the file at fault and, for a
damaged database, says how to keep a copy before starting a new one; no advice ever moves the
memory store for a problem that lies elsewhere.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import stat
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from pi_memory_bridge.sqlite_integrity import Damaged, damaged_text, keep_a_copy, quick_check, read_only

PROBE_BYTES: Final = 256 * 1024
# Below this the next capture batch, WAL checkpoint or log rotation may fail: a problem.
MIN_FREE_BYTES: Final = 32 * 1024 * 1024
# Below this it is worth a warning.
LOW_FREE_BYTES: Final = 256 * 1024 * 1024
MiB: Final = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""
    warning: bool = False


def ok(name: str, detail: str) -> Check:
    return Check(name, True, detail)


def warn(name: str, detail: str, fix: str = "") -> Check:
    return Check(name, True, detail, fix, warning=True)


def fail(name: str, detail: str, fix: str) -> Check:
    return Check(name, False, detail, fix)


def _mib(n: int) -> str:
    return f"{n / MiB / 1024:.1f} GiB" if n >= 1024 * MiB else f"{n / MiB:.1f} MiB"


def nearest_existing(path: Path) -> Path:
    current = path
    while not current.exists() and current != current.parent:
        current = current.parent
    return current


# ---- the data dir and its filesystem -----------------------------------------------------------


def check_data_dir(ddir: Path) -> Check:
    if not ddir.exists():
        parent = nearest_existing(ddir)
        if not os.access(parent, os.W_OK | os.X_OK) or _read_only_fs(parent):
            return fail(
                "data dir",
                f"{ddir} does not exist and cannot be created: {parent} is not writable",
                f"make {parent} writable, or point PI_CODING_AGENT_DIR at a writable directory",
            )
        return ok("data dir", f"{ddir} (not created yet; the first start creates it)")
    if not ddir.is_dir():
        return fail(
            "data dir", f"{ddir} is not a directory", f"remove or rename {ddir}; it must be a directory"
        )
    if _read_only_fs(ddir):
        return fail(
            "data dir",
            f"{ddir} is on a read-only filesystem; nothing can be captured",
            "remount that filesystem read-write; the memory store in it is intact",
        )
    if not os.access(ddir, os.R_OK | os.W_OK | os.X_OK):
        return fail(
            "data dir",
            f"{ddir} is not readable and writable by you",
            f"give it back to yourself: chmod u+rwx {ddir} (the memory store in it is intact)",
        )
    return ok("data dir", str(ddir))


def _read_only_fs(path: Path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def check_disk(ddir: Path, *, may_write: bool) -> Check:
    """Free space from statvfs, and (when allowed) a real write of PROBE_BYTES into the data dir:
    a full filesystem still lets an empty file be created, so creating one proves nothing."""
    where = nearest_existing(ddir)
    try:
        vfs = os.statvfs(where)
    except OSError as exc:
        return fail(
            "disk", f"cannot check free space at {where}: {exc.strerror}", f"check that {where} exists"
        )
    free = vfs.f_bavail * vfs.f_frsize
    fix = (
        f"free some space on the filesystem holding {where} (see `df -h {where}`); until then new "
        "turns cannot be stored"
    )
    if may_write and ddir.is_dir() and not _read_only_fs(ddir):
        problem = _probe_write(ddir)
        if problem is not None:
            return fail("disk", f"the filesystem holding {ddir} is full: {problem}", fix)
    if vfs.f_favail == 0 and vfs.f_files > 0:
        return fail("disk", f"the filesystem holding {where} has no free inodes", fix)
    if free < MIN_FREE_BYTES:
        return fail("disk", f"the filesystem holding {where} is nearly full: {_mib(free)} free", fix)
    if free < LOW_FREE_BYTES:
        return warn("disk", f"the filesystem holding {where} is getting full: {_mib(free)} free", fix)
    probed = f", a {PROBE_BYTES // 1024} KiB write succeeded" if may_write and ddir.is_dir() else ""
    return ok("disk", f"{_mib(free)} free at {where}{probed}")


def _probe_write(ddir: Path) -> str | None:
    """Why writing real bytes into `ddir` fails, or None when it works (the file is removed)."""
    try:
        fd, name = tempfile.mkstemp(prefix=".doctor-probe-", dir=ddir)
    except OSError as exc:
        return _why(exc)
    try:
        data = os.urandom(PROBE_BYTES)  # random: a compressing filesystem cannot store it for free
        written = 0
        while written < len(data):
            written += os.write(fd, data[written:])
        os.fsync(fd)
    except OSError as exc:
        return _why(exc)
    finally:
        os.close(fd)
        Path(name).unlink(missing_ok=True)
    return None


def _why(exc: OSError) -> str:
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"writing {PROBE_BYTES // 1024} KiB failed ({os.strerror(exc.errno)})"
    return f"writing a test file failed ({exc.strerror or exc})"


# ---- databases ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Finding:
    """What a database reader saw: the detail line, and something worth a warning if any."""

    detail: str
    attention: str = ""
    fix: str = ""


def inspect_sqlite(
    name: str,
    db: Path,
    *,
    what: str,
    after_move: str,
    read: Callable[[sqlite3.Connection], Finding],
    missing: str,
) -> Check:
    """The check line for one of our databases. `read` looks inside (it may raise `NewerSchema`);
    a failed integrity check or an unreadable file is damage."""
    if not db.exists():
        return ok(name, f"{db} {missing}")
    if not db.is_file():  # SQLite's "disk I/O error" for it would read as damage, and .recover as help
        return fail(
            name, f"{db} is not a file", f"remove or rename {db}; it must be the {what}'s database file"
        )
    if not os.access(db, os.R_OK):
        return fail(name, f"{db} cannot be read (permission denied)", f"as its owner: chmod 600 {db}")
    try:
        with read_only(db) as conn:
            quick_check(conn)
            found = read(conn)
    except NewerSchema as exc:
        return fail(
            name, f"{db} {exc}", "upgrade pi-memory-bridge (the file is fine; this version cannot read it)"
        )
    except sqlite3.OperationalError as exc:
        text = str(exc)
        if "locked" in text or "busy" in text:
            return warn(name, f"{db}: busy ({text}); another process is writing it", "run doctor again")
        if "unable to open" in text:
            return fail(name, f"{db} cannot be opened: {text}", f"check that you own {db}: chmod 600 {db}")
        return _damaged(name, db, text, what, after_move)
    except (sqlite3.DatabaseError, Damaged) as exc:
        return _damaged(name, db, str(exc), what, after_move)
    loose = loose_files([db.with_name(db.name + s) for s in ("", "-wal", "-shm", "-journal")])
    if loose:
        return warn(
            name,
            f"{found.detail}; readable by others: {', '.join(loose)}",
            f"chmod 600 {' '.join(loose)} (the next start also tightens them)",
        )
    if found.attention:
        return warn(name, f"{found.detail}: {found.attention}", found.fix)
    return ok(name, found.detail)


def _damaged(name: str, db: Path, reason: str, what: str, after_move: str) -> Check:
    return fail(name, damaged_text(db, reason), keep_a_copy(db, what, after_move))


class NewerSchema(Exception):
    pass


# ---- permissions -------------------------------------------------------------------------------


def loose_files(paths: list[Path]) -> list[str]:
    """Those of `paths` (that exist and are ours) readable or writable by group or others."""
    found: list[str] = []
    for path in paths:
        try:
            info = os.lstat(path)
        except OSError:  # absent, or below something that is not a directory: nothing of ours to tighten
            continue
        if not stat.S_ISLNK(info.st_mode) and info.st_uid == os.geteuid() and info.st_mode & 0o077:
            found.append(str(path))
    return found
