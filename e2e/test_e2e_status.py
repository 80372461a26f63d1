"""`/tdai-memory-status` over RPC tells the truth: healthy, a damaged store, a dead letter."""

from __future__ import annotations

import os
from datetime import UTC, datetime

from bridge import SHIM, data_dir, use_bridge
from harness import PiEnv, ScriptedDialogs
from pi_memory_bridge.backends.base import ConversationTurn
from pi_memory_bridge.outbox import Outbox


def _status(env: PiEnv) -> tuple[str, str]:
    rpc = env.start_rpc(extensions=[SHIM], dialogs=ScriptedDialogs())
    rpc.prompt_and_settle("/tdai-memory-status")
    rpc.wait_until(lambda: any("pi-memory-bridge" in n.message for n in rpc.ui.notifications), timeout=15)
    report = next(n.message for n in rpc.ui.notifications if "pi-memory-bridge" in n.message)
    footer = rpc.ui.status("tdai-memory") or ""
    assert rpc.close() == 0
    return report, footer


def test_healthy(pi_env: PiEnv) -> None:
    use_bridge(pi_env)
    report, footer = _status(pi_env)
    assert ": healthy" in report and "problems:" not in report
    assert "backend:      local - ok" in report
    assert "outbox:       0 pending, 0 in flight, 0 dead, 0 quarantined" in report
    assert footer == "memory: ready"


def test_damaged_store_names_the_problem_and_the_fix(pi_env: PiEnv) -> None:
    use_bridge(pi_env)
    data_dir(pi_env).mkdir(parents=True, exist_ok=True)
    (data_dir(pi_env) / "memory.sqlite3").write_bytes(os.urandom(32 * 1024))
    report, footer = _status(pi_env)
    assert "needs attention" in report
    assert "backend:      local - unavailable" in report
    assert "fix:" in report
    assert footer == "memory: local unavailable"


def test_a_dead_letter_is_shown_with_its_fix(pi_env: PiEnv) -> None:
    use_bridge(pi_env)
    box = Outbox.open(data_dir(pi_env))
    box.enqueue(
        [ConversationTurn("dead-1", "pi-s-main", "a turn the server refused", "ok", datetime.now(UTC))]
    )
    for _ in range(3):  # the real outbox path: three permanent rejections of a lone record
        claim = box.claim(ignore_backoff=True)
        assert claim is not None
        box.reject(claim, "400 Bad Request: refused", max_rejections=3, delay_s=0)
    assert box.counts().dead == 1
    box.close()
    report, _footer = _status(pi_env)
    assert "1 dead" in report
    assert "1 capture record(s) were rejected by the backend" in report
    assert "/tdai-memory-outbox list dead" in report
