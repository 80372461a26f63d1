"""Unit tests for pi_shapes: fail-closed capture parsing, on real recorded Pi 0.84.4 / 1.6.0 runs.

The fixtures under tests/data/pi_messages/ are `agent_end.messages` and `agent_settled` payloads
recorded from real Pi processes talking to the lab's fake OpenAI server (see each file's "how").
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from pi_memory_bridge.capture.pi_shapes import (
    IMAGE_PLACEHOLDER,
    CapturedTurn,
    Extraction,
    SkippedPair,
    ToolPair,
    extract_turns,
    text_of_user_content,
)

FIXTURES = Path(__file__).parent / "data" / "pi_messages"
VERSIONS = ("0.84.4", "1.6.0")


def load_settles(version: str, scenario: str) -> list[dict[str, Any]]:
    data = json.loads((FIXTURES / f"pi-{version}-{scenario}.json").read_text(encoding="utf-8"))
    assert data["pi_version"] == version and data["scenario"] == scenario
    settles: list[dict[str, Any]] = data["settles"]
    return settles


def load(version: str, scenario: str) -> tuple[list[list[Any]], bool | None]:
    """The runs and `aborted` flag of the scenario's only settle (a deep copy, safe to mutate)."""
    settles = load_settles(version, scenario)
    assert len(settles) == 1
    return copy.deepcopy(settles[0]["runs"]), settles[0]["aborted"]


def messages_with_role(runs: list[list[Any]], role: str) -> list[dict[str, Any]]:
    return [m for run in runs for m in run if isinstance(m, dict) and m.get("role") == role]


def reasons(extraction: Extraction) -> list[str]:
    return [s.reason for s in extraction.skipped]


def user(text: str, ts: int = 1) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": ts}


def assistant(content: Any, stop: Any = "stop", ts: int = 2) -> dict[str, Any]:
    return {"role": "assistant", "content": content, "stopReason": stop, "timestamp": ts}


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def call(call_id: str, name: str = "probe_tool", args: Any = None) -> dict[str, Any]:
    return {
        "type": "toolCall",
        "id": call_id,
        "name": name,
        "arguments": {"text": call_id} if args is None else args,
    }


def result(call_id: str, out: str = "out", name: str = "probe_tool", is_error: Any = False) -> dict[str, Any]:
    return {
        "role": "toolResult",
        "toolCallId": call_id,
        "toolName": name,
        "content": [text(out)],
        "isError": is_error,
        "timestamp": 3,
    }


# ---- recorded shapes, both versions ------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_plain_turn_is_captured_with_timestamps(version: str) -> None:
    runs, aborted = load(version, "plain")
    extraction = extract_turns(runs, aborted=aborted)
    (user_msg,) = messages_with_role(runs, "user")
    (assistant_msg,) = messages_with_role(runs, "assistant")
    assert extraction.turns == (
        CapturedTurn(
            user_text="hello plain",
            assistant_text=assistant_msg["content"][0]["text"],
            tool_pairs=(),
            user_timestamp_ms=user_msg["timestamp"],
            assistant_timestamp_ms=assistant_msg["timestamp"],
        ),
    )
    assert extraction.skipped == ()
    assert extraction.dropped_tools == ()


def test_recorded_settle_flag_differs_between_versions() -> None:
    assert load("0.84.4", "plain")[1] is None
    assert load("1.6.0", "plain")[1] is False


def test_v1_system_message_opens_the_first_run_and_is_ignored() -> None:
    runs, aborted = load("1.6.0", "plain")
    first = runs[0][0]
    assert first["role"] == "system" and "sections" in first and "toolsAdded" in first
    assert [t.user_text for t in extract_turns(runs, aborted=aborted).turns] == ["hello plain"]


def test_v1_system_message_inside_a_pair_is_ignored() -> None:
    runs, aborted = load("1.6.0", "tool_round_trip")
    system = copy.deepcopy(runs[0][0])
    runs[0].insert(len(runs[0]) - 1, system)  # a later system patch message before the final answer
    extraction = extract_turns(runs, aborted=aborted)
    assert len(extraction.turns) == 1 and len(extraction.turns[0].tool_pairs) == 1


