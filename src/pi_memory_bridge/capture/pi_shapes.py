"""Fail-closed parsing of the Pi messages that arrive at `agent_settled`.

The shim sends every low-level run since the user's prompt: each run is the `messages` array of one
`agent_end` event (only the messages that run added). Retries, queued follow-ups and compaction can
make several runs before the settle, and a retry run starts with an assistant message, not a user
one, so the runs are walked as one stream.

Pairing: every `role:"user"` message starts a pair (a follow-up or a steering message is a pair of
its own) that runs until the next user message, across run boundaries. A pair is captured only when
everything in it has a shape we know; anything else records a `SkippedPair` reason and stores
nothing for that pair, because a wrong guess would put garbage into long-term memory while a miss
only costs one turn. Known consequence: when a steering message arrives during a tool loop, the
original prompt's pair ends in a `toolUse` assistant message and is skipped; the steering message is
captured with the final answer.

Final text: only from the pair's last assistant message, only when its `content` is an array, its
`stopReason` is `"stop"`, and only from exact `{type:"text", text:str}` blocks (`thinking` and
`toolCall` blocks are ignored, an unknown block type skips the pair).

Tool trail: `toolCall` blocks and `toolResult` messages of the pair, paired by id, in call order.
Calls made in a failed run (a run whose last assistant message stopped with `error` or `aborted`)
are dropped with their results: a retry replays the work, and the failed attempt is not evidence of
what worked. Unpaired, duplicated or malformed calls and results are dropped; the reasons are kept
in `Extraction.dropped_tools`.

`aborted=True` (Pi 1.x `agent_settled.aborted`): the last pair captures nothing, whatever its
messages say, since the user stopped it; earlier pairs of the same settle (completed follow-ups) are
still captured. Pi 0.84 does not send the flag (None); there an abort shows as a last assistant
message with `stopReason:"aborted"`, which skips the pair anyway.

Nothing here raises, whatever JSON-like value comes in. Every string a captured turn carries is
free of lone UTF-16 surrogates (`surrogates.scrub`), whether it came over RPC or from a session
file.

Size: about 400 lines, one walk over one stream of messages in small pure steps; split, the
pairing rules above would be read across files.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from pi_memory_bridge.surrogates import scrub, scrub_json

IMAGE_PLACEHOLDER = "[image omitted]"

# Roles Pi may put into a run that carry nothing we capture (extension messages, 1.x system prompt
# messages, direct shell commands, summaries).
_IGNORED_ROLES = frozenset({"custom", "system", "bashExecution", "branchSummary", "compactionSummary"})
_FAILED_STOP_REASONS = frozenset({"error", "aborted"})
_IGNORED_ASSISTANT_BLOCKS = frozenset({"thinking", "toolCall"})
_REASON_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
_REASON_DETAIL_MAX = 40


@dataclass(frozen=True, slots=True)
class ToolPair:
    tool_call_id: str
    tool_name: str
    arguments: object  # JSON-like, as sent by the model
    result_text: str  # text blocks of the toolResult joined with "\n"
    is_error: bool


@dataclass(frozen=True, slots=True)
class CapturedTurn:
    user_text: str  # the user prompt text, stripped (text blocks joined; images -> IMAGE_PLACEHOLDER)
    assistant_text: str  # the final assistant text, stripped
    tool_pairs: tuple[ToolPair, ...]
    user_timestamp_ms: int | None
    assistant_timestamp_ms: int | None


@dataclass(frozen=True, slots=True)
class SkippedPair:
    reason: str  # short machine-ish reason, e.g. "stop-reason:error", "unknown-role:model"


@dataclass(frozen=True, slots=True)
class Extraction:
    turns: tuple[CapturedTurn, ...]
    skipped: tuple[SkippedPair, ...]
    # why tool calls/results of captured turns were left out, e.g. "tool-call-without-result"
    dropped_tools: tuple[str, ...] = field(default=())


def text_of_user_content(content: object) -> str | None:
    """The text of a user message's `content`, unstripped; None for a shape we do not accept.

    A string is taken as is; an array may hold only `{type:"text", text:str}` blocks and
    `{type:"image", ...}` blocks (each image becomes IMAGE_PLACEHOLDER); parts join with "\\n".
    """
    if isinstance(content, str):
        return content
    if not isinstance(content, list | tuple):
        return None
    parts: list[str] = []
    for block in content:
        if not isinstance(block, dict):
            return None
        block_type = block.get("type")
        if block_type == "text":
            text = block.get("text")
            if not isinstance(text, str):
                return None
            parts.append(text)
        elif block_type == "image":
            parts.append(IMAGE_PLACEHOLDER)
        else:
            return None
    return "\n".join(parts)


def extract_turns(runs: Sequence[object], *, aborted: bool | None = None) -> Extraction:
    """Pair each user prompt of the settled runs with its final assistant text (module docstring)."""
    if not isinstance(runs, list | tuple):
        return Extraction(turns=(), skipped=(SkippedPair("runs-not-array"),))
    stream, failed_runs = _flatten(runs)
    drafts, skipped = _segment(stream)
    turns: list[CapturedTurn] = []
    dropped_tools: list[str] = []
    for index, draft in enumerate(drafts):
        if draft.problem is not None:
            skipped.append(SkippedPair(draft.problem))
            continue
        if aborted is True and index == len(drafts) - 1:
            skipped.append(SkippedPair("aborted"))
            continue
        outcome = _evaluate(draft, failed_runs)
        if isinstance(outcome, SkippedPair):
            skipped.append(outcome)
        else:
            turn, dropped = outcome
            turns.append(turn)
            dropped_tools.extend(dropped)
    return Extraction(turns=tuple(turns), skipped=tuple(skipped), dropped_tools=tuple(dropped_tools))


# ---- walking the runs ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Located:
    run_index: int
    message: object


_BROKEN_RUN = object()  # stands in the stream for a run that is not an array


@dataclass(slots=True)
class _Draft:
    user: dict[object, object]
    body: list[_Located] = field(default_factory=list)
    problem: str | None = None


def _flatten(runs: list[object] | tuple[object, ...]) -> tuple[list[_Located | object], set[int]]:
    stream: list[_Located | object] = []
    failed_runs: set[int] = set()
    for run_index, run in enumerate(runs):
        if not isinstance(run, list | tuple):
            stream.append(_BROKEN_RUN)
            continue
        last_assistant: dict[object, object] | None = None
        for message in run:
            stream.append(_Located(run_index, message))
            if isinstance(message, dict) and message.get("role") == "assistant":
                last_assistant = message
        if last_assistant is not None and _is_failed_stop(last_assistant.get("stopReason")):
            failed_runs.add(run_index)
    return stream, failed_runs


def _is_failed_stop(stop_reason: object) -> bool:
    return isinstance(stop_reason, str) and stop_reason in _FAILED_STOP_REASONS


def _segment(stream: list[_Located | object]) -> tuple[list[_Draft], list[SkippedPair]]:
    """Cut the stream into pairs at user messages; report what cannot belong to any pair."""
    drafts: list[_Draft] = []
    skipped: list[SkippedPair] = []
    current: _Draft | None = None
    orphan_reported = False
    for item in stream:
        if not isinstance(item, _Located):
            # A run we cannot read may hold a user message: neither the open pair nor what follows
            # can be attributed safely.
            if current is not None:
                current.problem = current.problem or "run-not-array"
            else:
                skipped.append(SkippedPair("run-not-array"))
            current = None
            orphan_reported = True
            continue
        message = item.message
        if isinstance(message, dict) and message.get("role") == "user":
            current = _Draft(user=message)
            drafts.append(current)
            orphan_reported = False
        elif current is not None:
            current.body.append(item)
        elif not _is_ignored(message) and not orphan_reported:
            skipped.append(SkippedPair("no-user-message"))
            orphan_reported = True
    return drafts, skipped


def _is_ignored(message: object) -> bool:
    if not isinstance(message, dict):
        return False
    role = message.get("role")
    return isinstance(role, str) and role in _IGNORED_ROLES


# ---- one pair -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Call:
    tool_call_id: str
    tool_name: str
    arguments: object


@dataclass(frozen=True, slots=True)
class _Result:
    tool_call_id: str
    tool_name: str
    text: str
    is_error: bool


def _evaluate(draft: _Draft, failed_runs: set[int]) -> SkippedPair | tuple[CapturedTurn, list[str]]:
    user_text = text_of_user_content(draft.user.get("content"))
    if user_text is None:
        return SkippedPair("user-content-invalid")
    user_text = user_text.strip()
    if not user_text:
        return SkippedPair("user-text-empty")

    last_assistant: dict[object, object] | None = None
    last_assistant_text = ""
    calls: list[_Call] = []
    failed_call_ids: set[str] = set()
    results: list[_Result] = []
    dropped: list[str] = []
    for located in draft.body:
        message = located.message
        if not isinstance(message, dict):
            return SkippedPair("message-not-object")
        role = message.get("role")
        if not isinstance(role, str):
            return SkippedPair("role-missing")
        if role in _IGNORED_ROLES:
            continue
        if role == "assistant":
            parsed = _parse_assistant(message)
            if isinstance(parsed, SkippedPair):
                return parsed
            text, message_calls, invalid_calls = parsed
            last_assistant, last_assistant_text = message, text
            if located.run_index in failed_runs:
                failed_call_ids.update(call.tool_call_id for call in message_calls)
                dropped.extend("tool-call-failed-run" for _ in message_calls)
            else:
                calls.extend(message_calls)
            dropped.extend("tool-call-invalid" for _ in range(invalid_calls))
        elif role == "toolResult":
            result = _parse_tool_result(message)
            if result is None:
                dropped.append("tool-result-invalid")
            else:
                results.append(result)
        else:
            return SkippedPair(f"unknown-role:{_reason_detail(role)}")

    if last_assistant is None:
        return SkippedPair("no-assistant-message")
    stop_reason = last_assistant.get("stopReason")
    if not isinstance(stop_reason, str):
        return SkippedPair("stop-reason-missing")
    if stop_reason != "stop":
        return SkippedPair(f"stop-reason:{_reason_detail(stop_reason)}")
    assistant_text = last_assistant_text.strip()
    if not assistant_text:
        return SkippedPair("assistant-text-empty")

    tool_pairs = _pair_tools(calls, results, failed_call_ids, dropped)
    turn = CapturedTurn(
        user_text=scrub(user_text),
        assistant_text=scrub(assistant_text),
        tool_pairs=tool_pairs,
        user_timestamp_ms=_timestamp(draft.user),
        assistant_timestamp_ms=_timestamp(last_assistant),
    )
    return turn, dropped


def _parse_assistant(message: dict[object, object]) -> SkippedPair | tuple[str, list[_Call], int]:
    """(joined text, valid tool calls, count of malformed tool calls), or why the pair is skipped."""
    content = message.get("content")
    if not isinstance(content, list | tuple):
        return SkippedPair("assistant-content-not-array")
    texts: list[str] = []
    calls: list[_Call] = []
    invalid_calls = 0
    for block in content:
        if not isinstance(block, dict):
            return SkippedPair("assistant-block-not-object")
        block_type = block.get("type")
        if not isinstance(block_type, str):
            return SkippedPair("assistant-block-type-missing")
        if block_type == "text":
            text = block.get("text")
            if not isinstance(text, str):
                return SkippedPair("assistant-text-block-invalid")
            texts.append(text)
        elif block_type not in _IGNORED_ASSISTANT_BLOCKS:
            return SkippedPair(f"assistant-block-unknown:{_reason_detail(block_type)}")
        elif block_type == "toolCall":
            call = _parse_tool_call(block)
            if call is None:
                invalid_calls += 1
            else:
                calls.append(call)
    return "\n".join(texts), calls, invalid_calls


def _parse_tool_call(block: dict[object, object]) -> _Call | None:
    call_id, name, arguments = block.get("id"), block.get("name"), block.get("arguments")
    if not (isinstance(call_id, str) and call_id and isinstance(name, str) and name):
        return None
    if not isinstance(arguments, dict):
        return None
    return _Call(call_id, name, arguments)


def _parse_tool_result(message: dict[object, object]) -> _Result | None:
    call_id, name, is_error = message.get("toolCallId"), message.get("toolName"), message.get("isError")
    if not (isinstance(call_id, str) and call_id and isinstance(name, str) and isinstance(is_error, bool)):
        return None
    content = message.get("content")
    if not isinstance(content, list | tuple):
        return None
    texts: list[str] = []
    for block in content:
        if not isinstance(block, dict):
            return None
        block_type = block.get("type")
        if block_type == "text":
            text = block.get("text")
            if not isinstance(text, str):
                return None
            texts.append(text)
        elif block_type != "image":  # images in tool output carry no text worth storing
            return None
    return _Result(call_id, name, "\n".join(texts), is_error)


def _pair_tools(
    calls: list[_Call], results: list[_Result], failed_call_ids: set[str], dropped: list[str]
) -> tuple[ToolPair, ...]:
    call_counts = Counter(call.tool_call_id for call in calls)
    result_counts = Counter(result.tool_call_id for result in results)
    results_by_id = {result.tool_call_id: result for result in results}
    for result in results:
        if result.tool_call_id in call_counts or result.tool_call_id in failed_call_ids:
            continue
        dropped.append("tool-result-without-call")
    pairs: list[ToolPair] = []
    for call in calls:
        if call_counts[call.tool_call_id] > 1 or result_counts[call.tool_call_id] > 1:
            dropped.append("tool-id-duplicated")
            continue
        matched = results_by_id.get(call.tool_call_id)
        if matched is None:
            dropped.append("tool-call-without-result")
            continue
        if matched.tool_name != call.tool_name:
            dropped.append("tool-name-mismatch")
            continue
        pairs.append(
            ToolPair(
                tool_call_id=scrub(call.tool_call_id),
                tool_name=scrub(call.tool_name),
                arguments=scrub_json(call.arguments),
                result_text=scrub(matched.text),
                is_error=matched.is_error,
            )
        )
    return tuple(pairs)


def _timestamp(message: dict[object, object]) -> int | None:
    value = message.get("timestamp")
    # bool is an int subclass; a JSON true is not a timestamp
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _reason_detail(value: str) -> str:
    return _REASON_UNSAFE.sub("_", value[:_REASON_DETAIL_MAX]) or "_"
