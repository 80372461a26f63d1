"""The pure pieces of `/tdai-memory-status`: each problem comes with its fix, nothing leaks."""

from __future__ import annotations

from pathlib import Path

from pi_memory_bridge.capture.identity import BranchIdentity
from pi_memory_bridge.commands.status import (
    Problem,
    StatusReport,
    describe_budget,
    describe_identity,
    describe_last_recall,
    mask,
    outbox_problems,
    render_status,
    sdk_problems,
)
from pi_memory_bridge.config import load_config
from pi_memory_bridge.outbox import OutboxCounts
from pi_memory_bridge.recall import Layer, LayerResult, RecallOutcome


def test_every_outbox_trouble_is_a_problem_with_its_fix() -> None:
    assert outbox_problems(OutboxCounts(pending=3), None) == []
    problems = outbox_problems(OutboxCounts(dead=2, quarantined=1), "401 Unauthorized")
    assert [p.what for p in problems] == [
        "2 capture record(s) were rejected by the backend",
        "1 outbox record(s) were unreadable and set aside",
        "delivery is paused: 401 Unauthorized",
    ]
    assert all(p.fix for p in problems)


def test_a_missing_sdk_matters_only_for_the_memorycore_backend(tmp_path: Path) -> None:
    local = load_config(agent_dir=tmp_path, cwd=None, project_trusted=False, env={})
    remote = load_config(
        agent_dir=tmp_path, cwd=None, project_trusted=False, env={"PI_MEMORY_BRIDGE_BACKEND": "memorycore"}
    )
    assert remote.config.backend == "memorycore"
    assert sdk_problems(local, False, "pip install x") == []
    assert sdk_problems(remote, True, "pip install x") == []
    assert sdk_problems(remote, False, "pip install x") == [
        Problem("the MemoryCore SDK is not installed", "install it: pip install x")
    ]
    assert sdk_problems(None, False, "pip install x") == []


def test_identity_budget_and_last_recall_lines(tmp_path: Path) -> None:
    assert describe_identity(None) == "no active session"
    line = describe_identity(BranchIdentity("0123456789abcdef-session", "main"))
    assert line.endswith("(branch main)") and "…" in line
    assert mask("short") == "short"
    assert describe_budget(None) == "not loaded"
    loaded = load_config(agent_dir=tmp_path, cwd=None, project_trusted=False, env={})
    assert describe_budget(loaded).startswith("on, deadline 3000 ms, L0 4 / L1 6 / L2 2 / Skill 5")
    assert describe_last_recall(None) == "none yet"
    outcome = RecallOutcome(
        "partial",
        "block",
        (LayerResult(Layer.L0, "ok", 2, 3.2), LayerResult(Layer.L1, "timeout", 0, 3000.0)),
        3001.0,
        420,
    )
    assert describe_last_recall(outcome) == "partial in 3001 ms, 420 chars (L0 ok 3 ms, L1 timeout 3000 ms)"


def test_render_lists_each_problem_with_its_fix() -> None:
    report = StatusReport(
        "1.0", "1", True, "local", True, "", {"turns": 3}, "id", (), "budget", "last", "capture",
        "outbox", "sdk", "log", (Problem("what broke", "how to fix it"),),
    )  # fmt: skip
    text = render_status(report)
    assert "needs attention" in text and "  - what broke\n    fix: how to fix it" in text
    assert not report.healthy
