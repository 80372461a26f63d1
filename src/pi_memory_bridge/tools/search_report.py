"""`pi-memory-bridge search --json`: the ranked results as recall ranks them, for scripts.

One JSON object (shape documented in README): the query, the state of search by meaning,
and the results of L1 then L0, each layer in rank order with its score (hybrid score with
the embedding model, BM25 without). Texts are redacted as recall redacts them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pi_memory_bridge.backends.base import AtomicMemory, ConversationHit, MemoryBackend, SearchesByMeaning
from pi_memory_bridge.redact import redact_text


def _clean(text: str) -> str:
    cleaned: str = redact_text(text.strip()).text
    return cleaned


def semantic_state(backend: MemoryBackend) -> dict[str, Any] | None:
    """The state of search by meaning (None for a backend without it), camelCase for JSON."""
    status = backend.semantic_status() if isinstance(backend, SearchesByMeaning) else None
    if status is None:
        return None
    vectors = None
    if status.turns is not None and status.atomic is not None:
        vectors = {
            "done": status.turns.done + status.atomic.done,
            "total": status.turns.total + status.atomic.total,
        }
    return {"model": status.model, "state": status.state.value, "reason": status.reason, "vectors": vectors}


def search_report(
    backend: MemoryBackend,
    query: str,
    atomic: Sequence[AtomicMemory],
    turns: Sequence[ConversationHit],
) -> dict[str, Any]:
    results: list[dict[str, Any]] = []
    for rank, m in enumerate(atomic, 1):
        results.append(
            {
                "layer": "L1",
                "rank": rank,
                "id": m.id,
                "text": _clean(m.content),
                "score": m.score,
                "type": m.type,
                "createdAt": m.created_at.isoformat(),
            }
        )
    for rank, h in enumerate(turns, 1):
        sides = (("user", _clean(h.user_text)), ("assistant", _clean(h.assistant_text)))
        results.append(
            {
                "layer": "L0",
                "rank": rank,
                "id": h.turn_id,
                "text": "\n".join(f"{role}: {said}" for role, said in sides if said),
                "score": h.score,
                "sessionId": h.memory_session_id,
                "createdAt": h.created_at.isoformat(),
            }
        )
    return {"query": query, "backend": backend.name, "semantic": semantic_state(backend), "results": results}
