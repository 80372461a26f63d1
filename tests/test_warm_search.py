"""A warm hybrid search starts its keyword search beside the query's embedding, not after it."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pi_memory_bridge.backends.base import ConversationHit, ConversationTurn
from pi_memory_bridge.backends.local import LocalBackend
from pi_memory_bridge.backends.local.keyword_hits import KeywordHit
from pi_memory_bridge.embeddings import ModelHandle
from waiting import wait_until

NOW = datetime(2026, 6, 1, tzinfo=UTC)


async def test_the_keyword_search_runs_while_the_query_is_being_embedded(
    tmp_path: Path, model_handle: ModelHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = LocalBackend(tmp_path, embeddings=model_handle)
    await backend.conversation.add(
        [ConversationTurn("t1", "s", "the zanzibar gateway drops frames", "ok", NOW)]
    )
    semantic = backend.semantic
    assert semantic is not None
    searched = threading.Event()
    real = backend.store.conversation.keyword_hits

    def recording(
        query: str, limit: int, postings_budget: int, *, weigh: bool
    ) -> list[KeywordHit[ConversationHit]]:
        searched.set()
        return real(query, limit, postings_budget, weigh=weigh)

    monkeypatch.setattr(backend.store.conversation, "keyword_hits", recording)
    found: list[list[ConversationHit] | None] = []
    with semantic._query_lock:  # the embedding of the query cannot start
        search = threading.Thread(target=lambda: found.append(semantic.search_conversation("zanzibar?", 4)))
        search.start()
        wait_until(searched.is_set, 60, "the keyword search while the embedding waits")
        assert not found
    search.join(60)
    assert found and found[0] is not None and [h.turn_id for h in found[0]] == ["t1"]
    await backend.close()