@pytest.mark.parametrize("version", VERSIONS)
def test_tool_round_trip_pairs_call_and_result(version: str) -> None:
    runs, aborted = load(version, "tool_round_trip")
    (turn,) = extract_turns(runs, aborted=aborted).turns
    assert turn.user_text == "CALL_TOOL probe_tool hi"
    assert turn.assistant_text == "FINAL: tool said probe_tool got: hi"
    assert turn.tool_pairs == (
        ToolPair(
            tool_call_id="call_fake_1",
            tool_name="probe_tool",
            arguments={"text": "hi"},
            result_text="probe_tool got: hi",
            is_error=False,
        ),
    )


@pytest.mark.parametrize("version", VERSIONS)
def test_thinking_blocks_and_intermediate_text_are_not_the_final_text(version: str) -> None:
    runs, aborted = load(version, "thinking_and_text_with_tool")
    first_assistant = messages_with_role(runs, "assistant")[0]
    assert [b["type"] for b in first_assistant["content"]] == ["thinking", "text", "toolCall"]
    (turn,) = extract_turns(runs, aborted=aborted).turns
    assert turn.assistant_text == "Done: t1 checked."
    assert [p.tool_call_id for p in turn.tool_pairs] == ["call_fake_1"]


@pytest.mark.parametrize("version", VERSIONS)
def test_failed_tool_results_are_kept_with_is_error_in_call_order(version: str) -> None:
    runs, aborted = load(version, "tool_errors")
    (turn,) = extract_turns(runs, aborted=aborted).turns
    assert [(p.tool_name, p.is_error) for p in turn.tool_pairs] == [("no_such_tool", True), ("bash", True)]
    assert turn.tool_pairs[1].result_text.endswith("Command exited with code 3")
    assert turn.tool_pairs[1].arguments == {"command": "echo failing; exit 3"}


@pytest.mark.parametrize("version", VERSIONS)
def test_follow_up_in_the_same_run_is_its_own_pair(version: str) -> None:
    runs, aborted = load(version, "follow_up")
    assert len(runs) == 1 and len(messages_with_role(runs, "user")) == 2
    extraction = extract_turns(runs, aborted=aborted)
    assert [(t.user_text, t.assistant_text) for t in extraction.turns] == [
        ("slow first", "answer to first"),
        ("queued follow up", "answer to follow up"),
    ]


@pytest.mark.parametrize("version", VERSIONS)
def test_each_settle_of_two_prompts_yields_its_own_turn(version: str) -> None:
    settles = load_settles(version, "two_prompts")
    captured = [extract_turns(s["runs"], aborted=s["aborted"]).turns for s in settles]
    assert [[t.user_text for t in turns] for turns in captured] == [["first prompt"], ["second prompt"]]


@pytest.mark.parametrize("version", VERSIONS)
def test_retry_after_error_captures_the_retry_and_drops_the_failed_runs_tool_calls(version: str) -> None:
    runs, aborted = load(version, "retry_after_error")
    assert len(runs) == 2
    assert runs[0][-1]["stopReason"] == "error"
    assert [m["role"] for m in runs[1]] == ["assistant"]  # the retry run has no user message
    extraction = extract_turns(runs, aborted=aborted)
    (turn,) = extraction.turns
    assert turn.user_text == "CALL_TOOL probe_tool first"
    assert turn.assistant_text == "FINAL: tool said probe_tool got: first"
    assert turn.assistant_timestamp_ms == runs[1][0]["timestamp"]
    assert turn.tool_pairs == ()
    assert extraction.dropped_tools == ("tool-call-failed-run",)


