"""The background sidecar (`serve` with PI_MEMORY_BRIDGE_SOCKET): real processes, a real socket.

One daemon per socket serves every connection with an engine of its own; a connection's shutdown or
EOF ends that engine only; the daemon leaves when idle; exactly one of several started together
serves; a socket left by a SIGKILLed daemon is replaced.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sidecar_client import sidecar_argv

INIT = {"protocolVersion": "1.0", "client": {"name": "test", "version": "0"}}


class DaemonClient:
    """One Pi's connection: line JSON-RPC over the unix socket."""

    def __init__(self, path: Path, timeout: float = 20.0) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(str(path))
        self._buf = b""
        self._next = 0

    def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self._next += 1
        rid = self._next
        msg = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params or {}}
        self.sock.sendall(json.dumps(msg).encode() + b"\n")
        while True:
            line = self._line()
            if line.get("id") == rid:
                return line

    def _line(self) -> dict[str, Any]:
        while b"\n" not in self._buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("the daemon closed the connection")
            self._buf += chunk
        raw, self._buf = self._buf.split(b"\n", 1)
        parsed: dict[str, Any] = json.loads(raw)
        return parsed

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def short_dir() -> Iterator[Path]:
    # a unix socket's path holds ~100 bytes: pytest's tmp_path can be longer
    path = Path(tempfile.mkdtemp(prefix="pmb-d-", dir="/tmp"))
    path.chmod(0o700)
    yield path
    shutil.rmtree(path, ignore_errors=True)


class Daemons:
    def __init__(self, root: Path, idle_s: float) -> None:
        self.root = root
        self.run_dir = root / "run"
        self.socket = self.run_dir / "d.sock"
        self.agent_dir = root / "agent"
        self.env = {
            **os.environ,
            "PI_CODING_AGENT_DIR": str(self.agent_dir),
            "HOME": str(root),
            "PI_MEMORY_BRIDGE_SOCKET": str(self.socket),
            "PI_MEMORY_BRIDGE_DAEMON_IDLE_S": str(idle_s),
            "PI_MEMORY_BRIDGE_EMBEDDINGS": "off",  # not what these tests are about; keeps them light
        }
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self) -> subprocess.Popen[bytes]:
        self.run_dir.mkdir(mode=0o700, exist_ok=True)
        proc = subprocess.Popen(
            sidecar_argv(),
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        self.procs.append(proc)
        return proc

    def connect(self, timeout: float = 30.0) -> DaemonClient:
        deadline = time.monotonic() + timeout
        while True:
            try:
                return DaemonClient(self.socket)
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)

    def holder(self) -> int:
        return int((self.run_dir / "d.sock.lock").read_text())

    def initialize(self, client: DaemonClient) -> dict[str, Any]:
        answer = client.call("initialize", {**INIT, "cwd": str(self.root)})
        assert "result" in answer, answer
        return answer

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(10)


@pytest.fixture
def daemons(short_dir: Path) -> Iterator[Daemons]:
    d = Daemons(short_dir, idle_s=1.0)
    yield d
    d.stop_all()


def test_two_clients_share_one_daemon_each_with_its_own_engine(daemons: Daemons) -> None:
    proc = daemons.start()
    a, b = daemons.connect(), daemons.connect()
    daemons.initialize(a)
    daemons.initialize(b)
    for client, sid in ((a, "pi-a"), (b, "pi-b")):
        assert "result" in client.call("session/start", {"piSessionId": sid, "entries": []})
    # each connection has its own handshake: a second initialize on one is refused, not on the other
    assert "error" in a.call("initialize", {**INIT, "cwd": str(daemons.root)})
    mode = stat.S_IMODE(daemons.socket.stat().st_mode)
    assert mode == 0o600 and stat.S_IMODE(daemons.run_dir.stat().st_mode) == 0o700
    # one connection's shutdown ends its engine only: the other keeps being served
    assert a.call("shutdown")["result"] == {"drained": True}
    a.close()
    status = b.call("status")
    assert "result" in status and status["result"]["backend"] == "local", status
    assert proc.poll() is None and daemons.holder() == proc.pid
    b.close()


