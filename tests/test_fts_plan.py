"""The keyword query plan's postings budget, and the smaller one of a hybrid search's candidates."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from pi_memory_bridge.backends.base import ConversationTurn
from pi_memory_bridge.backends.local import LocalBackend, fts
from pi_memory_bridge.backends.local.schema import TURNS_INDEX
from pi_memory_bridge.embeddings import ModelHandle

NOW = datetime(2026, 6, 1, tzinfo=UTC)
COMMON = fts.CANDIDATE_POSTINGS_BUDGET + 100  # turns naming "gateway": over the small budget only


def _turns() -> list[ConversationTurn]:
    turns = [
        ConversationTurn(f"c{i}", "s", f"the gateway answered request {i}", "ok", NOW + timedelta(seconds=i))
        for i in range(COMMON)
    ]
    turns.insert(COMMON // 2, ConversationTurn("rare", "s", "the gateway dropped zanzibar frames", "ok", NOW))
    return turns


def test_a_smaller_budget_keeps_the_rarest_terms_then_narrows_to_the_newest_rows(tmp_path: Path) -> None:
    backend = LocalBackend(tmp_path)
    backend.store.conversation.add(_turns())
    with backend.store.reading("test") as conn:
        wide = fts.plan_query(conn, TURNS_INDEX, "gateway zanzibar")
        narrow = fts.plan_query(conn, TURNS_INDEX, "gateway zanzibar", fts.CANDIDATE_POSTINGS_BUDGET)
        common = fts.plan_query(conn, TURNS_INDEX, "gateway", fts.CANDIDATE_POSTINGS_BUDGET)
        max_id = conn.execute("SELECT max(id) FROM turns").fetchone()[0]
    assert wide is not None and wide.terms == ("zanzibar", "gateway") and wide.min_rowid is None
    assert narrow is not None and narrow.terms == ("zanzibar",) and narrow.min_rowid is None
    # one term alone over the budget: only the newest rows, as many as the budget expects to match
    assert common is not None and common.terms == ("gateway",)
    assert common.min_rowid is not None
    assert 0 < max_id - common.min_rowid <= fts.CANDIDATE_POSTINGS_BUDGET + 1


async def test_hybrid_candidates_use_the_smaller_budget_keyword_search_the_larger(
    tmp_path: Path, model_handle: ModelHandle
) -> None:
    backend = LocalBackend(tmp_path, embeddings=model_handle)
    await backend.conversation.add(_turns())  # no vectors yet: keyword candidates vouch for themselves
    plain = LocalBackend(tmp_path)
    keyword = await plain.conversation.search("gateway zanzibar", 4)
    await plain.close()
    assert keyword[0].turn_id == "rare" and len(keyword) == 4  # then turns naming the gateway only
    hybrid = await backend.conversation.search("gateway zanzibar", 4)
    assert [h.turn_id for h in hybrid] == ["rare"]  # the frequent term was not ranked
    await backend.close()
