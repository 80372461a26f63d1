"""The memory inspectors this user has running, so that `/tdai-memory-ui` reuses one, status lists
them and `pi-memory-bridge serve --stop` stops them too.

Each inspector holds an exclusive `flock` on its record for as long as it runs: a record whose lock
is free is a dead inspector's (its pid may belong to anyone by now) and is removed, so a killed
inspector never shows up as running. Records live beside the background sidecars' sockets (this
user's runtime folder, private); each holds the start address with its token, which is what
`/tdai-memory-ui` shows the same user anyway.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pi_memory_bridge.private_files import ensure_private_dir
from pi_memory_bridge.runtime_dir import read_if_held
from pi_memory_bridge.runtime_dir import runtime_dir as folder

PREFIX = "inspector-"


@dataclass(frozen=True, slots=True)
class RunningInspector:
    pid: int
    url: str
    agent_dir: str
    started_at: float

    def address(self) -> str:
        """The address without its token (for status lines that may be copied around)."""
        return self.url.split("?", 1)[0]


def register(env: Mapping[str, str], url: str, agent_dir: Path) -> int:
    """Record this process as a running inspector; the returned descriptor holds the lock: keep
    it open for the process's life (closing it, or dying, unregisters)."""
    where = folder(env)
    ensure_private_dir(where)
    path = where / f"{PREFIX}{os.getpid()}.json"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    record = {"pid": os.getpid(), "url": url, "agent_dir": str(agent_dir), "started_at": time.time()}
    os.ftruncate(fd, 0)
    os.write(fd, json.dumps(record).encode())
    return fd


def unregister(env: Mapping[str, str], fd: int) -> None:
    with contextlib.suppress(OSError):
        (folder(env) / f"{PREFIX}{os.getpid()}.json").unlink()
    with contextlib.suppress(OSError):
        os.close(fd)


def _read_live(path: Path) -> RunningInspector | None:
    raw = read_if_held(path, 65536, remove_when_free=True)
    if raw is None:
        return None
    try:
        record = json.loads(raw.decode("utf-8"))
        return RunningInspector(
            pid=int(record["pid"]), url=str(record["url"]), agent_dir=str(record["agent_dir"]),
            started_at=float(record["started_at"]),
        )  # fmt: skip
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        return None  # being written, or not ours: not listed


def running(env: Mapping[str, str], agent_dir: Path | None = None) -> list[RunningInspector]:
    """Live inspectors of this user (of one agent dir when given), oldest first."""
    where = folder(env)
    if not where.is_dir():
        return []
    found = [r for p in sorted(where.glob(f"{PREFIX}*.json")) if (r := _read_live(p)) is not None]
    if agent_dir is not None:
        found = [r for r in found if Path(r.agent_dir) == agent_dir]
    return sorted(found, key=lambda r: r.started_at)


def stop_all(env: Mapping[str, str], timeout_s: float = 5.0) -> list[int]:
    """SIGTERM every running inspector of this user and wait (bounded) for them; the pids stopped."""
    pids = [r.pid for r in running(env)]
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and running(env):
        time.sleep(0.05)
    return pids
