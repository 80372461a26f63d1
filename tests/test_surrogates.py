"""Lone UTF-16 surrogates (half an emoji from a JavaScript slice) never cost a turn.

The real sidecar gets them the way the shim sends them: JSON `\\ud800` escapes.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from pi_memory_bridge import surrogates
from pi_memory_bridge.capture import prepare as capture
from pi_memory_bridge.capture.identity import BranchIdentity
from pi_memory_bridge.capture.pi_shapes import extract_turns
from pi_memory_bridge.capture.prepare import prepare_capture
from sidecar_client import SidecarProcess
from waiting import wait_until

HALF_EMOJI = "\ud83d"  # the high half of U+1F600, as `"😀".slice(0, 1)` leaves it in JS


def _runs(prompt: str, args: dict[str, object], result: str) -> list[list[dict[str, object]]]:
    return [
        [
            {"role": "user", "content": [{"type": "text", "text": prompt}], "timestamp": 1_764_000_000_000},
            {
                "role": "assistant",
                "stopReason": "toolUse",
                "timestamp": 1_764_000_000_500,
                "content": [{"type": "toolCall", "id": "call_1", "name": "bash", "arguments": args}],
            },
            {
                "role": "toolResult",
                "toolCallId": "call_1",
                "toolName": "bash",
                "isError": False,
                "content": [{"type": "text", "text": result}],
                "timestamp": 1_764_000_000_600,
            },
            {
                "role": "assistant",
                "stopReason": "stop",
                "content": [{"type": "text", "text": "printed the zebracorn banner"}],
                "timestamp": 1_764_000_001_000,
            },
        ]
    ]


@pytest.fixture
def sidecar(tmp_path: Path):  # type: ignore[no-untyped-def]
    agent = tmp_path / "home" / ".pi" / "agent"
    agent.mkdir(parents=True)
    proc = SidecarProcess(agent)
    yield proc
    if proc.proc.poll() is None:
        proc.proc.kill()
        proc.proc.wait()


def test_the_real_sidecar_stores_a_turn_with_lone_surrogates(sidecar: SidecarProcess, tmp_path: Path) -> None:
    sidecar.initialize(tmp_path)
    runs = _runs(
        "print the zebracorn banner \ud800 please",
        {"command": f"echo zebracorn {HALF_EMOJI}", "note": {"k\udfff": ["x\ude00"]}},
        f"zebracorn {HALF_EMOJI}",
    )
    wire = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 77,
            "method": "turn/settled",
            "params": {"piSessionId": "sess-1", "runs": runs, "aborted": False},
        }
    )
    assert "\\ud800" in wire and "\\ud83d" in wire  # escapes on the wire, as JSON.stringify writes them
    sidecar.send_raw(wire.encode() + b"\n")
    answer = sidecar.wait_for(77)
    assert "error" not in answer, answer
    assert answer["result"]["captured"] == 1

    wait_until(  # delivery from the outbox runs in the background
        lambda: sidecar.call("status")["result"]["counts"].get("turns", 0) >= 1,
        10,
        "delivery of the captured turn to the store",
        detail=lambda: sidecar.call("status")["result"],
    )
    found = sidecar.call(
        "tool/call", {"name": "tdai_conversation_search", "arguments": {"query": "zebracorn banner \ud800"}}
    )["result"]
    assert not found["isError"] and "zebracorn banner \ufffd please" in found["text"]
    recalled = sidecar.call(
        "recall", {"piSessionId": "sess-2", "prompt": "the zebracorn banner \udbff again?"}
    )
    assert recalled["result"]["outcome"] == "recalled", recalled
    assert "\ufffd" in recalled["result"]["block"]

    db = tmp_path / "home" / ".pi" / "agent" / "memory-bridge" / "memory.sqlite3"
    with sqlite3.connect(db) as conn:
        user_text, tools_json = conn.execute("SELECT user_text, tools_json FROM turns").fetchone()
    assert user_text == "print the zebracorn banner \ufffd please"
    (tool,) = json.loads(tools_json)
    assert json.loads(tool["arguments"]) == {
        "command": "echo zebracorn \ufffd",
        "note": {"k\ufffd": ["x\ufffd"]},
    }
    assert tool["result"] == "zebracorn \ufffd"


def test_session_file_lines_are_normalised_like_rpc_lines() -> None:
    # A session file is UTF-8 written by Node; a lone surrogate there is an escape or, from an
    # older writer, its UTF-8-style bytes.
    escaped = b'{"text": "a\\ud800b", "k\\udc00": ["\\ud83d\\ude00"]}'
    raw_bytes = b'{"text": "a\xed\xa0\x80b"}'
    assert surrogates.loads(escaped) == {"text": "a\ufffdb", "k\ufffd": ["\U0001f600"]}
    assert surrogates.loads(raw_bytes) == {"text": "a\ufffdb"}
    assert not surrogates.may_hold_surrogates(b'{"text": "plain \\u00e9 \\u4e2d"}')


def test_parsing_hands_out_no_lone_surrogate() -> None:
    extraction = extract_turns(_runs("hi \ud800", {"a\udc00": HALF_EMOJI}, "r\udfff"))
    (turn,) = extraction.turns
    (pair,) = turn.tool_pairs
    assert turn.user_text == "hi \ufffd"
    assert pair.arguments == {"a\ufffd": "\ufffd"} and pair.result_text == "r\ufffd"


def test_one_turn_that_cannot_be_prepared_is_skipped_with_a_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    runs = [
        [
            {"role": "user", "content": [{"type": "text", "text": "first prompt"}], "timestamp": 1_000},
            {"role": "assistant", "stopReason": "stop", "content": [{"type": "text", "text": "one"}]},
            {"role": "user", "content": [{"type": "text", "text": "poison prompt"}], "timestamp": 2_000},
            {"role": "assistant", "stopReason": "stop", "content": [{"type": "text", "text": "two"}]},
        ]
    ]
    real = capture.redact_text

    def failing(text: str):  # type: ignore[no-untyped-def]
        if text == "poison prompt":
            raise RuntimeError("a redaction rule broke")
        return real(text)

    monkeypatch.setattr(capture, "redact_text", failing)
    prepared = prepare_capture(runs, aborted=False, identity=BranchIdentity("s", "main"))
    assert [t.user_text for t in prepared.turns] == ["first prompt"]
    assert prepared.skipped_reasons == ("prepare-failed:RuntimeError",)
