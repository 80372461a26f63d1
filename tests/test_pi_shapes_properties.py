"""Property tests for pi_shapes.extract_turns.

* well-formed conversations (follow-ups, tool rounds, retries after errors, abort flags, 1.x system
  messages, custom messages) are captured exactly as a simple model of the rules predicts;
* after random shape mutations (of generated and of recorded real runs) everything captured still
  comes verbatim from an acceptable message of the input (fail-closed soundness);
* arbitrary JSON-like input never raises.
"""

from __future__ import annotations

import copy
import itertools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pi_memory_bridge.capture.pi_shapes import (
    IMAGE_PLACEHOLDER,
    CapturedTurn,
    Extraction,
    SkippedPair,
    ToolPair,
    extract_turns,
)

pytestmark = pytest.mark.slow  # property tests over generated conversations

FIXTURES = Path(__file__).parent / "data" / "pi_messages"
RECORDED: list[tuple[list[Any], bool | None]] = [
    (settle["runs"], settle["aborted"])
    for path in sorted(FIXTURES.glob("pi-*.json"))
    for settle in json.loads(path.read_text(encoding="utf-8"))["settles"]
]

PROPERTY_SETTINGS = settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)

TEXT = st.text(max_size=12)
# mostly text that survives strip(), sometimes empty or blank
PROSE = st.one_of(
    st.text(min_size=1, max_size=12).filter(str.strip),
    st.text(min_size=1, max_size=12).filter(str.strip),
    TEXT,
)
TOOL_NAMES = st.sampled_from(["read", "bash", "edit", "write", "probe_tool"])
ROLE_RENAMES = (
    st.sampled_from(["model", "ai", "Assistant", "tool", "human", "developer", "toolresult"]) | TEXT
)
BLOCK_RENAMES = (
    st.sampled_from(["output_text", "Text", "text_delta", "reasoning", "tool_call", "image"]) | TEXT
)
STOP_REASONS = st.sampled_from(
    ["stop", "error", "aborted", "length", "toolUse", "pending", "deferred", "end_turn"]
)
SYSTEM_MESSAGE = {
    "role": "system",
    "content": "",
    "sections": {"preamble": "p"},
    "toolsAdded": [],
    "timestamp": 1,
}
CUSTOM_MESSAGE = {
    "role": "custom",
    "customType": "probe-marker",
    "content": "M",
    "display": False,
    "timestamp": 2,
}
IMAGE_BLOCK = {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}

KNOWN_STRINGS = [
    "user",
    "assistant",
    "toolResult",
    "system",
    "custom",
    "model",
    "text",
    "image",
    "thinking",
    "toolCall",
    "output_text",
    "stop",
    "error",
    "aborted",
    "toolUse",
    "length",
    "c1",
    "probe_tool",
]
KNOWN_KEYS = [
    "role",
    "content",
    "type",
    "text",
    "stopReason",
    "timestamp",
    "id",
    "name",
    "arguments",
    "toolCallId",
    "toolName",
    "isError",
    "thinking",
]
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True)
    | st.text(max_size=8)
    | st.sampled_from(KNOWN_STRINGS)
)


def json_like(max_leaves: int) -> st.SearchStrategy[Any]:
    return st.recursive(
        SCALARS,
        lambda children: (
            st.lists(children, max_size=5)
            | st.dictionaries(st.sampled_from(KNOWN_KEYS) | st.text(max_size=6), children, max_size=6)
        ),
        max_leaves=max_leaves,
    )


JSON_LIKE = json_like(25)
SMALL_JSON = json_like(4)  # a value placed into an otherwise plausible message


