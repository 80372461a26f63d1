"""Find and watch processes through /proc (Linux), to prove nothing outlives a killed Pi.

`PiEnv` puts a unique `E2E_HARNESS_RUN=<token>` into every Pi it starts; children inherit it,
so `find_pids_by_env(RUN_MARKER_VAR, token)` finds Pi and everything it spawned.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Final

PROC: Final = Path("/proc")
RUN_MARKER_VAR: Final = "E2E_HARNESS_RUN"


def _pids() -> list[int]:
    return [int(p.name) for p in PROC.iterdir() if p.name.isdigit()]


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:  # gone, or not ours to read
        return None


def process_state(pid: int) -> str | None:
    """The one-letter state from /proc/<pid>/stat ("R", "S", "Z", ...), None if there is no such pid."""
    raw = _read(PROC / str(pid) / "stat")
    if raw is None:
        return None
    # The command name is in parentheses and may contain spaces or ")": split after the last ")".
    fields = raw[raw.rfind(b")") + 2 :].split()
    return fields[0].decode() if fields else None


def parent_pid(pid: int) -> int | None:
    raw = _read(PROC / str(pid) / "stat")
    if raw is None:
        return None
    fields = raw[raw.rfind(b")") + 2 :].split()
    return int(fields[1]) if len(fields) > 1 else None


def pid_alive(pid: int) -> bool:
    """True while the process exists and is not a zombie (a zombie has already exited)."""
    state = process_state(pid)
    return state is not None and state not in ("Z", "X")


def environ_of(pid: int) -> dict[str, str]:
    """The environment the process was started with ({} if unreadable)."""
    raw = _read(PROC / str(pid) / "environ")
    if raw is None:
        return {}
    out: dict[str, str] = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            out[key.decode("utf-8", "replace")] = value.decode("utf-8", "replace")
    return out


def cmdline_of(pid: int) -> list[str]:
    raw = _read(PROC / str(pid) / "cmdline")
    if not raw:
        return []
    return [a.decode("utf-8", "replace") for a in raw.rstrip(b"\0").split(b"\0")]


def find_pids_by_env(name: str, value: str | None = None) -> list[int]:
    """Live processes whose start-up environment has `name` (equal to `value` when given)."""
    me = os.getpid()
    found: list[int] = []
    for pid in _pids():
        if pid == me:
            continue
        env = environ_of(pid)
        if name in env and (value is None or env[name] == value) and pid_alive(pid):
            found.append(pid)
    return found


def find_pids_by_cmdline(substring: str) -> list[int]:
    """Live processes whose space-joined command line contains `substring`."""
    me = os.getpid()
    return [pid for pid in _pids() if pid != me and substring in " ".join(cmdline_of(pid)) and pid_alive(pid)]


def descendants_of(pid: int) -> list[int]:
    """Live descendants of `pid` (children, grandchildren, ...), found by parent links."""
    children: dict[int, list[int]] = {}
    for p in _pids():
        ppid = parent_pid(p)
        if ppid is not None:
            children.setdefault(ppid, []).append(p)
    out: list[int] = []
    stack = list(children.get(pid, []))
    while stack:
        p = stack.pop()
        if pid_alive(p):
            out.append(p)
        stack.extend(children.get(p, []))
    return out


def wait_until_gone(pids: Iterable[int], timeout: float = 5.0, *, interval: float = 0.02) -> list[int]:
    """Wait for every pid to exit; return the survivors ([] means all gone)."""
    remaining = list(pids)
    deadline = time.monotonic() + timeout
    while True:
        remaining = [p for p in remaining if pid_alive(p)]
        if not remaining or time.monotonic() >= deadline:
            return remaining
        time.sleep(interval)


def kill_pids(pids: Iterable[int]) -> list[int]:
    """SIGKILL the given pids that are still alive; return those that were signalled."""
    killed: list[int] = []
    for pid in pids:
        if not pid_alive(pid):
            continue
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            continue
        killed.append(pid)
    return killed
