"""Forget over Pi's RPC mode with the dialogs answered, and refused in print mode."""

from __future__ import annotations

import os

from bridge import SHIM, data_dir, stored_turns, use_bridge
from harness import FakeModel, PiEnv, ScriptedDialogs, TextReply
from pi_memory_bridge.outbox import Outbox

SECRET = "sk-proj-" + "Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0FeDcBa98"


def _seed(env: PiEnv, fake_model: FakeModel) -> None:
    fake_model.script(TextReply("noted"), TextReply("noted"), TextReply("noted"))
    run = env.run_print(
        [f"the billing api key is {SECRET}", "billing runs on the blue cluster", "lunch is at noon"],
        extensions=[SHIM],
    )
    assert run.returncode == 0, run.stderr
    assert len(stored_turns(env)) == 3


def _billing_rows(env: PiEnv) -> list[str]:
    return [t["user_text"] for t in stored_turns(env) if "billing" in t["user_text"]]


def test_forget_preview_no_then_choose_some(pi_env: PiEnv, fake_model: FakeModel) -> None:
    use_bridge(pi_env)
    _seed(pi_env, fake_model)
    assert all(SECRET not in t["user_text"] for t in stored_turns(pi_env))  # redacted at capture

    # every yes/no starts on No: Pi is shown a choice with "No" first
    dialogs = ScriptedDialogs().select("Delete all of them", "No")
    rpc = pi_env.start_rpc(extensions=[SHIM], dialogs=dialogs)
    rpc.prompt_and_settle("/tdai-memory-forget billing")
    rpc.wait_until(lambda: any("nothing was deleted" in n.message for n in rpc.ui.notifications), timeout=15)
    preview = next(n.message for n in rpc.ui.notifications if "match" in n.message)
    assert "billing runs on the blue cluster" in preview and "REDACTED" in preview
    assert SECRET not in preview and "lunch" not in preview
    assert len(_billing_rows(pi_env)) == 2  # "no" deleted nothing
    assert rpc.close() == 0

    # choose one by one: keep the first candidate, forget the second, then confirm
    dialogs = ScriptedDialogs().select("Choose one by one", "No", "Yes", "Yes")
    rpc = pi_env.start_rpc(extensions=[SHIM], dialogs=dialogs)
    rpc.prompt_and_settle("/tdai-memory-forget billing")
    rpc.wait_until(lambda: any("deleted " in n.message for n in rpc.ui.notifications), timeout=15)
    report = next(n.message for n in rpc.ui.notifications if "deleted " in n.message)
    asked = [d for d in rpc.ui.dialogs if d.request.options == ["No", "Yes"]]
    assert asked and all(d.request.method == "select" for d in asked)
    first = asked[0]
    kept_preview = first.request.title
    assert report.count("deleted ") == 1 and "FAILED" not in report
    remaining = _billing_rows(pi_env)
    assert len(remaining) == 1
    assert remaining[0][:40] in kept_preview  # exactly the one we kept is still there
    assert rpc.ui.status("tdai-memory") == "memory: ready"
    assert rpc.close() == 0


def test_forget_in_print_mode_deletes_nothing(pi_env: PiEnv, fake_model: FakeModel) -> None:
    use_bridge(pi_env)
    _seed(pi_env, fake_model)
    run = pi_env.run_print(["/tdai-memory-forget billing"], extensions=[SHIM])
    assert run.returncode == 0
    assert "nothing was deleted" in run.stderr
    assert len(_billing_rows(pi_env)) == 2


def test_forget_removes_a_turn_still_waiting_in_the_outbox(pi_env: PiEnv, fake_model: FakeModel) -> None:
    use_bridge(pi_env)
    data_dir(pi_env).mkdir(parents=True, exist_ok=True)
    (data_dir(pi_env) / "memory.sqlite3").write_bytes(os.urandom(16 * 1024))  # the store is down
    fake_model.script(TextReply("noted"))
    assert pi_env.run_print(["the payroll export runs at 3am"], extensions=[SHIM]).returncode == 0
    with Outbox.open(data_dir(pi_env)) as box:
        assert box.admin.counts().waiting == 1  # captured, waiting for the store to come back

    rpc = pi_env.start_rpc(extensions=[SHIM], dialogs=ScriptedDialogs().select("Delete all of them", "Yes"))
    rpc.prompt_and_settle("/tdai-memory-forget payroll")
    rpc.wait_until(lambda: any("deleted " in n.message for n in rpc.ui.notifications), timeout=15)
    preview = next(n.message for n in rpc.ui.notifications if "match" in n.message)
    assert "[outbox" in preview and "payroll export" in preview
    assert "memory store unavailable" in preview and "damaged" in preview  # the failure is said
    assert rpc.close() == 0
    with Outbox.open(data_dir(pi_env)) as box:
        assert box.admin.counts().waiting == 0
