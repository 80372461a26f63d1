"""Self-check of the E2E bench: the fake model, the process helpers, and real Pi on both versions."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from typing import Any

import pytest

from harness import (
    MARKER_EXT,
    RUN_MARKER_VAR,
    Cancelled,
    Confirmed,
    DelayedRules,
    DialogRequest,
    ErrorReply,
    FakeModel,
    PiEnv,
    RecordedRequest,
    ScriptedDialogs,
    TextReply,
    ToolCall,
    ToolCallsReply,
    Value,
    find_pids_by_env,
    pid_alive,
    process_state,
    rule_reply,
    wait_until_gone,
)

# ---- the fake model on its own -----------------------------------------------------------------


def _post(model: FakeModel, body: dict[str, Any]) -> tuple[int, bytes]:
    req = urllib.request.Request(
        model.base_url + "/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": "Bearer t"},
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def _sse_payloads(raw: bytes) -> list[Any]:
    frames = [f.removeprefix(b"data: ") for f in raw.split(b"\n\n") if f.startswith(b"data: ")]
    assert frames[-1] == b"[DONE]"
    return [json.loads(f) for f in frames[:-1]]


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def _request(*messages: dict[str, Any]) -> RecordedRequest:
    return RecordedRequest(1, 0.0, "POST", "/v1/chat/completions", {}, {"messages": list(messages)})


def test_rules_echo_the_last_user_text() -> None:
    req = _request({"role": "system", "content": "sys"}, _user("my prompt"), _user("injected context"))
    assert rule_reply(req) == TextReply("ECHO: injected context")
    assert req.trailing_user_texts == ["my prompt", "injected context"]
    assert rule_reply(_request(_user("x" * 300))) == TextReply("ECHO: " + "x" * 200)


def test_rules_call_tool_with_json_args_or_a_word() -> None:
    json_form = _request(_user('CALL_TOOL bash {"command": "echo hi there"} trailing words'))
    assert rule_reply(json_form) == ToolCallsReply((ToolCall("bash", {"command": "echo hi there"}),))
    word_form = _request(_user("first"), _user("CALL_TOOL probe_tool hello world"))
    assert rule_reply(word_form) == ToolCallsReply((ToolCall("probe_tool", {"text": "hello"}),))
    after_tool = _request(
        _user('CALL_TOOL bash {"command": "x"}'),
        {"role": "assistant", "content": None, "tool_calls": []},
        {"role": "tool", "tool_call_id": "c1", "content": "tool output"},
    )
    assert rule_reply(after_tool) == TextReply("FINAL: tool said tool output")


def test_fake_model_answers_non_streaming_and_logs_requests(fake_model: FakeModel) -> None:
    status, raw = _post(fake_model, {"model": "fake-model", "messages": [_user("plain")]})
    assert status == 200
    body = json.loads(raw)
    assert body["object"] == "chat.completion"
    assert body["choices"][0]["message"] == {"role": "assistant", "content": "ECHO: plain"}
    assert body["choices"][0]["finish_reason"] == "stop"

    req = fake_model.last_request()
    assert req.headers["authorization"] == "Bearer t"
    assert fake_model.user_texts() == ["plain"]
    assert fake_model.requests_containing("plain") == [req]
    assert fake_model.requests_containing("absent") == []
    [entry] = fake_model.log_entries()
    assert entry["body"]["messages"][0]["content"][0]["text"] == "plain"
    assert entry["reply"] == {"text": "ECHO: plain", "delay": 0.0}


def test_fake_model_streams_scripted_tool_calls_errors_and_delays(fake_model: FakeModel) -> None:
    fake_model.script(
        {"tool_calls": [{"tool": "a", "args": {"x": 1}}, {"tool": "b"}]},
        ErrorReply(503, "busy"),
        DelayedRules(0.3),
    )
    streaming = {"model": "m", "stream": True, "stream_options": {"include_usage": True}}

    status, raw = _post(fake_model, {**streaming, "messages": [_user("go")]})
    assert status == 200
    chunks = _sse_payloads(raw)
    calls = [
        c["choices"][0]["delta"]["tool_calls"][0]
        for c in chunks
        if c["choices"] and "tool_calls" in c["choices"][0]["delta"]
    ]
    assert [(c["index"], c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls] == [
        (0, "a", {"x": 1}),
        (1, "b", {}),
    ]
    assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["total_tokens"] == 18

    status, raw = _post(fake_model, {**streaming, "messages": [_user("go")]})
    assert (status, json.loads(raw)["error"]["message"]) == (503, "busy")

    t0 = time.monotonic()
    status, raw = _post(fake_model, {**streaming, "messages": [_user("slow")]})
    assert time.monotonic() - t0 >= 0.3
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in _sse_payloads(raw) if c["choices"])
    assert text == "ECHO: slow"
    assert fake_model.pending_replies() == 0
    assert isinstance(fake_model.reply_to(fake_model.last_request()), DelayedRules)


def test_fake_model_stop_does_not_wait_for_a_delayed_reply() -> None:
    model = FakeModel().start()
    model.script(TextReply("late", delay_s=30))
    with pytest.raises(OSError):  # the connection is dropped when the server stops
        threading.Timer(0.2, model.stop).start()
        _post(model, {"messages": [_user("x")]})
    assert model.wait_for_requests(1, timeout=1)


def _answer_text(model: FakeModel, text: str) -> str:
    status, raw = _post(model, {"messages": [_user(text)]})
    assert status == 200, raw
    return str(json.loads(raw)["choices"][0]["message"]["content"])


def test_responder_answers_before_the_rules_and_its_errors_surface() -> None:
    with FakeModel() as model:
        model.responder = lambda req: TextReply("custom") if "mine" in req.all_text else None
        assert _answer_text(model, "mine") == "custom"
        assert _answer_text(model, "other") == "ECHO: other"

        def broken(req: RecordedRequest) -> None:
            raise ValueError("boom")

        model.responder = broken
        status, _ = _post(model, {"messages": [_user("x")]})
        assert status == 500
        assert model.errors == ["responder raised on request 3: ValueError('boom')"]


# ---- dialogs and processes without Pi ----------------------------------------------------------


def test_scripted_dialogs_answer_in_order_and_cancel_the_unscripted() -> None:
    dialogs = ScriptedDialogs().confirm(True, False).select("beta")
    confirm = DialogRequest("1", "confirm", "t", {})
    assert [dialogs(confirm), dialogs(confirm), dialogs(confirm)] == [
        Confirmed(True),
        Confirmed(False),
        Cancelled(),
    ]
    assert dialogs(DialogRequest("2", "select", "t", {})) == Value("beta")
    assert [d.method for d in dialogs.unscripted] == ["confirm"]
    with pytest.raises(TypeError):
        dialogs.push("confirm", Value("yes"))


def test_pid_alive_treats_a_zombie_as_dead_and_env_marker_finds_children() -> None:
    token = f"selfcheck-{os.getpid()}-{time.monotonic_ns()}"
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(30)"], env={**os.environ, RUN_MARKER_VAR: token}
    )
    try:
        assert find_pids_by_env(RUN_MARKER_VAR, token) == [child.pid]
        assert pid_alive(child.pid)
        os.kill(child.pid, signal.SIGKILL)
        assert wait_until_gone([child.pid], timeout=5) == []
        assert process_state(child.pid) == "Z"  # not reaped yet: exited, still in the table
        assert find_pids_by_env(RUN_MARKER_VAR, token) == []
    finally:
        child.kill()
        child.wait()
    assert not pid_alive(child.pid)


# ---- real Pi, both versions --------------------------------------------------------------------


def test_print_turn_reaches_model_with_marker_at_end_of_system_prompt(
    pi_env: PiEnv, fake_model: FakeModel
) -> None:
    run = pi_env.run_print(["hello print"], extensions=[MARKER_EXT])

    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "ECHO: hello print"
    req = fake_model.last_request()
    assert req.body["stream"] is True and req.body["model"] == "fake-model"
    assert req.headers["authorization"] == "Bearer dummy-key"
    assert req.roles == ["system", "user"]
    assert req.system_prompt.rstrip().endswith("E2E_SYS_MARKER")
    assert req.system_prompt.count("E2E_SYS_MARKER") == 1
    assert {"read", "bash", "edit", "write"} <= set(req.tool_names)
    assert pi_env.session_files(), "print mode persists a session file"


def test_rpc_command_dialogs_are_answered_and_ui_recorded(pi_env: PiEnv, fake_model: FakeModel) -> None:
    session = pi_env.start_rpc(extensions=[MARKER_EXT])
    assert "e2e-confirm" in {c["name"] for c in session.get_commands() if c.get("source") == "extension"}
    session.scripted.confirm(True).select("beta")

    result = session.prompt_and_settle("/e2e-confirm  raw args ")

    assert result.response["success"] is True
    assert not result.ran
    assert result.disposition == (None if pi_env.install.version_tuple < (0, 99) else "handled")
    confirm, select = session.ui.dialogs
    assert (confirm.request.method, confirm.request.message, confirm.answer) == (
        "confirm",
        "Proceed with ' raw args '?",
        Confirmed(True),
    )
    assert (select.request.method, select.request.options, select.answer) == (
        "select",
        ["alpha", "beta", "gamma"],
        Value("beta"),
    )
    assert session.wait_for_status("e2e") == "confirmed=true picked=beta"
    assert [(n.message, n.kind) for n in session.ui.notifications] == [
        ("e2e-confirm: confirmed=true picked=beta", "info")
    ]

    # Nothing scripted: both dialogs are cancelled, so Pi never blocks.
    session.prompt_and_settle("/e2e-confirm again")
    session.wait_until(lambda: session.ui.status("e2e") == "confirmed=false picked=none")
    assert [d.method for d in session.scripted.unscripted] == ["confirm", "select"]
    assert fake_model.chat_requests == [], "an extension command makes no model request"
    assert session.close() == 0


def test_rpc_tool_round_trip_with_builtin_bash(pi_env: PiEnv, fake_model: FakeModel) -> None:
    session = pi_env.start_rpc(extensions=[MARKER_EXT])

    result = session.prompt_and_settle('CALL_TOOL bash {"command": "echo hi"}')

    assert result.ran
    assert result.final_text == "FINAL: tool said hi\n"
    [tool_end] = result.of_type("tool_execution_end")
    assert tool_end["toolName"] == "bash" and tool_end["isError"] is False
    assert [r["type"] for r in result.records if r["type"] in ("agent_end", "agent_settled")] == [
        "agent_end",
        "agent_settled",
    ]
    _first, second = fake_model.chat_requests
    assert second.roles[-2:] == ["assistant", "tool"]
    assert second.messages[-1]["content"] == "hi\n"

    fake_model.script(
        ToolCallsReply((ToolCall("bash", {"command": "echo one"}), ToolCall("bash", {"command": "echo two"})))
    )
    result = session.prompt_and_settle("two calls")
    assert sorted(e["args"]["command"] for e in result.of_type("tool_execution_start")) == [
        "echo one",
        "echo two",
    ]
    tool_messages = [m for m in fake_model.last_request().messages if m.get("role") == "tool"]
    assert [m["content"] for m in tool_messages][-2:] == ["one\n", "two\n"]
    assert session.close() == 0


def test_model_http_500_once_is_retried_by_pi(pi_env: PiEnv, fake_model: FakeModel) -> None:
    fake_model.script(ErrorReply(500))

    run = pi_env.run_print(["after a 500"])

    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "ECHO: after a 500"
    assert len(fake_model.chat_requests) == 2


def test_model_http_500_persisting_ends_the_run_and_pi_keeps_serving(
    pi_env: PiEnv, fake_model: FakeModel
) -> None:
    pi_env.write_settings({"retry": {"maxRetries": 1}})
    session = pi_env.start_rpc()
    fake_model.script(ErrorReply(500), ErrorReply(500))

    failed = session.prompt_and_settle("doomed")

    assert failed.ran
    [retry_end] = failed.of_type("auto_retry_end")
    assert retry_end["success"] is False and "500" in retry_end["finalError"]
    assert failed.agent_end_messages[-1]["stopReason"] == "error"
    assert len(fake_model.chat_requests) == 2

    recovered = session.prompt_and_settle("next prompt")
    assert recovered.final_text == "ECHO: next prompt"
    # Observed on both versions: the failed prompt stays in the context, with no assistant reply.
    assert fake_model.last_request().user_texts == ["doomed", "next prompt"]
    assert session.close() == 0


def test_sigkill_of_pi_in_rpc_mode_leaves_no_process(pi_env: PiEnv) -> None:
    session = pi_env.start_rpc(extensions=[MARKER_EXT])
    session.get_state()  # extensions loaded, session started
    marked = pi_env.marked_pids()
    assert session.pid in marked

    assert session.kill9() == -signal.SIGKILL

    assert wait_until_gone(marked, timeout=5) == []
    assert pi_env.marked_pids() == []
