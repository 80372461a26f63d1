"""`read_if_held`, the liveness test that the background sidecars' locks and the inspectors'
records share: a file is a live process's while that process holds its flock."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pi_memory_bridge.runtime_dir import read_if_held

_HOLDER = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.flock(fd, fcntl.LOCK_EX)
print("locked", flush=True)
sys.stdin.read()
"""


@contextmanager
def _held(path: Path) -> Iterator[None]:
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        yield
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(10)


def test_a_held_file_is_read_and_a_free_one_is_a_dead_holders(tmp_path: Path) -> None:
    lock = tmp_path / "daemon.lock"
    lock.write_bytes(b"4242\nand more than asked for")
    with _held(lock):
        assert read_if_held(lock, 4) == b"4242"
        assert read_if_held(lock, 4, remove_when_free=True) == b"4242" and lock.exists()
    assert read_if_held(lock, 4) is None and lock.exists()  # the holder died: free, kept unless asked
    assert read_if_held(lock, 4, remove_when_free=True) is None and not lock.exists()
    assert read_if_held(lock, 4) is None  # gone, or never there
