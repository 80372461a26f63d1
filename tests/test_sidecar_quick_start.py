"""The handshake answered before the heavy imports (sidecar.quick_start), with real sidecars."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

from pi_memory_bridge.config import _paths
from pi_memory_bridge.sidecar import quick_start
from pi_memory_bridge.wire import InitializeParams
from sidecar_client import SidecarProcess, sidecar_argv


def _params(tmp_path: Path, **extra: Any) -> dict[str, Any]:
    # as the shim sends them (bridge.ts initParams)
    return {
        "protocolVersion": "1.0",
        "client": {"name": "test", "version": "0"},
        "cwd": str(tmp_path / "project"),
        "agentDir": str(tmp_path / "agent"),
        "projectTrusted": False,
        "hasUi": False,
        **extra,
    }


def _handshake(tmp_path: Path, params: dict[str, Any]) -> tuple[dict[str, Any], SidecarProcess]:
    sidecar = SidecarProcess(tmp_path / "agent")
    answer = sidecar.call("initialize", params)
    assert "result" in answer, answer
    return answer["result"], sidecar


def _started(sidecar: SidecarProcess) -> None:
    """The engine runs behind the handshake: a session starts, and the process exits on EOF."""
    assert "result" in sidecar.call("session/start", {"piSessionId": "s", "entries": []}, timeout=60)
    assert sidecar.proc.stdin is not None
    sidecar.proc.stdin.close()
    assert sidecar.proc.wait(timeout=20) == 0


def _stored(tmp_path: Path) -> dict[str, Any]:
    path = Path(quick_start.answers_path(str(tmp_path / "agent")))
    assert path.stat().st_mode & 0o777 == 0o600
    answers: dict[str, Any] = json.loads(path.read_text())
    return answers


def test_the_second_sidecar_answers_as_the_first_did_and_serves_on(tmp_path: Path) -> None:
    (tmp_path / "project").mkdir()
    params = _params(tmp_path)
    first, sidecar = _handshake(tmp_path, params)
    _started(sidecar)  # the data dir exists from now on, and the first answer is stored
    assert list(_stored(tmp_path).values()) == [first]
    second, sidecar = _handshake(tmp_path, params)
    assert second == first
    _started(sidecar)


def test_a_changed_input_is_a_miss_answered_by_the_full_handshake(tmp_path: Path) -> None:
    (tmp_path / "project").mkdir()
    params = _params(tmp_path)
    first, sidecar = _handshake(tmp_path, params)
    _started(sidecar)
    assert first["recall"]["deadlineMs"] == 3000
    config = tmp_path / "agent" / "memory-bridge" / "config.json"
    config.write_text(json.dumps({"schemaVersion": 1, "recall": {"deadlineMs": 1500}}))
    config.chmod(0o600)
    changed, sidecar = _handshake(tmp_path, params)
    assert changed["recall"]["deadlineMs"] == 1500
    _started(sidecar)
    other_project, sidecar = _handshake(tmp_path, {**params, "hasUi": True})
    assert other_project["recall"]["deadlineMs"] == 1500
    _started(sidecar)
    assert len(_stored(tmp_path)) == 3  # one answer per set of inputs


def test_an_out_of_date_answer_is_replaced_by_the_real_one(tmp_path: Path) -> None:
    (tmp_path / "project").mkdir()
    params = _params(tmp_path)
    real, sidecar = _handshake(tmp_path, params)
    _started(sidecar)
    # what an input the fingerprint missed would leave behind: an answer that no longer holds
    path = Path(quick_start.answers_path(str(tmp_path / "agent")))
    (key,) = _stored(tmp_path)
    stale = {**real, "recall": {**real["recall"], "deadlineMs": 999}}
    path.write_text(json.dumps({key: stale}))
    answered, sidecar = _handshake(tmp_path, params)
    assert answered == stale  # given before anything could know better
    _started(sidecar)  # the engine runs on the real config
    assert _stored(tmp_path) == {key: real}
    again, sidecar = _handshake(tmp_path, params)
    assert again == real
    _started(sidecar)


def test_the_answer_is_given_before_pydantic_or_asyncio_is_imported(tmp_path: Path) -> None:
    (tmp_path / "project").mkdir()
    params = _params(tmp_path)
    first, sidecar = _handshake(tmp_path, params)
    _started(sidecar)
    script = textwrap.dedent(
        """
        import os, sys
        from pi_memory_bridge.sidecar.quick_start import answer_first
        prelude = answer_first(os.environ)
        heavy = ("pydantic", "asyncio", "numpy", "pi_memory_bridge.config")
        heavy = sorted(m for m in heavy if m in sys.modules)
        print("answered" if prelude.answered else "missed", heavy, file=sys.stderr)
        """
    )
    line = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "initialize", "params": params}) + "\n"
    done = subprocess.run(
        [sys.executable, "-c", script],
        input=line.encode(),
        capture_output=True,
        timeout=60,
        env={**os.environ, "PI_CODING_AGENT_DIR": str(tmp_path / "agent"), "HOME": str(tmp_path)},
    )
    assert done.stderr.decode().strip() == "answered []"
    reply = json.loads(done.stdout)
    assert reply == {"jsonrpc": "2.0", "id": 7, "result": first}


def test_a_first_line_that_is_not_a_known_initialize_reaches_the_endpoint_untouched(tmp_path: Path) -> None:
    (tmp_path / "project").mkdir()
    sidecar = SidecarProcess(tmp_path / "agent")
    early = sidecar.call("recall", {"piSessionId": "s", "prompt": "hi"})
    assert early["error"]["code"] == -32002  # not initialized: as before
    answer = sidecar.call("initialize", _params(tmp_path))
    assert "result" in answer
    _started(sidecar)
    assert not Path(quick_start.answers_path(str(tmp_path / "agent"))).exists()  # not the first line


def test_the_validated_params_round_trip_to_what_the_shim_sent(tmp_path: Path) -> None:
    # the stored answer is keyed by the raw params and stored from the validated ones
    minimal = {"protocolVersion": "1.0", "client": {"name": "x", "version": "1"}, "cwd": "/"}
    for params in (_params(tmp_path), minimal):
        dumped = InitializeParams.model_validate(params).model_dump(by_alias=True, exclude_unset=True)
        assert quick_start.canonical(dumped) == quick_start.canonical(params)
    assert quick_start.DATA_DIR_NAME == _paths.DATA_DIR_NAME
    assert quick_start.GLOBAL_CONFIG_NAME == _paths.GLOBAL_CONFIG_NAME
    assert str(_paths.project_config_path(Path())) == quick_start.PROJECT_CONFIG


def test_a_cold_background_sidecar_answers_its_first_pi_the_same_way(tmp_path: Path) -> None:
    (tmp_path / "project").mkdir()
    run_dir = Path(tempfile.mkdtemp(prefix="pmb-q-", dir="/tmp"))  # a socket path holds ~100 bytes
    run_dir.chmod(0o700)
    sock = run_dir / "d.sock"
    env = {
        **os.environ,
        "PI_CODING_AGENT_DIR": str(tmp_path / "agent"),
        "HOME": str(tmp_path),
        "PI_MEMORY_BRIDGE_SOCKET": str(sock),
        "PI_MEMORY_BRIDGE_EMBEDDINGS": "off",
    }
    params = _params(tmp_path)
    answers = []
    try:
        for _ in range(3):  # the first creates the data dir, the second stores, the third reads
            daemon = subprocess.Popen(sidecar_argv(), env=env, stdin=subprocess.DEVNULL)
            first, second = _connect(sock), _connect(sock)
            for client in (first, second):
                answer = _socket_call(client, 1, "initialize", params)
                assert "result" in answer, answer
                answers.append(answer["result"])
                started = _socket_call(client, 2, "session/start", {"piSessionId": "s", "entries": []})
                assert "result" in started, started
                client.close()
            daemon.send_signal(signal.SIGTERM)
            assert daemon.wait(20) == 0
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
    assert all(a == answers[0] for a in answers)
    assert list(_stored(tmp_path).values()) == [answers[0]]


def _connect(path: Path, timeout: float = 30.0) -> socket.socket:
    deadline = time.monotonic() + timeout
    while True:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.settimeout(30)
        try:
            conn.connect(str(path))
            return conn
        except OSError:
            conn.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.015)


def _socket_call(conn: socket.socket, rid: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
    conn.sendall(
        json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}).encode() + b"\n"
    )
    buf = b""
    while True:
        while b"\n" not in buf:
            chunk = conn.recv(65536)
            assert chunk, "the daemon closed the connection"
            buf += chunk
        line, buf = buf.split(b"\n", 1)
        msg: dict[str, Any] = json.loads(line)
        if msg.get("id") == rid:
            return msg
