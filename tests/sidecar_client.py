"""A tiny line-JSON-RPC client for a real `pi-memory-bridge serve` subprocess (tests and benches)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from queue import Empty, Queue
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def sidecar_argv() -> list[str]:
    exe = REPO / ".venv" / "bin" / "pi-memory-bridge"
    return [str(exe), "serve"] if exe.exists() else [sys.executable, "-m", "pi_memory_bridge.cli", "serve"]


class SidecarProcess:
    def __init__(self, agent_dir: Path, env: dict[str, str] | None = None) -> None:
        full_env = {**os.environ, "PI_CODING_AGENT_DIR": str(agent_dir), "HOME": str(agent_dir.parent)}
        full_env.update(env or {})
        self.proc = subprocess.Popen(
            sidecar_argv(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=full_env,
        )
        self._q: Queue[dict[str, Any]] = Queue()
        self.notifications: list[dict[str, Any]] = []
        self._next = 0
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._drain_stderr, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            msg = json.loads(raw)
            if "method" in msg and "id" not in msg:
                self.notifications.append(msg)
            else:
                self._q.put(msg)

    def _drain_stderr(self) -> None:
        assert self.proc.stderr is not None
        self.stderr = self.proc.stderr.read()

    def send_raw(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def call(self, method: str, params: dict[str, Any] | None = None, timeout: float = 10) -> dict[str, Any]:
        self._next += 1
        rid = self._next
        msg = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params or {}}
        self.send_raw(json.dumps(msg).encode() + b"\n")
        return self.wait_for(rid, timeout)

    def wait_for(self, rid: int | None, timeout: float = 10) -> dict[str, Any]:
        while True:
            try:
                msg = self._q.get(timeout=timeout)
            except Empty:
                raise TimeoutError(f"no answer to {rid}") from None
            if msg.get("id") == rid:
                return msg

    def initialize(self, cwd: Path, **extra: Any) -> dict[str, Any]:
        params = {
            "protocolVersion": "1.0",
            "client": {"name": "test", "version": "0"},
            "cwd": str(cwd),
            **extra,
        }
        return self.call("initialize", params)

    def close(self, timeout: float = 10) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        return self.proc.wait(timeout)