@pytest.mark.parametrize("version", VERSIONS)
def test_retry_after_http_error_without_tools(version: str) -> None:
    runs, aborted = load(version, "retry_after_http_error")
    (turn,) = extract_turns(runs, aborted=aborted).turns
    assert turn.user_text == "please fail once"
    assert turn.assistant_text.startswith("ECHO:")


def test_a_retry_runs_own_tool_calls_are_kept() -> None:
    runs = [
        [user("u"), assistant([call("c1")], "toolUse"), result("c1"), assistant([], "error")],
        [assistant([call("c2")], "toolUse"), result("c2", "second"), assistant([text("done")])],
    ]
    extraction = extract_turns(runs)
    (turn,) = extraction.turns
    assert [(p.tool_call_id, p.result_text) for p in turn.tool_pairs] == [("c2", "second")]
    assert extraction.dropped_tools == ("tool-call-failed-run",)


def test_an_aborted_run_drops_tool_calls_of_an_earlier_pair_in_the_same_run() -> None:
    runs = [
        [
            user("first"),
            assistant([call("c1")], "toolUse"),
            result("c1"),
            assistant([text("first answer")]),
            user("follow up"),
            assistant([], "aborted"),
        ]
    ]
    extraction = extract_turns(runs)
    assert [(t.user_text, t.tool_pairs) for t in extraction.turns] == [("first", ())]
    assert reasons(extraction) == ["stop-reason:aborted"]


def test_an_error_that_is_not_retried_skips_the_pair() -> None:
    extraction = extract_turns([[user("u"), assistant([], "error")]])
    assert extraction.turns == () and reasons(extraction) == ["stop-reason:error"]


@pytest.mark.parametrize("version", VERSIONS)
def test_aborted_run_captures_nothing(version: str) -> None:
    runs, aborted = load(version, "aborted")
    assert runs[-1][-1]["stopReason"] == "aborted"
    assert aborted is (None if version == "0.84.4" else True)
    extraction = extract_turns(runs, aborted=aborted)
    assert extraction.turns == ()
    assert reasons(extraction) == ["stop-reason:aborted" if version == "0.84.4" else "aborted"]


@pytest.mark.parametrize("version", VERSIONS)
def test_aborted_flag_drops_the_last_pair_even_when_its_text_looks_complete(version: str) -> None:
    runs, _ = load(version, "plain")
    extraction = extract_turns(runs, aborted=True)
    assert extraction.turns == () and reasons(extraction) == ["aborted"]
    assert len(extract_turns(runs, aborted=False).turns) == 1


@pytest.mark.parametrize("version", VERSIONS)
def test_aborted_flag_keeps_completed_earlier_pairs(version: str) -> None:
    runs, _ = load(version, "follow_up")
    extraction = extract_turns(runs, aborted=True)
    assert [t.user_text for t in extraction.turns] == ["slow first"]
    assert reasons(extraction) == ["aborted"]


@pytest.mark.parametrize("version", VERSIONS)
def test_image_blocks_in_the_prompt_become_a_placeholder(version: str) -> None:
    runs, aborted = load(version, "image_prompt")
    (user_msg,) = messages_with_role(runs, "user")
    assert [b["type"] for b in user_msg["content"]] == ["text", "image"]
    (turn,) = extract_turns(runs, aborted=aborted).turns
    assert turn.user_text == f"what is in this image\n{IMAGE_PLACEHOLDER}"
    assert "iVBOR" not in turn.user_text


@pytest.mark.parametrize("version", VERSIONS)
def test_steering_during_a_tool_loop_captures_only_the_steer_pair(version: str) -> None:
    runs, aborted = load(version, "steer_during_tool")
    extraction = extract_turns(runs, aborted=aborted)
    # the original prompt's pair ends in a toolUse message: fail-closed, it stores nothing
    assert [(t.user_text, t.assistant_text, t.tool_pairs) for t in extraction.turns] == [
        ("steer this way", "steered answer", ())
    ]
    assert reasons(extraction) == ["stop-reason:toolUse"]


# ---- shape-change regressions (mutations of the recorded final message) ------------------------


