"""Foundation E2E on real Pi: the shim loads, the sidecar starts, status runs headless, recall
reaches the model as a message before the prompt, and every sidecar failure leaves Pi answering
on time."""

from __future__ import annotations

import sys
import time

import pytest

from bridge import SHIM, data_dir, memory_wait_bound, pi_turn_costs, sidecar_cmd, use_bridge
from harness import FakeModel, PiEnv, ScriptedDialogs, pid_alive, wait_until_gone

MARKER = "L3_PROFILE_MARKER_7f3a"


def test_status_runs_headless_over_rpc(pi_env: PiEnv) -> None:
    use_bridge(pi_env)
    rpc = pi_env.start_rpc(extensions=[SHIM], dialogs=ScriptedDialogs())
    names = {c["name"] for c in rpc.get_commands()}
    assert {"tdai-memory-status", "tdai-memory-remember"} <= names
    rpc.prompt_and_settle("/tdai-memory-status")
    rpc.wait_until(
        lambda: any("Details (pi-memory-bridge" in n.message for n in rpc.ui.notifications), timeout=15
    )
    report = next(n.message for n in rpc.ui.notifications if "Details (pi-memory-bridge" in n.message)
    assert "protocol 1.0" in report
    assert "backend:        local - ok" in report
    assert "config:" in report
    assert rpc.ui.status("tdai-memory") == "memory: ready"
    assert rpc.close() == 0


def test_recalled_block_reaches_the_model_as_a_message_right_before_the_prompt(
    pi_env: PiEnv, fake_model: FakeModel
) -> None:
    use_bridge(pi_env)
    data_dir(pi_env).mkdir(parents=True, exist_ok=True)
    (data_dir(pi_env) / "profile.md").write_text(f"# Profile\n{MARKER}: backend engineer\n", encoding="utf-8")
    run = pi_env.run_print(["tell me about the deploy pipeline"], extensions=[SHIM])
    assert run.returncode == 0, run.stderr
    request = fake_model.last_request()
    assert MARKER not in request.system_prompt  # the system prompt stays Pi's own (its cache holds)
    assert request.user_texts[-2:] == [request.recalled_block, "tell me about the deploy pipeline"]
    assert MARKER in request.recalled_block
    assert request.recalled_block.rstrip().endswith("</recalled_memory>")


@pytest.mark.parametrize(
    "case",
    ["missing", "crashing", "hanging", "garbage"],
)
def test_a_broken_sidecar_never_blocks_a_turn(pi_env: PiEnv, fake_model: FakeModel, case: str) -> None:
    # Without a handshake the shim cannot read the configured deadline, so the default applies.
    deadline_ms = 3000
    cmd = {
        "missing": sidecar_cmd("/nonexistent/pi-memory-bridge", "serve"),
        "crashing": sidecar_cmd(sys.executable, "-c", "import sys; sys.exit(7)"),
        "hanging": sidecar_cmd(sys.executable, "-c", "import time; time.sleep(600)"),
        "garbage": sidecar_cmd(
            sys.executable, "-c", "import time; print('not json', flush=True); time.sleep(600)"
        ),
    }[case]
    use_bridge(pi_env, cmd=cmd)
    pi_cost = pi_turn_costs(pi_env, fake_model)  # Pi's own first and later turns, without memory
    rpc = pi_env.start_rpc(extensions=[SHIM], dialogs=ScriptedDialogs())
    for i in range(3):
        sent = time.time()
        result = rpc.prompt_and_settle(f"question {i} about the build")
        assert result.ran and result.final_text.startswith("ECHO:"), result.final_text
        waited = fake_model.chat_requests[-1].t - sent
        bound = memory_wait_bound(deadline_ms, pi_cost[min(i, 1)])
        assert waited <= bound, f"turn {i} waited {waited:.2f}s (Pi alone: {pi_cost[min(i, 1)]:.2f}s)"
        if case in ("missing", "crashing") and i > 0:
            # a sidecar that is not there fails fast: no deadline is waited out
            assert waited <= memory_wait_bound(0, pi_cost[1]), f"it should fail fast, waited {waited:.2f}s"
    footer = rpc.ui.status("tdai-memory") or ""
    assert "unavailable" in footer, footer
    assert rpc.close() == 0


def test_no_sidecar_survives_a_sigkilled_pi(pi_env: PiEnv) -> None:
    use_bridge(pi_env)
    rpc = pi_env.start_rpc(extensions=[SHIM], dialogs=ScriptedDialogs())
    rpc.prompt_and_settle("/tdai-memory-status")
    rpc.wait_until(lambda: rpc.ui.status("tdai-memory") == "memory: ready", timeout=15)
    pids = [p for p in pi_env.marked_pids() if p != rpc.pid]
    assert pids, "the sidecar should be running"
    rpc.kill9()
    assert wait_until_gone(pids, timeout=10) == []
    assert not any(pid_alive(p) for p in pids)
