"""Fail-open with the memorycore backend on a bad day: the server is down or hangs. Pi turns still
complete within the recall deadline, captured turns wait in the outbox, and status names the
problem. Runs everywhere: without the SDK installed (as in CI) the sidecar reports the missing SDK
instead, which must be just as harmless to Pi."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from bridge import SHIM, data_dir, memory_wait_bound, pi_turn_costs, use_bridge
from harness import FakeModel, PiEnv, ScriptedDialogs
from pi_memory_bridge.outbox import Outbox

DEADLINE_MS = 1500


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def hanging_server() -> Iterator[int]:
    """Accepts connections and never answers (a server that is slow beyond any deadline)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        sock.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(sock.accept()[0])
            except TimeoutError:
                continue
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    yield int(sock.getsockname()[1])
    stop.set()
    for conn in held:
        conn.close()
    sock.close()


def _configure(env: PiEnv, port: int) -> None:
    use_bridge(
        env,
        config={
            "backend": "memorycore",
            "recall": {"deadlineMs": DEADLINE_MS},
            "memorycore": {
                "endpoint": f"http://127.0.0.1:{port}",
                "teamId": "team-e2e",
                "agentId": "agent-e2e",
                "userId": "user-e2e",
                "timeoutMs": 2000,
            },
        },
    )
    env.extra_env["TDAI_MEMORY_GATEWAY_API_KEY"] = "synthetic-gateway-key-for-tests"


@pytest.mark.serial  # a wall-time bound: run alone (scripts/test.sh)
@pytest.mark.parametrize("server", ["down", "hanging"])
def test_turns_complete_and_capture_waits_in_the_outbox(
    pi_env: PiEnv, fake_model: FakeModel, server: str, request: pytest.FixtureRequest
) -> None:
    port = _free_port() if server == "down" else request.getfixturevalue("hanging_server")
    _configure(pi_env, port)
    pi_cost = pi_turn_costs(pi_env, fake_model)  # Pi's own first and later turns, without memory
    rpc = pi_env.start_rpc(extensions=[SHIM], dialogs=ScriptedDialogs())
    for i in range(2):
        sent = time.time()
        result = rpc.prompt_and_settle(f"question {i} about the flaky build")
        assert result.ran and result.final_text.startswith("ECHO:")
        waited = fake_model.chat_requests[-1].t - sent
        assert waited <= memory_wait_bound(DEADLINE_MS, pi_cost[i]), f"turn {i} waited {waited:.2f}s"
    rpc.prompt_and_settle("/tdai-memory-status")
    rpc.wait_until(
        lambda: any("Details (pi-memory-bridge" in n.message for n in rpc.ui.notifications), timeout=20
    )
    report = next(n.message for n in rpc.ui.notifications if "Details (pi-memory-bridge" in n.message)
    assert "to look at (below)" in report or "not working right now" in report
    assert "memorycore" in report
    assert rpc.close() == 0
    with Outbox.open(data_dir(pi_env)) as box:
        counts = box.admin.counts()
    assert counts.dead == 0 and counts.waiting == 2  # nothing lost, nothing given up on