def final_assistant(runs: list[list[Any]]) -> dict[str, Any]:
    return messages_with_role(runs, "assistant")[-1]


@pytest.mark.parametrize("version", VERSIONS)
def test_regression_assistant_content_as_string(version: str) -> None:
    runs, aborted = load(version, "tool_round_trip")
    final = final_assistant(runs)
    final["content"] = final["content"][0]["text"]
    extraction = extract_turns(runs, aborted=aborted)
    assert extraction.turns == () and reasons(extraction) == ["assistant-content-not-array"]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("renamed", ["output_text", "Text", "text_delta"])
def test_regression_text_block_type_renamed(version: str, renamed: str) -> None:
    runs, aborted = load(version, "plain")
    final_assistant(runs)["content"][0]["type"] = renamed
    extraction = extract_turns(runs, aborted=aborted)
    assert extraction.turns == () and reasons(extraction) == [f"assistant-block-unknown:{renamed}"]


@pytest.mark.parametrize("version", VERSIONS)
def test_regression_assistant_role_renamed(version: str) -> None:
    runs, aborted = load(version, "tool_round_trip")
    for message in messages_with_role(runs, "assistant"):
        message["role"] = "model"
    extraction = extract_turns(runs, aborted=aborted)
    assert extraction.turns == () and reasons(extraction) == ["unknown-role:model"]


@pytest.mark.parametrize("version", VERSIONS)
def test_regression_only_the_final_role_renamed(version: str) -> None:
    runs, aborted = load(version, "tool_round_trip")
    final_assistant(runs)["role"] = "ai"
    extraction = extract_turns(runs, aborted=aborted)
    assert extraction.turns == () and reasons(extraction) == ["unknown-role:ai"]


@pytest.mark.parametrize("version", VERSIONS)
def test_regression_user_role_renamed(version: str) -> None:
    runs, aborted = load(version, "plain")
    messages_with_role(runs, "user")[0]["role"] = "human"
    extraction = extract_turns(runs, aborted=aborted)
    assert extraction.turns == () and reasons(extraction) == ["no-user-message"]


@pytest.mark.parametrize("version", VERSIONS)
def test_regression_unknown_block_next_to_a_valid_text_block(version: str) -> None:
    runs, aborted = load(version, "plain")
    final_assistant(runs)["content"].append({"type": "citation", "text": "x"})
    extraction = extract_turns(runs, aborted=aborted)
    assert extraction.turns == () and reasons(extraction) == ["assistant-block-unknown:citation"]


@pytest.mark.parametrize(
    ("stop_reason", "reason"),
    [
        ("error", "stop-reason:error"),
        ("aborted", "stop-reason:aborted"),
        ("length", "stop-reason:length"),
        ("toolUse", "stop-reason:toolUse"),
        ("pending", "stop-reason:pending"),
        ("deferred", "stop-reason:deferred"),
        ("STOP", "stop-reason:STOP"),
        (None, "stop-reason-missing"),
        (1, "stop-reason-missing"),
    ],
)
def test_only_stop_reason_stop_counts(stop_reason: object, reason: str) -> None:
    runs, aborted = load("1.6.0", "plain")
    final_assistant(runs)["stopReason"] = stop_reason
    extraction = extract_turns(runs, aborted=aborted)
    assert extraction.turns == () and reasons(extraction) == [reason]


def test_missing_stop_reason_key() -> None:
    runs, aborted = load("0.84.4", "plain")
    del final_assistant(runs)["stopReason"]
    assert reasons(extract_turns(runs, aborted=aborted)) == ["stop-reason-missing"]


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ([{"type": "text", "text": None}], "assistant-text-block-invalid"),
        ([{"type": "text"}], "assistant-text-block-invalid"),
        ([{"type": "text", "text": ["a"]}], "assistant-text-block-invalid"),
        (["plain string block"], "assistant-block-not-object"),
        ([{"text": "no type"}], "assistant-block-type-missing"),
        ([{"type": 3, "text": "x"}], "assistant-block-type-missing"),
        ({"type": "text", "text": "a dict, not an array"}, "assistant-content-not-array"),
        (None, "assistant-content-not-array"),
        ([], "assistant-text-empty"),
        ([text("  \n ")], "assistant-text-empty"),
        ([{"type": "thinking", "thinking": "only thoughts"}], "assistant-text-empty"),
    ],
)
def test_malformed_final_assistant_content(content: object, reason: str) -> None:
    extraction = extract_turns([[user("u"), assistant(content)]])
    assert extraction.turns == () and reasons(extraction) == [reason]


