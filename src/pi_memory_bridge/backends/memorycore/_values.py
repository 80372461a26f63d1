"""What the MemoryCore layer parts share: query clipping, server instants, and forgetting by id."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime, timedelta

from pi_memory_bridge.backends.base import BackendError, DeleteReport
from pi_memory_bridge.backends.memorycore._chunking import parse_iso_ms, utf16_units
from pi_memory_bridge.prompt_focus import focus_prompt

MAX_QUERY_UNITS = 2048  # search `query` limit (UTF-16 units)
MAX_SEARCH_LIMIT = 100
DELETE_CONCURRENCY = 8

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def instant(text: str | None) -> datetime:
    ms = parse_iso_ms(text)
    return EPOCH + timedelta(milliseconds=ms) if ms is not None else EPOCH


def clip_query(query: str) -> str:
    # a long prompt asks its question after a paste: the server gets the question and the
    # paste's identifiers, not a head of log cut at the limit
    query = focus_prompt(query).text.strip()
    if utf16_units(query) <= MAX_QUERY_UNITS:
        return query
    out: list[str] = []
    units = 0
    for ch in query:
        units += 2 if ord(ch) > 0xFFFF else 1
        if units > MAX_QUERY_UNITS:
            break
        out.append(ch)
    return "".join(out)


async def delete_each(ids: Sequence[str], delete: Callable[[str], Awaitable[int]]) -> DeleteReport:
    # One request per id: the server only reports a total, and forget must say exactly
    # which ids went and which did not.
    gate = asyncio.Semaphore(DELETE_CONCURRENCY)
    unique = [i for i in dict.fromkeys(ids) if i.strip()]

    async def one(item: str) -> tuple[str, str | None]:
        async with gate:
            try:
                removed = await delete(item)
            except BackendError as exc:
                return item, str(exc)
        return item, None if removed else "not found (already deleted, or not this identity's)"

    outcomes = await asyncio.gather(*(one(i) for i in unique))
    return DeleteReport(
        deleted=tuple(i for i, reason in outcomes if reason is None),
        failed=tuple((i, reason) for i, reason in outcomes if reason is not None),
    )
