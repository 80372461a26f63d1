"""Sidecar spawn-to-`initialize` time and RPC round-trip latency, over the real stdio protocol.

    .venv/bin/python bench/bench_sidecar.py [--spawns 30] [--calls 2000]

Targets (issue 2): spawn-to-ready median <= 300 ms; round trip p99 <= 5 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _stats import summary

REPO = Path(__file__).resolve().parents[1]
EXE = REPO / ".venv" / "bin" / "pi-memory-bridge"


def _init_line(cwd: str) -> bytes:
    params = {"protocolVersion": "1.0", "client": {"name": "bench", "version": "0"}, "cwd": cwd}
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}).encode() + b"\n"


def spawn_once(env: dict[str, str], cwd: str) -> tuple[float, subprocess.Popen[bytes]]:
    started = time.perf_counter()
    proc = subprocess.Popen([str(EXE), "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    assert proc.stdin and proc.stdout
    proc.stdin.write(_init_line(cwd))
    proc.stdin.flush()
    line = proc.stdout.readline()
    while b'"id"' not in line:  # skip notifications
        line = proc.stdout.readline()
    elapsed = (time.perf_counter() - started) * 1000
    assert b'"result"' in line, line
    return elapsed, proc


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--spawns", type=int, default=30)
    ap.add_argument("--calls", type=int, default=2000)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "PI_CODING_AGENT_DIR": str(Path(tmp) / "agent"), "HOME": tmp}
        spawns: list[float] = []
        for _ in range(a.spawns):
            ms, proc = spawn_once(env, tmp)
            spawns.append(ms)
            assert proc.stdin
            proc.stdin.close()
            proc.wait(10)
        _, proc = spawn_once(env, tmp)
        assert proc.stdin and proc.stdout
        rtts: list[float] = []
        params = {"piSessionId": "bench", "entries": [], "leafId": None}
        for i in range(a.calls):
            msg = json.dumps({"jsonrpc": "2.0", "id": i + 2, "method": "session/start", "params": params})
            started = time.perf_counter()
            proc.stdin.write(msg.encode() + b"\n")
            proc.stdin.flush()
            proc.stdout.readline()
            rtts.append((time.perf_counter() - started) * 1000)
        proc.stdin.close()
        proc.wait(10)
    print(summary("sidecar spawn -> initialize answered", spawns, "target: p50 <= 300 ms"))
    print(summary("RPC round trip (session/start)", rtts[100:], "target: p99 <= 5 ms"))


if __name__ == "__main__":
    main()