def test_final_text_joins_text_blocks_with_newline_and_strips() -> None:
    content = [
        {"type": "thinking", "thinking": "hmm", "thinkingSignature": "sig"},
        {"type": "text", "text": "  first", "textSignature": "opaque"},
        call("c9"),
        text("second  "),
    ]
    (turn,) = extract_turns([[user(" u "), assistant(content)]]).turns
    assert (turn.user_text, turn.assistant_text) == ("u", "first\nsecond")


def test_final_text_comes_from_the_last_assistant_message_only() -> None:
    runs = [
        [user("u"), assistant([text("early")]), {"role": "custom", "content": "x"}, assistant([], "error")]
    ]
    extraction = extract_turns(runs)
    assert extraction.turns == () and reasons(extraction) == ["stop-reason:error"]


def test_malformed_intermediate_assistant_message_skips_the_pair() -> None:
    runs = [[user("u"), assistant("calling a tool", "toolUse"), result("c1"), assistant([text("done")])]]
    assert reasons(extract_turns(runs)) == ["assistant-content-not-array"]


# ---- user content -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("as a string", "as a string"),
        ([text("a"), text("b")], "a\nb"),
        ([{"type": "image", "data": "AAAA", "mimeType": "image/png"}], IMAGE_PLACEHOLDER),
        ([], ""),
        ([{"type": "text", "text": "x", "textSignature": "s"}], "x"),
        ([{"type": "file", "name": "a.txt"}], None),
        ([{"type": "text", "text": 5}], None),
        (["bare string block"], None),
        ({"type": "text", "text": "dict"}, None),
        (None, None),
        (42, None),
    ],
)
def test_text_of_user_content(content: object, expected: str | None) -> None:
    assert text_of_user_content(content) == expected


def test_user_content_as_string_is_captured() -> None:
    (turn,) = extract_turns([[{"role": "user", "content": "hi there"}, assistant([text("hello")])]]).turns
    assert turn.user_text == "hi there" and turn.user_timestamp_ms is None


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ([{"type": "audio", "data": "x"}], "user-content-invalid"),
        (None, "user-content-invalid"),
        ("   ", "user-text-empty"),
        ([], "user-text-empty"),
    ],
)
def test_unacceptable_user_content_skips_the_pair(content: object, reason: str) -> None:
    runs = [[{"role": "user", "content": content}, assistant([text("answer")])]]
    extraction = extract_turns(runs)
    assert extraction.turns == () and reasons(extraction) == [reason]


def test_a_user_message_without_an_answer_is_skipped() -> None:
    extraction = extract_turns([[user("first"), user("second"), assistant([text("a2")])]])
    assert [t.user_text for t in extraction.turns] == ["second"]
    assert reasons(extraction) == ["no-assistant-message"]


# ---- roles ------------------------------------------------------------------------------------


