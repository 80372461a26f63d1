"""`/tdai-memory-status` over RPC tells the truth: healthy, a damaged store, a dead letter."""

from __future__ import annotations

import os
from datetime import UTC, datetime

import pytest

from bridge import SHIM, data_dir, use_bridge
from harness import PiEnv, ScriptedDialogs
from pi_memory_bridge.backends.base import ConversationTurn
from pi_memory_bridge.outbox import Outbox


def _status(env: PiEnv) -> tuple[str, str]:
    rpc = env.start_rpc(extensions=[SHIM], dialogs=ScriptedDialogs())
    rpc.prompt_and_settle("/tdai-memory-status")
    rpc.wait_until(
        lambda: any("Details (pi-memory-bridge" in n.message for n in rpc.ui.notifications), timeout=15
    )
    report = next(n.message for n in rpc.ui.notifications if "Details (pi-memory-bridge" in n.message)
    footer = rpc.ui.status("tdai-memory") or ""
    assert rpc.close() == 0
    return report, footer


def test_healthy(pi_env: PiEnv) -> None:
    use_bridge(pi_env)
    report, footer = _status(pi_env)
    assert report.startswith("Memory is on and working. It is stored on this machine.")
    assert "Remembered: nothing yet." in report and "What is wrong" not in report
    assert "Waiting: nothing; every captured turn is stored." in report
    assert "This session: Pi session " in report and "its main conversation" in report
    assert "backend:        local - ok" in report
    assert "outbox:         0 pending, 0 in flight, 0 dead, 0 quarantined" in report
    assert footer == "memory: ready"


def test_damaged_store_names_the_problem_and_the_fix(pi_env: PiEnv) -> None:
    use_bridge(pi_env)
    data_dir(pi_env).mkdir(parents=True, exist_ok=True)
    (data_dir(pi_env) / "memory.sqlite3").write_bytes(os.urandom(32 * 1024))
    report, footer = _status(pi_env)
    assert report.startswith("Memory is not working right now")
    assert "backend:        local - unavailable" in report
    assert "fix:" in report
    assert footer.startswith("memory: unavailable (local store: "), footer


def test_a_dead_letter_is_shown_with_its_fix(pi_env: PiEnv) -> None:
    use_bridge(pi_env)
    box = Outbox.open(data_dir(pi_env))
    box.enqueue(
        [ConversationTurn("dead-1", "pi-s-main", "a turn the server refused", "ok", datetime.now(UTC))]
    )
    for _ in range(3):  # the real outbox path: three permanent rejections of a lone record
        claim = box.claims.claim(ignore_backoff=True)
        assert claim is not None
        box.claims.reject(claim, "400 Bad Request: refused", max_rejections=3, delay_s=0)
    assert box.admin.counts().dead == 1
    box.close()
    report, _footer = _status(pi_env)
    assert "1 dead" in report
    assert "the memory store refused 1 captured turn" in report
    assert "/tdai-memory-outbox list dead" in report


def test_a_missing_sdk_is_named_with_the_install_command(pi_env: PiEnv) -> None:
    from pi_memory_bridge.backends.memorycore import sdk_available

    if sdk_available():
        pytest.skip("the MemoryCore SDK is installed here; this checks the report when it is not (as in CI)")
    use_bridge(
        pi_env,
        config={
            "backend": "memorycore",
            "memorycore": {"endpoint": "http://127.0.0.1:9", "teamId": "t", "agentId": "a", "userId": "u"},
        },
    )
    pi_env.extra_env["TDAI_MEMORY_GATEWAY_API_KEY"] = "synthetic-gateway-key-for-tests"
    report, footer = _status(pi_env)
    assert "the MemoryCore SDK is not installed" in report
    assert "pip install" in report and "tencentdb-agent-memory-sdk-python-v2" in report
    assert report.count("pip install") == 1  # the one fix, printed once
    assert "backend:        memorycore - unavailable" in report
    assert footer.startswith("memory:")
