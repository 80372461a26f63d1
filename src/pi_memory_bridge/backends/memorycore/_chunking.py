"""Turns into L0 messages and add requests that stay inside MemoryCore's limits.

Server rules (`reference/memorycore-sdk.md` §3.2): at most 100 messages per add; each message's
content is 1-8192 characters *as JavaScript counts them* (UTF-16 code units, so an emoji is 2);
roles `user`/`assistant`; ISO timestamps with a `Z` suffix; and a whole body over 1 MiB makes the
server reset the connection instead of answering 413. So long messages are split into marked
parts (never dropped), and requests are cut by count and by an upper bound of their encoded size.

Every message gets a deterministic timestamp: the turn's `created_at` plus a per-message offset
in milliseconds (user parts first, then assistant parts), sent as both `timestamp` and
`recorded_at`. A redelivered turn therefore produces byte-identical messages at identical
instants, which is what lets the backend recognise rows it already stored (see `backend.py`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import groupby
from typing import Any, Literal

from pi_memory_bridge.backends.base import ConversationTurn

MAX_MESSAGES_PER_ADD = 100
MAX_CONTENT_UNITS = 8192
MAX_BODY_BYTES = 1_048_576
# Headroom under the limit: the SDK may add fields (and a proxy headers) we do not count.
BODY_BUDGET_BYTES = 1_000_000

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MAX_MS = 253_402_300_799_999 - 60_000  # 9999-12-31T23:58:59.999Z: room for per-message offsets
_PART_MARKER = "[part {index}/{count}] "
_PART_PREFIX = re.compile(r"\[part (\d{1,6})/(\d{1,6})\] ")

Role = Literal["user", "assistant"]


@dataclass(frozen=True, slots=True)
class L0Message:
    """One L0 row as we send it; `key` is what identifies it among the rows read back."""

    turn_id: str
    role: Role
    content: str
    timestamp_ms: int

    @property
    def key(self) -> tuple[int, str, str]:
        return (self.timestamp_ms, self.role, self.content)

    def wire(self) -> dict[str, str]:
        instant = iso_ms(self.timestamp_ms)
        # recorded_at too: MemoryCore's query/search report recorded_at as the message time, and
        # its L1 cursor walks recorded_at in conversation order.
        return {"role": self.role, "content": self.content, "timestamp": instant, "recorded_at": instant}


def utf16_units(text: str) -> int:
    """Length as JavaScript (and so MemoryCore's validator) counts it."""
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


def sanitize(text: str) -> str:
    """Replace unpaired surrogates, which cannot be encoded as UTF-8 (the request would fail)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "".join("\ufffd" if 0xD800 <= ord(ch) <= 0xDFFF else ch for ch in text)
    return text


def _cut(text: str, budget: int) -> list[str]:
    """Pieces of at most `budget` UTF-16 units, preferring to end at a newline, then a space."""
    pieces: list[str] = []
    start, n = 0, len(text)
    while start < n:
        units, end = 0, start
        while end < n:
            width = 2 if ord(text[end]) > 0xFFFF else 1
            if units + width > budget:
                break
            units += width
            end += 1
        if end < n:
            floor = start + (end - start) * 3 // 4
            brk = text.rfind("\n", floor, end)
            if brk < 0:
                brk = max(text.rfind(" ", floor, end), text.rfind("\t", floor, end))
            if brk >= floor and brk > start:
                end = brk + 1
        pieces.append(text[start:end])
        start = end
    return pieces


def split_content(text: str, limit: int = MAX_CONTENT_UNITS) -> list[str]:
    """`text` as one message, or as `[part i/n] `-marked parts that each fit `limit`."""
    if utf16_units(text) <= limit:
        return [text]
    count = 2
    while True:
        marker_units = len(_PART_MARKER.format(index=count, count=count))
        pieces = _cut(text, limit - marker_units)
        if len(pieces) <= count:
            return [_PART_MARKER.format(index=i, count=len(pieces)) + p for i, p in enumerate(pieces, 1)]
        count = len(pieces)


def timestamp_ms(moment: datetime) -> int:
    """Milliseconds since the epoch, clamped to what an ISO `Z` timestamp can express."""
    aware = moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    ms = (aware - _EPOCH) // timedelta(milliseconds=1)
    return min(max(ms, 0), _MAX_MS)


def iso_ms(ms: int) -> str:
    """`2026-11-01T12:00:00.123Z`: the form MemoryCore stores and returns (`Date.toISOString`)."""
    moment = _EPOCH + timedelta(milliseconds=ms)
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{ms % 1000:03d}Z"


def parse_iso_ms(text: str | None) -> int | None:
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    return timestamp_ms(moment)


def turn_messages(turn: ConversationTurn) -> list[L0Message]:
    """The L0 messages for one turn, with deterministic timestamps.

    User parts take offsets 0..u-1 from the turn's `created_at`; assistant parts start at
    max(u, 1). An empty (or whitespace-only) side is not sent: L0 refuses empty content.
    """
    base = timestamp_ms(turn.created_at)
    messages: list[L0Message] = []
    user_parts = _parts(turn.user_text)
    for i, part in enumerate(user_parts):
        messages.append(L0Message(turn.turn_id, "user", part, base + i))
    first_assistant = max(len(user_parts), 1)
    for j, part in enumerate(_parts(turn.assistant_text)):
        messages.append(L0Message(turn.turn_id, "assistant", part, base + first_assistant + j))
    return messages


def _parts(text: str) -> list[str]:
    clean = sanitize(text)
    return split_content(clean) if clean.strip() else []


def turn_created_ms(role: str, message_ms: int, content: str) -> int:
    """Best guess at a stored message's turn `created_at` (exact unless the user side was split)."""
    marker = _PART_PREFIX.match(content)
    part = int(marker.group(1)) - 1 if marker else 0
    return message_ms - part - (1 if role == "assistant" else 0)


def _encoded_size(value: Any) -> int:
    # An upper bound of what any JSON encoder sends: ASCII-escaped (6 bytes per BMP character,
    # 12 per astral one, never less than UTF-8) with spaced separators.
    return len(json.dumps(value))


def plan_adds(messages: Sequence[L0Message], base_body: Mapping[str, Any]) -> list[list[L0Message]]:
    """Consecutive batches, each one add request within the count and body-size limits.

    A turn's messages stay in one request when they fit in one; `base_body` holds the fields
    the SDK adds to the body (ids, session), so their size is counted too.
    """
    overhead = _encoded_size({**base_body, "messages": []})
    batches: list[list[L0Message]] = []
    current: list[L0Message] = []
    size = overhead

    def flush() -> None:
        nonlocal current, size
        if current:
            batches.append(current)
        current, size = [], overhead

    for turn in _by_turn(messages):
        costs = [_encoded_size(m.wire()) + 2 for m in turn]
        if current and (
            len(current) + len(turn) > MAX_MESSAGES_PER_ADD or size + sum(costs) > BODY_BUDGET_BYTES
        ):
            flush()
        for message, cost in zip(turn, costs, strict=True):
            if current and (len(current) >= MAX_MESSAGES_PER_ADD or size + cost > BODY_BUDGET_BYTES):
                flush()
            current.append(message)
            size += cost
    flush()
    return batches


def _by_turn(messages: Sequence[L0Message]) -> Iterator[list[L0Message]]:
    for _, group in groupby(messages, key=lambda m: m.turn_id):
        yield list(group)
