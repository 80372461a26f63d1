"""From settled runs to stored turns: ids, redaction before anything else, tool evidence."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from pi_memory_bridge.capture.identity import BranchIdentity
from pi_memory_bridge.capture.prepare import MAX_TOOL_RESULT_CHARS, MAX_TURN_TEXT_CHARS, prepare_capture

IDENT = BranchIdentity("sess-1", "main")
NOW = datetime(2026, 11, 29, tzinfo=UTC)
PASSWORD = "Tr0ub4dor-and-3-horses"


def _tool_round(result: str) -> list[dict[str, object]]:
    return [
        {"role": "user", "content": [{"type": "text", "text": "deploy it"}], "timestamp": 1_000},
        {
            "role": "assistant",
            "stopReason": "toolUse",
            "timestamp": 1_100,
            "content": [
                {
                    "type": "toolCall",
                    "id": "call_1",
                    "name": "bash",
                    "arguments": {"command": "deploy", "password": PASSWORD, "max_tokens": 5},
                }
            ],
        },
        {
            "role": "toolResult",
            "toolCallId": "call_1",
            "toolName": "bash",
            "isError": False,
            "content": [{"type": "text", "text": result}],
            "timestamp": 1_200,
        },
        {
            "role": "assistant",
            "stopReason": "stop",
            "content": [{"type": "text", "text": "deployed"}],
            "timestamp": 1_300,
        },
    ]


def test_tool_pairs_are_kept_redacted_structurally_and_clipped_head_and_tail() -> None:
    log = "start\n" + "x" * 20_000 + f"\nFATAL: heap out of memory (db password={PASSWORD})"
    prepared = prepare_capture([_tool_round(log)], aborted=False, identity=IDENT, now=NOW)
    (turn,) = prepared.turns
    (tool,) = turn.tools
    assert (tool.tool_call_id, tool.tool_name, tool.is_error) == ("call_1", "bash", False)
    args = json.loads(tool.arguments)
    assert (
        args["password"].startswith("[REDACTED") and args["max_tokens"] == 5 and args["command"] == "deploy"
    )
    assert len(tool.result) <= MAX_TOOL_RESULT_CHARS
    assert tool.result.startswith("start") and "FATAL: heap out of memory" in tool.result  # the tail survives
    assert PASSWORD not in tool.result and PASSWORD not in tool.arguments
    assert prepared.redactions >= 2


def test_turn_ids_are_deterministic_and_differ_by_branch() -> None:
    runs = [_tool_round("ok")]
    a = prepare_capture(runs, aborted=False, identity=IDENT, now=NOW).turns[0]
    b = prepare_capture(runs, aborted=False, identity=IDENT, now=NOW).turns[0]
    c = prepare_capture(runs, aborted=False, identity=BranchIdentity("sess-1", "e5f6"), now=NOW).turns[0]
    assert a.turn_id == b.turn_id != c.turn_id
    assert a.created_at == datetime.fromtimestamp(1.0, tz=UTC)  # the user message's own time


def test_long_texts_keep_head_and_tail() -> None:
    runs = [
        [
            {"role": "user", "content": "q " * 10_000, "timestamp": 5},
            {
                "role": "assistant",
                "stopReason": "stop",
                "content": [{"type": "text", "text": "lorem ipsum " * 900 + "END"}],
            },
        ]
    ]
    (turn,) = prepare_capture(runs, aborted=False, identity=IDENT, now=NOW).turns
    assert len(turn.user_text) <= MAX_TURN_TEXT_CHARS and len(turn.assistant_text) <= MAX_TURN_TEXT_CHARS
    assert turn.assistant_text.endswith("END")


def test_nothing_doubtful_is_captured() -> None:
    runs = [
        [
            {"role": "user", "content": "hi", "timestamp": 5},
            {"role": "assistant", "stopReason": "stop", "content": "a string, not blocks"},
        ]
    ]
    prepared = prepare_capture(runs, aborted=False, identity=IDENT, now=NOW)
    assert prepared.turns == () and len(prepared.skipped_reasons) == 1
