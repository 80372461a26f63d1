"""The sidecar ends itself once told to stop: EOF is noticed, and a watchdog bounds the rest."""

from __future__ import annotations

import asyncio
import subprocess
import sys

from pi_memory_bridge.sidecar.serve import _EofWatch


class _Chunks:
    def __init__(self, *chunks: bytes) -> None:
        self._chunks = list(chunks)

    async def read(self, n: int) -> bytes:
        return self._chunks.pop(0) if self._chunks else b""


def test_eof_is_reported_once_the_stream_ends() -> None:
    seen: list[str] = []
    reader = _EofWatch(_Chunks(b"a\n", b"b\n"), lambda: seen.append("eof"))

    async def read_all() -> list[bytes]:
        return [await reader.read(10) for _ in range(3)]

    assert asyncio.run(read_all()) == [b"a\n", b"b\n", b""]
    assert seen == ["eof"]


def test_the_watchdog_ends_a_stuck_process() -> None:
    code = (
        "import time; from pi_memory_bridge.sidecar.serve import ExitWatchdog\n"
        "w = ExitWatchdog(0.3); w.arm(); w.arm()\n"
        "while True: time.sleep(1)  # stuck\n"
    )
    # a watchdog that never fires leaves the process stuck: the run's timeout is the hang guard
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=10, check=False)
    assert proc.returncode == 0, proc.stderr
