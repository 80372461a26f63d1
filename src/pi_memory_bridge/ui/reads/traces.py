"""The recall traces pages: the last prompts, and what each recall gave or left out."""

from __future__ import annotations

import asyncio

from pi_memory_bridge.recall.trace_log import StoredTrace, TraceLogError
from pi_memory_bridge.ui.service import Inspector, plain


async def recent_traces(insp: Inspector, limit: int = 50) -> list[StoredTrace]:
    if insp.traces is None:
        return []
    try:
        return await asyncio.to_thread(insp.traces.recent, limit)
    except TraceLogError as exc:
        insp.traces_error = plain(exc)
        return []


async def trace(insp: Inspector, trace_id: int) -> StoredTrace | None:
    if insp.traces is None:
        return None
    try:
        return await asyncio.to_thread(insp.traces.get, trace_id)
    except TraceLogError as exc:
        insp.traces_error = plain(exc)
        return None