def test_a_connection_whose_pi_vanished_ends_only_that_engine(daemons: Daemons) -> None:
    proc = daemons.start()
    a, b = daemons.connect(), daemons.connect()
    daemons.initialize(a)
    daemons.initialize(b)
    a.sock.shutdown(socket.SHUT_RDWR)  # what the kernel does when Pi is SIGKILLed
    a.close()
    time.sleep(0.3)
    assert "result" in b.call("session/start", {"piSessionId": "pi-b", "entries": []})
    assert proc.poll() is None
    b.close()


def test_the_daemon_exits_by_itself_once_idle_and_removes_its_socket(daemons: Daemons) -> None:
    proc = daemons.start()
    client = daemons.connect()
    daemons.initialize(client)
    time.sleep(1.5)  # longer than the idle time, but a connection is open: it stays
    assert proc.poll() is None
    client.close()
    assert proc.wait(15) == 0
    assert not daemons.socket.exists()


def test_of_several_started_together_exactly_one_serves(daemons: Daemons) -> None:
    procs = [daemons.start() for _ in range(4)]
    clients = [daemons.connect() for _ in range(4)]
    for client in clients:
        daemons.initialize(client)
    serving = [p for p in procs if p.poll() is None]
    deadline = time.monotonic() + 15
    while len(serving) > 1 and time.monotonic() < deadline:
        time.sleep(0.05)
        serving = [p for p in procs if p.poll() is None]
    assert [p.pid for p in serving] == [daemons.holder()]
    assert all(p.returncode == 0 for p in procs if p not in serving)  # the others left quietly
    for client in clients:
        client.close()


def test_a_socket_left_by_a_sigkilled_daemon_is_replaced(daemons: Daemons) -> None:
    first = daemons.start()
    client = daemons.connect()
    daemons.initialize(client)
    first.send_signal(signal.SIGKILL)
    first.wait(10)
    client.close()
    assert daemons.socket.exists()  # stale: nobody listens
    with pytest.raises(ConnectionRefusedError):
        DaemonClient(daemons.socket)
    second = daemons.start()
    client = daemons.connect()
    daemons.initialize(client)
    assert daemons.holder() == second.pid
    assert "result" in client.call("session/start", {"piSessionId": "pi-b", "entries": []})
    client.close()


def test_a_socket_folder_open_to_others_is_refused(daemons: Daemons) -> None:
    daemons.run_dir.mkdir(mode=0o700)
    daemons.run_dir.chmod(0o755)
    proc = daemons.start()
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 2
    assert b"not a private directory" in err
    assert not daemons.socket.exists()


def test_sigterm_ends_the_daemon_with_connections_open(daemons: Daemons) -> None:
    proc = daemons.start()
    client = daemons.connect()
    daemons.initialize(client)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(10) == 0
    with contextlib.suppress(OSError):
        client.close()
    assert not daemons.socket.exists()


def test_serve_stop_ends_this_users_background_sidecars_and_skips_dead_ones(short_dir: Path) -> None:
    env = {**os.environ, "XDG_RUNTIME_DIR": str(short_dir)}
    folder = short_dir / f"pi-memory-bridge-{os.getuid()}"
    d = Daemons(short_dir, idle_s=60)
    d.run_dir, d.socket = folder, folder / "a.sock"
    d.env = {**d.env, "PI_MEMORY_BRIDGE_SOCKET": str(d.socket)}
    live = d.start()
    d.initialize(d.connect())
    # a dead daemon's lock: its pid (this test's own) must not be signalled
    (folder / "b.sock.lock").write_text(f"{os.getpid()}\n")
    try:
        out = subprocess.run([*sidecar_argv(), "--stop"], env=env, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0 and "stopped 1 background sidecar and 0 memory inspectors" in out.stdout, (
            out
        )
        assert live.wait(10) == 0
        assert (folder / "a.sock.lock").read_text() == ""  # a clean exit leaves no pid behind
    finally:
        d.stop_all()