@pytest.mark.parametrize("role", ["custom", "system", "bashExecution", "branchSummary", "compactionSummary"])
def test_known_non_conversation_roles_are_ignored(role: str) -> None:
    extra = {"role": role, "content": "whatever", "summary": "s", "command": "ls", "timestamp": 5}
    runs = [[extra, user("u"), extra, assistant([text("a")]), extra]]
    extraction = extract_turns(runs)
    assert [(t.user_text, t.assistant_text) for t in extraction.turns] == [("u", "a")]
    assert extraction.skipped == ()


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        ({"role": "tool", "content": "x"}, "unknown-role:tool"),
        ({"role": "developer", "content": []}, "unknown-role:developer"),
        ({"content": "no role"}, "role-missing"),
        ({"role": None}, "role-missing"),
        ("a string message", "message-not-object"),
        (["a", "list"], "message-not-object"),
        (None, "message-not-object"),
    ],
)
def test_unknown_or_malformed_message_inside_a_pair_skips_it(message: object, reason: str) -> None:
    runs = [[user("u1"), message, assistant([text("a1")]), user("u2"), assistant([text("a2")])]]
    extraction = extract_turns(runs)
    assert [t.user_text for t in extraction.turns] == ["u2"]
    assert reasons(extraction) == [reason]


def test_reason_details_are_sanitised_and_capped() -> None:
    runs = [[user("u"), {"role": "a role\nwith <odd> chars" + "x" * 100}]]
    (reason,) = reasons(extract_turns(runs))
    assert reason == "unknown-role:a_role_with__odd__chars" + "x" * 17
    assert len(reason) == len("unknown-role:") + 40


def test_messages_before_the_first_user_message_are_reported_once() -> None:
    runs = [[assistant([text("stray")]), result("c1"), {"role": "model"}, user("u"), assistant([text("a")])]]
    extraction = extract_turns(runs)
    assert [t.assistant_text for t in extraction.turns] == ["a"]
    assert reasons(extraction) == ["no-user-message"]


# ---- tool pairing -----------------------------------------------------------------------------


def test_parallel_calls_keep_call_order_whatever_the_result_order() -> None:
    runs = [
        [
            user("u"),
            assistant([call("c1", "read"), call("c2", "bash"), call("c3", "edit")], "toolUse"),
            result("c3", "r3", "edit"),
            result("c1", "r1", "read"),
            result("c2", "r2", "bash", is_error=True),
            assistant([text("done")]),
        ]
    ]
    (turn,) = extract_turns(runs).turns
    assert [(p.tool_call_id, p.tool_name, p.result_text, p.is_error) for p in turn.tool_pairs] == [
        ("c1", "read", "r1", False),
        ("c2", "bash", "r2", True),
        ("c3", "edit", "r3", False),
    ]


def test_result_text_joins_text_blocks_and_skips_images() -> None:
    tool_result = result("c1")
    tool_result["content"] = [
        text("a"),
        {"type": "image", "data": "AAAA", "mimeType": "image/png"},
        text("b"),
    ]
    runs = [[user("u"), assistant([call("c1")], "toolUse"), tool_result, assistant([text("ok")])]]
    (turn,) = extract_turns(runs).turns
    assert turn.tool_pairs[0].result_text == "a\nb"


@pytest.mark.parametrize(
    ("messages", "dropped"),
    [
        ([assistant([call("c1")], "toolUse")], ["tool-call-without-result"]),
        ([result("c1")], ["tool-result-without-call"]),
        ([assistant([call("c1"), call("c1")], "toolUse"), result("c1")], ["tool-id-duplicated"] * 2),
        ([assistant([call("c1")], "toolUse"), result("c1"), result("c1")], ["tool-id-duplicated"]),
        ([assistant([call("c1", "read")], "toolUse"), result("c1", name="bash")], ["tool-name-mismatch"]),
        (
            [assistant([call("c1")], "toolUse"), result("c1", is_error="no")],
            ["tool-result-invalid", "tool-call-without-result"],
        ),
        (
            [assistant([call("c1", args="not an object")], "toolUse"), result("c1")],
            ["tool-call-invalid", "tool-result-without-call"],
        ),
        (
            [assistant([{"type": "toolCall", "name": "x", "arguments": {}}], "toolUse")],
            ["tool-call-invalid"],
        ),
        (
            [
                assistant([call("c1")], "toolUse"),
                {**result("c1"), "content": [{"type": "json", "value": 1}]},
            ],
            ["tool-result-invalid", "tool-call-without-result"],
        ),
        (
            [assistant([call("c1")], "toolUse"), {**result("c1"), "content": "string output"}],
            ["tool-result-invalid", "tool-call-without-result"],
        ),
    ],
)
def test_unpaired_or_malformed_tool_messages_are_dropped(messages: list[Any], dropped: list[str]) -> None:
    runs = [[user("u"), *messages, assistant([text("final")])]]
    extraction = extract_turns(runs)
    (turn,) = extraction.turns
    assert turn.tool_pairs == ()
    assert turn.assistant_text == "final"
    assert list(extraction.dropped_tools) == dropped


