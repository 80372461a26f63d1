"""From Pi's settled runs to stored turns: fail-closed extraction, redaction, deterministic ids.

Redaction happens here, before a turn reaches any sink, so nothing unredacted touches disk.
`CaptureSink` is the seam where the durable outbox slots in; `DirectSink` writes to the backend.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from pi_memory_bridge.backends.base import ConversationTurn, MemoryBackend, ToolEvidence
from pi_memory_bridge.capture.identity import BranchIdentity, entry_turn_id, turn_id, user_entry_ids
from pi_memory_bridge.capture.pi_shapes import CapturedTurn, ToolPair, extract_turns
from pi_memory_bridge.redact import redact_text, redact_value

log = logging.getLogger(__name__)

# The server-side L0 limit is 8192 characters per message; keep the local store consistent with it.
MAX_TURN_TEXT_CHARS = 8192
MAX_TOOL_ARGS_CHARS = 2000
MAX_TOOL_RESULT_CHARS = 4000
MAX_TOOLS_PER_TURN = 64


@dataclass(frozen=True, slots=True)
class PreparedCapture:
    turns: tuple[ConversationTurn, ...]
    skipped_reasons: tuple[str, ...]
    redactions: int
    # per turn, the content-derived id it would have had without its entry id (the id turns were
    # stored under before entry ids), so an import can recognise a turn stored back then
    legacy_ids: tuple[str, ...] = ()


class EntryProjection(Protocol):
    """A session entry as the shim projects it (`protocol.EntryRef`)."""

    @property
    def id(self) -> str: ...
    @property
    def type(self) -> str: ...
    @property
    def role(self) -> str | None: ...
    @property
    def ts(self) -> int | None: ...


def live_user_entries(entries: Sequence[EntryProjection]) -> dict[int, str]:
    """`user_entries` for `prepare_capture` from the entries the shim sent with a settle."""
    return user_entry_ids((e.id, e.ts) for e in entries if e.type == "message" and e.role == "user")


class CaptureSink(Protocol):
    async def submit(self, turns: Sequence[ConversationTurn]) -> None:
        """Durably accept the turns; return only once they cannot be lost."""


class DirectSink:
    def __init__(self, backend: MemoryBackend) -> None:
        self._backend = backend

    async def submit(self, turns: Sequence[ConversationTurn]) -> None:
        await self._backend.conversation.add(turns)


def _clip(text: str, limit: int = MAX_TURN_TEXT_CHARS) -> str:
    if len(text) <= limit:
        return text
    # keep head and tail: the decisive line of an error is often at the end
    half = (limit - 20) // 2
    return f"{text[:half]}\n[… truncated …]\n{text[-half:]}"


def _evidence(pair: ToolPair) -> tuple[ToolEvidence, int]:
    args, arg_hits = redact_value(pair.arguments)
    try:
        args_text = json.dumps(args, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        args_text = str(args)
    result = redact_text(pair.result_text)
    evidence = ToolEvidence(
        tool_call_id=pair.tool_call_id,
        tool_name=pair.tool_name,
        arguments=_clip(args_text, MAX_TOOL_ARGS_CHARS),
        result=_clip(result.text, MAX_TOOL_RESULT_CHARS),
        is_error=pair.is_error,
    )
    return evidence, arg_hits + result.count


def _timestamp(ms: int | None, fallback: datetime) -> datetime:
    if ms is None or ms <= 0:
        return fallback
    try:
        return datetime.fromtimestamp(ms / 1000, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return fallback


def prepare_capture(
    runs: Sequence[Any],
    *,
    aborted: bool | None,
    identity: BranchIdentity,
    user_entries: Mapping[int, str] | None = None,
    now: datetime | None = None,
) -> PreparedCapture:
    """The storable turns of the settled runs, redacted. `user_entries` maps a user message's
    timestamp to its session entry id (`identity.user_entry_ids`): a turn found there is keyed by
    that entry. One turn that cannot be prepared (whatever the reason) is skipped with a reason;
    it never takes the other turns, or the caller, down."""
    extraction = extract_turns(runs, aborted=aborted)
    now = now or datetime.now(tz=UTC)
    turns: list[ConversationTurn] = []
    legacy_ids: list[str] = []
    skipped = [s.reason for s in extraction.skipped]
    redactions = 0
    for ordinal, captured in enumerate(extraction.turns):
        try:
            turn, hits, legacy_id = _prepare_turn(captured, ordinal, identity, now, user_entries)
        except Exception as exc:  # one bad field skips its turn, counted, instead of the capture
            log.warning("capture: a turn could not be prepared and is skipped: %s", type(exc).__name__)
            skipped.append(f"prepare-failed:{type(exc).__name__}")
            continue
        turns.append(turn)
        legacy_ids.append(legacy_id)
        redactions += hits
    return PreparedCapture(tuple(turns), tuple(skipped), redactions, tuple(legacy_ids))


def _prepare_turn(
    captured: CapturedTurn,
    ordinal: int,
    identity: BranchIdentity,
    now: datetime,
    user_entries: Mapping[int, str] | None,
) -> tuple[ConversationTurn, int, str]:
    user = redact_text(captured.user_text)
    assistant = redact_text(captured.assistant_text)
    redactions = user.count + assistant.count
    tools: list[ToolEvidence] = []
    for pair in captured.tool_pairs[:MAX_TOOLS_PER_TURN]:
        evidence, hits = _evidence(pair)
        tools.append(evidence)
        redactions += hits
    session_id = identity.memory_session_id
    legacy_id = turn_id(session_id, captured.user_timestamp_ms, user.text, ordinal)
    ts = captured.user_timestamp_ms
    entry_id = None if ts is None or user_entries is None else user_entries.get(ts)
    turn = ConversationTurn(
        turn_id=legacy_id if entry_id is None else entry_turn_id(identity.pi_session_id, entry_id),
        memory_session_id=session_id,
        user_text=_clip(user.text),
        assistant_text=_clip(assistant.text),
        created_at=_timestamp(captured.user_timestamp_ms, now),
        pi_session_id=identity.pi_session_id,
        tools=tuple(tools),
    )
    _check_storable(turn)
    return turn, redactions, legacy_id


def _check_storable(turn: ConversationTurn) -> None:
    """Raise UnicodeEncodeError now for text no sink could write (SQLite, JSON need UTF-8)."""
    texts = [turn.turn_id, turn.memory_session_id, turn.pi_session_id, turn.user_text, turn.assistant_text]
    for tool in turn.tools:
        texts += [tool.tool_call_id, tool.tool_name, tool.arguments, tool.result]
    for text in texts:
        text.encode("utf-8")
