"""Capture E2E on real Pi: redaction before disk, tool turns, follow-ups as their own pairs."""

from __future__ import annotations

import json
import time

from bridge import SHIM, data_dir, stored_turns, use_bridge
from harness import FakeModel, PiEnv, ScriptedDialogs, TextReply

AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "EXAMPLEKEY9Qx"
GH_TOKEN = "ghp_" + "Qm4Zt7Lp2Xv9Rk1Wn6Hs3Jd8Fb5Gc0Ya2Ue7"


def _raw_bytes(env: PiEnv) -> bytes:
    """Every file the bridge keeps (SQLite databases, their WAL, logs), byte for byte."""
    return b"".join(p.read_bytes() for p in data_dir(env).rglob("*") if p.is_file())


def test_secrets_in_prompt_and_tool_result_never_reach_disk(pi_env: PiEnv, fake_model: FakeModel) -> None:
    use_bridge(pi_env)
    secret_file = pi_env.work_dir / "creds.env"
    secret_file.write_text(f"AWS_SECRET_ACCESS_KEY={AWS_SECRET}\n", encoding="utf-8")
    prompt = f'my token is {GH_TOKEN}; CALL_TOOL bash {{"command": "cat {secret_file}"}}'
    run = pi_env.run_print([prompt], extensions=[SHIM])
    assert run.returncode == 0, run.stderr
    assert AWS_SECRET in run.stdout  # the tool really read it and the model saw it
    rows = stored_turns(pi_env)
    assert len(rows) == 1
    assert "[REDACTED:" in rows[0]["user_text"] and "[REDACTED:" in rows[0]["assistant_text"]
    raw = _raw_bytes(pi_env)
    assert GH_TOKEN.encode() not in raw and AWS_SECRET.encode() not in raw
    (tool,) = json.loads(rows[0]["tools_json"])
    assert "[REDACTED:" in tool["result"]  # the tool pair is kept, in its redacted form


def test_a_tool_turn_is_captured_with_its_tool_pair(pi_env: PiEnv, fake_model: FakeModel) -> None:
    use_bridge(pi_env)
    run = pi_env.run_print(['CALL_TOOL bash {"command": "echo build-ok-42"}'], extensions=[SHIM])
    assert run.returncode == 0, run.stderr
    rows = stored_turns(pi_env)
    assert len(rows) == 1
    assert rows[0]["assistant_text"].startswith("FINAL: tool said build-ok-42")
    (tool,) = json.loads(rows[0]["tools_json"])
    # the id the model gave the call, as Pi sent it back with the result
    sent_ids = [c["id"] for m in fake_model.chat_requests[1].messages for c in m.get("tool_calls") or []]
    assert tool["toolCallId"] in sent_ids
    assert tool["toolName"] == "bash"
    assert json.loads(tool["arguments"]) == {"command": "echo build-ok-42"}
    assert tool["result"].strip() == "build-ok-42" and tool["isError"] is False


def test_a_follow_up_queued_during_a_run_is_its_own_pair(pi_env: PiEnv, fake_model: FakeModel) -> None:
    use_bridge(pi_env)
    fake_model.script(
        TextReply("answer to the first question", delay_s=1.5), TextReply("answer to the follow-up")
    )
    rpc = pi_env.start_rpc(extensions=[SHIM], dialogs=ScriptedDialogs())
    mark = rpc.mark()
    rpc.send({"type": "prompt", "message": "first question about caching"})
    rpc.wait_for_type("agent_start", timeout=15, since=mark)
    time.sleep(0.3)
    rpc.request_ok({"type": "follow_up", "message": "follow-up about eviction"})
    rpc.wait_for_type("agent_settled", timeout=30, since=mark)
    rpc.wait_until(lambda: len(stored_turns(pi_env)) == 2, timeout=15)
    pairs = {(t["user_text"], t["assistant_text"]) for t in stored_turns(pi_env)}
    assert pairs == {
        ("first question about caching", "answer to the first question"),
        ("follow-up about eviction", "answer to the follow-up"),
    }
    assert rpc.close() == 0