def test_tool_calls_do_not_pair_across_user_prompts() -> None:
    runs = [
        [user("u1"), assistant([call("c1")], "toolUse"), assistant([text("a1")])],
        [user("u2"), result("c1"), assistant([text("a2")])],
    ]
    extraction = extract_turns(runs)
    assert [t.tool_pairs for t in extraction.turns] == [(), ()]
    assert extraction.dropped_tools == ("tool-call-without-result", "tool-result-without-call")


def test_tools_of_a_skipped_pair_are_not_reported() -> None:
    runs = [[user("u"), assistant([call("c1")], "toolUse"), result("c1"), assistant([], "length")]]
    extraction = extract_turns(runs)
    assert extraction.turns == () and extraction.dropped_tools == ()
    assert reasons(extraction) == ["stop-reason:length"]


# ---- garbage in, nothing out --------------------------------------------------------------------


@pytest.mark.parametrize("runs", [None, "runs", b"runs", 5, {"runs": []}, {1, 2}])
def test_runs_that_are_not_an_array(runs: Any) -> None:
    assert extract_turns(runs) == Extraction(turns=(), skipped=(SkippedPair("runs-not-array"),))


def test_empty_runs_yield_nothing() -> None:
    assert extract_turns([]) == Extraction(turns=(), skipped=())
    assert extract_turns([[], []], aborted=True) == Extraction(turns=(), skipped=())


def test_a_run_that_is_not_an_array_poisons_the_open_pair_and_what_follows() -> None:
    runs = [
        [user("u1"), assistant([text("a1")])],
        [user("u2"), assistant([call("c1")], "toolUse")],
        "not a run",
        [result("c1"), assistant([text("a2?")])],
        [user("u3"), assistant([text("a3")])],
    ]
    extraction = extract_turns(runs)
    assert [t.user_text for t in extraction.turns] == ["u1", "u3"]
    assert sorted(reasons(extraction)) == ["run-not-array"]


def test_a_broken_run_before_any_pair_is_reported() -> None:
    extraction = extract_turns([None, [user("u"), assistant([text("a")])]])
    assert [t.user_text for t in extraction.turns] == ["u"]
    assert reasons(extraction) == ["run-not-array"]


@pytest.mark.parametrize("stamp", [True, 1.5e12, "1795988881065", None, [1]])
def test_non_integer_timestamps_become_none(stamp: object) -> None:
    runs = [[{**user("u"), "timestamp": stamp}, {**assistant([text("a")]), "timestamp": stamp}]]
    (turn,) = extract_turns(runs).turns
    assert (turn.user_timestamp_ms, turn.assistant_timestamp_ms) == (None, None)


def test_tuples_are_accepted_as_arrays() -> None:
    runs = ((user("u"), assistant((text("a"),))),)
    assert [t.assistant_text for t in extract_turns(runs).turns] == ["a"]


def test_unhashable_role_and_block_type_do_not_crash() -> None:
    runs = [
        [
            {"role": ["user"]},
            user("u"),
            {"role": {"nested": 1}},
            assistant([{"type": ["text"], "text": "x"}]),
        ],
        [user("u2"), assistant([{"type": {"t": 1}}, text("y")], stop={"s": 1})],
    ]
    extraction = extract_turns(runs)
    assert extraction.turns == ()
    assert reasons(extraction) == ["no-user-message", "role-missing", "assistant-block-type-missing"]
