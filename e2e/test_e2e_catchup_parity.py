"""Live capture and catch-up agree turn for turn on what real Pi wrote: the same key, branch
identity, redacted texts and tool pairs, for plain turns, tool round trips, a retry after an HTTP
500, a follow-up queued during a run, a steer during a tool call and an abort.

Live capture runs alone first (`capture.catchUp: false`); then the session file is read by
`pi-memory-bridge import` into a second, empty data dir, and both stores are compared row by row.
"""

from __future__ import annotations

import shutil
import subprocess
import time

from bridge import SHIM, SIDECAR, stored_turns, use_bridge
from harness import ErrorReply, FakeModel, PiEnv, ScriptedDialogs, TextReply, ToolCall, ToolCallsReply

TOKEN = "ghp_" + "Qm4Zt7Lp2Xv9Rk1Wn6Hs3Jd8Fb5Gc0Ya2Ue7"
COLUMNS = (
    "turn_id",
    "memory_session_id",
    "pi_session_id",
    "user_text",
    "assistant_text",
    "created_at",
    "tools_json",
)


def _rows(env: PiEnv) -> list[tuple[object, ...]]:
    return sorted(tuple(r[c] for c in COLUMNS) for r in stored_turns(env))


def test_live_capture_and_catch_up_store_the_same_turns(pi_env: PiEnv, fake_model: FakeModel) -> None:
    use_bridge(pi_env, config={"capture": {"catchUp": False}})
    # print mode: a plain turn with a secret, a tool round trip, a retry after an HTTP 500
    assert pi_env.run_print([f"remember token {TOKEN} please"], extensions=[SHIM]).returncode == 0
    assert (
        pi_env.run_print(['CALL_TOOL bash {"command": "echo parity-ok"}'], extensions=[SHIM]).returncode == 0
    )
    fake_model.script(ToolCallsReply((ToolCall("bash", {"command": "echo first try"}),)), ErrorReply(500))
    assert pi_env.run_print(["a tool call, then the server fails once"], extensions=[SHIM]).returncode == 0
    # RPC: a follow-up queued during a slow reply, a steer during a tool call, an abort
    rpc = pi_env.start_rpc(extensions=[SHIM], dialogs=ScriptedDialogs())
    fake_model.script(TextReply("slow first answer", delay_s=1.5), TextReply("answer to the follow-up"))
    mark = rpc.mark()
    rpc.send({"type": "prompt", "message": "first question, slowly answered"})
    rpc.wait_for_type("agent_start", timeout=20, since=mark)
    time.sleep(0.3)
    rpc.request_ok({"type": "follow_up", "message": "and a follow-up"})
    rpc.wait_for_type("agent_settled", timeout=40, since=mark)
    fake_model.script(
        ToolCallsReply((ToolCall("bash", {"command": "sleep 1; echo steered"}),), delay_s=0.5),
        TextReply("steered answer"),
    )
    mark = rpc.mark()
    rpc.send({"type": "prompt", "message": "run a slow tool"})
    rpc.wait_for_type("tool_execution_start", timeout=20, since=mark)
    rpc.request_ok({"type": "steer", "message": "steer this way"})
    rpc.wait_for_type("agent_settled", timeout=40, since=mark)
    fake_model.script(TextReply("this answer is cut off " * 40, delay_s=2.0))
    mark = rpc.mark()
    rpc.send({"type": "prompt", "message": "a prompt the user aborts"})
    rpc.wait_for_type("agent_start", timeout=20, since=mark)
    time.sleep(0.5)
    rpc.request_ok({"type": "abort"})
    rpc.wait_for_type("agent_settled", timeout=40, since=mark)
    rpc.prompt_and_settle("last plain turn")
    n_live = 7  # plain, tool, retried, first, follow-up, steer, last plain (the abort is not kept)
    rpc.wait_until(lambda: len(stored_turns(pi_env)) == n_live, timeout=30)
    assert rpc.close() == 0
    live = _rows(pi_env)
    assert TOKEN not in repr(live)

    # the same session files, read by catch-up's reader into an empty data dir
    shutil.rmtree(pi_env.agent_dir / "memory-bridge")
    use_bridge(pi_env)
    done = subprocess.run(
        [str(SIDECAR), "import", "--yes"], env=pi_env.environ(), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert _rows(pi_env) == live