def text_block(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


@dataclass
class Conversation:
    runs: list[list[Any]]
    aborted: bool | None
    per_pair: list[CapturedTurn | None]  # what each user prompt should yield, in order
    expected_failed_run_calls: int  # tool calls of captured pairs made in failed runs

    @property
    def expected(self) -> list[CapturedTurn]:
        return [turn for turn in self.per_pair if turn is not None]


@st.composite
def conversations(draw: st.DrawFn) -> Conversation:
    """A well-formed settle and the turns the capture rules predict for it."""
    runs: list[list[Any]] = [[]]
    if draw(st.booleans()):
        runs[0].append(copy.deepcopy(SYSTEM_MESSAGE))
    clock = itertools.count(1_795_000_000_000)
    call_ids = (f"call_{n}" for n in itertools.count())
    failed_runs: set[int] = set()
    # per pair: (user_text, final stop reason, final text, user ts, assistant ts, [(run, ToolPair)])
    pairs: list[tuple[str, str, str, int, int, list[tuple[int, ToolPair]]]] = []

    for _ in range(draw(st.integers(1, 4))):
        new_run = draw(st.booleans())  # a new prompt; otherwise a follow-up queued into the same run
        if new_run and runs[-1]:
            runs.append([])
        if draw(st.booleans()):
            user_content: Any = draw(PROSE)
            user_text = user_content.strip()
        else:
            parts = draw(st.lists(st.one_of(PROSE, st.none()), max_size=3))
            user_content = [IMAGE_BLOCK if part is None else text_block(part) for part in parts]
            user_text = "\n".join(IMAGE_PLACEHOLDER if part is None else part for part in parts).strip()
        user_ts = next(clock)
        runs[-1].append({"role": "user", "content": user_content, "timestamp": user_ts})
        if draw(st.booleans()):
            runs[-1].append(copy.deepcopy(CUSTOM_MESSAGE))

        tools: list[tuple[int, ToolPair]] = []
        for _ in range(draw(st.integers(0, 3))):
            calls = [
                ToolPair(
                    tool_call_id=next(call_ids),
                    tool_name=draw(TOOL_NAMES),
                    arguments={"text": draw(TEXT)},
                    result_text=draw(TEXT),
                    is_error=draw(st.booleans()),
                )
                for _ in range(draw(st.integers(1, 2)))
            ]
            blocks: list[Any] = []
            if draw(st.booleans()):
                blocks.append({"type": "thinking", "thinking": draw(TEXT)})
            if draw(st.booleans()):
                blocks.append(text_block(draw(TEXT)))
            blocks += [
                {"type": "toolCall", "id": c.tool_call_id, "name": c.tool_name, "arguments": c.arguments}
                for c in calls
            ]
            runs[-1].append(
                {"role": "assistant", "content": blocks, "stopReason": "toolUse", "timestamp": next(clock)}
            )
            for c in draw(st.permutations(calls)):
                runs[-1].append(
                    {
                        "role": "toolResult",
                        "toolCallId": c.tool_call_id,
                        "toolName": c.tool_name,
                        "content": [text_block(c.result_text)],
                        "isError": c.is_error,
                        "timestamp": next(clock),
                    }
                )
            tools += [(len(runs) - 1, c) for c in calls]
            if draw(st.integers(0, 3)) == 0:  # the next request fails; Pi retries in a new run
                runs[-1].append(
                    {"role": "assistant", "content": [], "stopReason": "error", "timestamp": next(clock)}
                )
                failed_runs.add(len(runs) - 1)
                runs.append([])

        stop_reason = draw(st.sampled_from(["stop", "stop", "stop", "length", "toolUse", "error", "aborted"]))
        final_blocks: list[Any] = []
        texts: list[str] = []
        for _ in range(draw(st.integers(0, 3))):
            if draw(st.integers(0, 3)) == 0:
                final_blocks.append({"type": "thinking", "thinking": draw(TEXT)})
            else:
                texts.append(draw(PROSE))
                final_blocks.append(text_block(texts[-1]))
        assistant_ts = next(clock)
        runs[-1].append(
            {
                "role": "assistant",
                "content": final_blocks,
                "stopReason": stop_reason,
                "timestamp": assistant_ts,
            }
        )
        if stop_reason in ("error", "aborted"):
            failed_runs.add(len(runs) - 1)
            runs.append([])
        pairs.append((user_text, stop_reason, "\n".join(texts).strip(), user_ts, assistant_ts, tools))

    aborted = draw(st.sampled_from([None, False, True]))
    per_pair: list[CapturedTurn | None] = []
    failed_run_calls = 0
    for index, (user_text, stop_reason, final_text, user_ts, assistant_ts, tools) in enumerate(pairs):
        if (aborted and index == len(pairs) - 1) or not user_text or stop_reason != "stop" or not final_text:
            per_pair.append(None)
            continue
        kept = tuple(pair for run, pair in tools if run not in failed_runs)
        failed_run_calls += len(tools) - len(kept)
        per_pair.append(CapturedTurn(user_text, final_text, kept, user_ts, assistant_ts))
    return Conversation(runs, aborted, per_pair, failed_run_calls)


@PROPERTY_SETTINGS
@given(conversations())
def test_well_formed_conversations_are_captured_as_the_rules_say(conv: Conversation) -> None:
    extraction = extract_turns(conv.runs, aborted=conv.aborted)
    assert list(extraction.turns) == conv.expected
    assert len(extraction.turns) + len(extraction.skipped) == len(conv.per_pair)
    assert list(extraction.dropped_tools) == ["tool-call-failed-run"] * conv.expected_failed_run_calls


KNOWN_ROLES = {"user", "assistant", "toolResult", "custom", "system", "bashExecution", "branchSummary"}
KNOWN_ROLES |= {"compactionSummary"}
KNOWN_ASSISTANT_BLOCKS = {"text", "thinking", "toolCall"}


@PROPERTY_SETTINGS
@given(conversations(), st.data())
def test_a_shape_change_inside_a_pair_removes_exactly_that_pair(
    conv: Conversation, data: st.DataObject
) -> None:
    """Renaming a role or an assistant block type, or turning assistant content into a string,
    anywhere inside a pair (not only in its final message) makes that pair, and only it, yield nothing."""
    positions = []  # (run, index, pair index) of every non-user message that belongs to a pair
    users_seen = 0
    for run_index, run in enumerate(conv.runs):
        for index, message in enumerate(run):
            if message["role"] == "user":
                users_seen += 1
            elif users_seen:
                positions.append((run_index, index, users_seen - 1))
    run_index, index, pair_index = data.draw(st.sampled_from(positions))
    message = conv.runs[run_index][index]
    changes = ["role"] + (["block", "string"] if message["role"] == "assistant" else [])
    change = data.draw(st.sampled_from(changes))
    if change == "role":
        message["role"] = data.draw(ROLE_RENAMES.filter(lambda role: role not in KNOWN_ROLES))
    elif change == "string" or not message["content"]:
        message["content"] = "".join(b.get("text", "") for b in message["content"])
    else:
        block = data.draw(st.sampled_from(message["content"]))
        block["type"] = data.draw(BLOCK_RENAMES.filter(lambda kind: kind not in KNOWN_ASSISTANT_BLOCKS))

    extraction = extract_turns(conv.runs, aborted=conv.aborted)
    expected = [turn for i, turn in enumerate(conv.per_pair) if turn is not None and i != pair_index]
    # the changed message may have been a failed run's last word, which changes which tool calls
    # count: compare the prompts and answers
    assert [(t.user_text, t.assistant_text) for t in extraction.turns] == [
        (t.user_text, t.assistant_text) for t in expected
    ]


# ---- mutations: soundness ---------------------------------------------------------------------


def _mutate_message(draw: st.DrawFn, message: Any) -> Any:
    if not isinstance(message, dict):
        return draw(SMALL_JSON)
    message = dict(message)
    kind = draw(
        st.sampled_from(
            [
                "content-to-string",
                "rename-block",
                "rename-role",
                "drop-key",
                "set-key",
                "stop-reason",
                "replace",
            ]
        )
    )
    content = message.get("content")
    if kind == "content-to-string" and isinstance(content, list):
        message["content"] = "".join(
            b.get("text", "") for b in content if isinstance(b, dict) and "text" in b
        )
    elif kind == "rename-block" and isinstance(content, list) and content:
        index = draw(st.integers(0, len(content) - 1))
        blocks = list(content)
        if isinstance(blocks[index], dict):
            blocks[index] = {**blocks[index], "type": draw(BLOCK_RENAMES)}
        message["content"] = blocks
    elif kind == "rename-role":
        message["role"] = draw(ROLE_RENAMES)
    elif kind == "drop-key" and message:
        message.pop(draw(st.sampled_from(sorted(message))), None)
    elif kind == "set-key":
        message[draw(st.sampled_from(KNOWN_KEYS))] = draw(SMALL_JSON)
    elif kind == "stop-reason":
        message["stopReason"] = draw(STOP_REASONS)
    elif kind == "replace":
        return draw(SMALL_JSON)
    return message


@st.composite
def mutated(draw: st.DrawFn, base: st.SearchStrategy[tuple[list[Any], bool | None]]) -> tuple[list[Any], Any]:
    runs, aborted = draw(base)
    runs = copy.deepcopy(runs)
    for _ in range(draw(st.integers(1, 4))):
        if not runs:
            break
        run_index = draw(st.integers(0, len(runs) - 1))
        run = runs[run_index]
        action = draw(st.sampled_from(["mutate", "mutate", "mutate", "insert", "remove", "break-run"]))
        if action == "break-run" or not isinstance(run, list):
            runs[run_index] = draw(SMALL_JSON)
        elif action == "insert":
            run.insert(draw(st.integers(0, len(run))), draw(SMALL_JSON))
        elif run:
            index = draw(st.integers(0, len(run) - 1))
            if action == "remove":
                del run[index]
            else:
                run[index] = _mutate_message(draw, run[index])
    return runs, draw(st.sampled_from([None, False, True, aborted]))


GENERATED = conversations().map(lambda conv: (conv.runs, conv.aborted))
RECORDED_SETTLES = st.sampled_from(RECORDED)


def _messages(runs: object) -> list[dict[Any, Any]]:
    if not isinstance(runs, list | tuple):
        return []
    return [m for run in runs if isinstance(run, list | tuple) for m in run if isinstance(m, dict)]


def _acceptable_assistant_texts(runs: object) -> set[str]:
    texts: set[str] = set()
    for message in _messages(runs):
        content = message.get("content")
        if (
            message.get("role") == "assistant"
            and message.get("stopReason") == "stop"
            and isinstance(content, list)
        ):
            blocks = [b["text"] for b in content if isinstance(b, dict) and b.get("type") == "text"]
            if all(isinstance(b, str) for b in blocks):
                texts.add("\n".join(blocks).strip())
    return texts


def _acceptable_user_texts(runs: object) -> set[str]:
    texts: set[str] = set()
    for message in _messages(runs):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            texts.add(content.strip())
        elif isinstance(content, list) and all(isinstance(b, dict) for b in content):
            parts = [IMAGE_PLACEHOLDER if b.get("type") == "image" else b.get("text") for b in content]
            if all(isinstance(p, str) for p in parts):
                texts.add("\n".join(p for p in parts if isinstance(p, str)).strip())
    return texts


def _tool_pair_is_in_input(pair: ToolPair, runs: object) -> bool:
    messages = _messages(runs)
    call_found = any(
        isinstance(block, dict)
        and block.get("type") == "toolCall"
        and block.get("id") == pair.tool_call_id
        and block.get("name") == pair.tool_name
        and block.get("arguments") == pair.arguments
        for m in messages
        if m.get("role") == "assistant" and isinstance(m.get("content"), list)
        for block in m["content"]
    )
    result_found = any(
        m.get("role") == "toolResult"
        and m.get("toolCallId") == pair.tool_call_id
        and m.get("toolName") == pair.tool_name
        and m.get("isError") is pair.is_error
        and isinstance(m.get("content"), list)
        and "\n".join(b["text"] for b in m["content"] if isinstance(b, dict) and b.get("type") == "text")
        == pair.result_text
        for m in messages
    )
    return call_found and result_found


def _assert_sound(extraction: Extraction, runs: object) -> None:
    assistant_texts = _acceptable_assistant_texts(runs)
    user_texts = _acceptable_user_texts(runs)
    for turn in extraction.turns:
        assert turn.assistant_text and turn.assistant_text in assistant_texts
        assert turn.user_text and turn.user_text in user_texts
        for pair in turn.tool_pairs:
            assert _tool_pair_is_in_input(pair, runs)
        assert turn.user_timestamp_ms is None or type(turn.user_timestamp_ms) is int
        assert turn.assistant_timestamp_ms is None or type(turn.assistant_timestamp_ms) is int
    for skipped in extraction.skipped:
        assert isinstance(skipped, SkippedPair) and skipped.reason


@PROPERTY_SETTINGS
@given(mutated(GENERATED))
def test_mutated_generated_runs_capture_only_acceptable_messages(case: tuple[list[Any], Any]) -> None:
    runs, aborted = case
    _assert_sound(extract_turns(runs, aborted=aborted), runs)


@settings(PROPERTY_SETTINGS, max_examples=800)
@given(mutated(RECORDED_SETTLES))
def test_mutated_recorded_runs_capture_only_acceptable_messages(case: tuple[list[Any], Any]) -> None:
    runs, aborted = case
    _assert_sound(extract_turns(runs, aborted=aborted), runs)


@PROPERTY_SETTINGS
@given(mutated(GENERATED | RECORDED_SETTLES))
def test_the_abort_flag_only_ever_removes_the_last_pair(case: tuple[list[Any], Any]) -> None:
    runs, _ = case
    plain = extract_turns(runs)
    aborted = extract_turns(runs, aborted=True)
    assert extract_turns(runs, aborted=False) == plain
    assert plain.turns[: len(aborted.turns)] == aborted.turns
    assert len(plain.turns) - len(aborted.turns) in (0, 1)
    assert len(plain.turns) + len(plain.skipped) == len(aborted.turns) + len(aborted.skipped)


def test_the_input_is_not_modified() -> None:
    for runs, aborted in RECORDED:
        before = json.dumps(runs, sort_keys=True)
        extract_turns(runs, aborted=aborted)
        assert json.dumps(runs, sort_keys=True) == before


# ---- garbage ----------------------------------------------------------------------------------


@settings(PROPERTY_SETTINGS, max_examples=600)
@given(JSON_LIKE, st.sampled_from([None, False, True]))
def test_arbitrary_json_never_raises(runs: Any, aborted: bool | None) -> None:
    extraction = extract_turns(runs, aborted=aborted)
    assert isinstance(extraction, Extraction)
    _assert_sound(extraction, runs)


MESSAGE_LIKE = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "toolResult", "system", "custom"]) | SMALL_JSON},
    optional={
        "content": st.lists(
            st.fixed_dictionaries(
                {
                    "type": st.sampled_from(["text", "image", "thinking", "toolCall", "output_text"])
                    | SMALL_JSON
                },
                optional={"text": TEXT | SMALL_JSON, "id": st.just("c1") | SMALL_JSON, "name": SMALL_JSON},
            )
            | SMALL_JSON,
            max_size=4,
        )
        | SMALL_JSON,
        "stopReason": STOP_REASONS | SMALL_JSON,
        "toolCallId": st.just("c1") | SMALL_JSON,
        "toolName": SMALL_JSON,
        "isError": SMALL_JSON,
        "timestamp": SMALL_JSON,
    },
)


@settings(PROPERTY_SETTINGS, max_examples=300)
@given(st.lists(st.lists(MESSAGE_LIKE | SMALL_JSON, max_size=6) | SMALL_JSON, max_size=3), SMALL_JSON)
def test_message_shaped_garbage_never_raises(runs: Any, aborted: Any) -> None:
    extraction = extract_turns(runs, aborted=aborted)
    _assert_sound(extraction, runs)
