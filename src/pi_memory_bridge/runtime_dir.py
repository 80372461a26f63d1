"""This user's runtime folder: the background sidecars' sockets and locks, and the running
inspectors' records. The shim computes the same folder (extension-shim/src/daemon.ts, `socketPath`)."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Mapping
from pathlib import Path

from pi_memory_bridge.daemon_contract import RUNTIME_DIR_FALLBACK, RUNTIME_DIR_VARS, SOCKET_DIR_PREFIX


def runtime_dir(env: Mapping[str, str]) -> Path:
    base = next((env[v] for v in RUNTIME_DIR_VARS if env.get(v)), RUNTIME_DIR_FALLBACK)
    return Path(base) / f"{SOCKET_DIR_PREFIX}{os.getuid()}"


def read_if_held(path: Path, max_bytes: int, *, remove_when_free: bool = False) -> bytes | None:
    """The first `max_bytes` of `path` while a live process holds a `flock` on it; None when it
    cannot be opened or nobody holds it. The lock dies with its holder, so a free one is a dead
    process's file, whose pid may be anyone's by now (`remove_when_free`: then delete it)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return os.read(fd, max_bytes)  # read from the descriptor that saw the holder
        if remove_when_free:
            with contextlib.suppress(OSError):
                path.unlink()
        return None
    finally:
        os.close(fd)
