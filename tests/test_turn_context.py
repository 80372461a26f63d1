"""L0 ranks a turn with its context: a keyword hit lends part of its score to the turns beside it
in its session, and a turn said when the query says ranks higher (issue 23, acceptance 4:
bench/bench_locomo.py measures both)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from pi_memory_bridge.backends.base import ConversationTurn
from pi_memory_bridge.backends.local import LocalBackend
from pi_memory_bridge.backends.local.query_dates import (
    TOLD_AFTER,
    TOLD_BEFORE,
    date_windows,
    without_dates,
)
from pi_memory_bridge.backends.local.turn_context import Beside, spread
from pi_memory_bridge.embeddings import ModelHandle
from pi_memory_bridge.embeddings.fusion import L0_PARAMS, Candidate, FusionParams, fuse

NOW = datetime(2026, 12, 3, 15, 30, tzinfo=UTC)


def test_a_hit_lends_its_neighbours_a_share_of_its_score() -> None:
    beside = {1: Beside(None, 2), 2: Beside(1, 3), 3: Beside(2, None)}
    assert spread({1: 10.0, 3: 4.0}, beside, 0.3) == {1: 10.0, 2: 3.0 + 1.2, 3: 4.0}
    assert spread({1: 10.0}, beside, 0.0) == {1: 10.0}
    assert spread({7: 1.0}, beside, 0.3) == {7: 1.0}  # a turn without known neighbours keeps its own


def _spans(query: str) -> list[tuple[str, str]]:
    return [(w.start.date().isoformat(), w.end.date().isoformat()) for w in date_windows(query, NOW)]


def test_named_dates_become_windows_that_reach_past_their_end() -> None:
    may = datetime(2023, 5, 1, tzinfo=UTC)
    (window,) = date_windows("What did John host for the veterans in May 2023?", NOW)
    assert window.start == may - TOLD_BEFORE and window.end == datetime(2023, 6, 1, tzinfo=UTC) + TOLD_AFTER
    day = [("2023-09-05", "2023-09-30")]
    assert _spans("Why did Jolene reschedule on September 8, 2023?") == day
    assert _spans("on 8 September, 2023") == day == _spans("8th of Sept 2023") == _spans("2023-09-08")
    assert _spans("2023年9月8日我们做了什么") == day
    assert _spans("as of December 2023") == [("2023-11-28", "2024-01-22")]
    assert _spans("everything in 2022") == [("2021-12-29", "2023-01-22")]


def test_relative_dates_are_the_days_of_the_talk_itself() -> None:
    assert _spans("what did we fix yesterday?") == [("2026-12-02", "2026-12-03")]
    assert _spans("上周的部署") == [("2026-11-19", "2026-12-03")]


def test_words_that_only_look_like_dates_name_none() -> None:
    for query in ("May I ask about port 2023?", "error 2023-99 on build", "31 February, 2023", "mayday"):
        assert date_windows(query, NOW) == [], query
    assert "2023" not in without_dates("What happened in May 2023 with ECONNRESET?")
    assert "ECONNRESET" in without_dates("What happened in May 2023 with ECONNRESET?")


def test_a_date_lifts_what_made_the_cut_and_never_makes_a_row_relevant() -> None:
    params = FusionParams(min_score=0.3, date_boost=0.4)
    ranked = fuse(
        [
            Candidate("may", "", 0.40, None, in_window=True),
            Candidate("june", "", 0.55, None),
            Candidate("may-noise", "", 0.10, None, in_window=True),
        ],
        "what did we host",
        params,
    )
    assert [r.key for r in ranked] == ["may", "june"]
    gate = replace(params, layer_floor=0.6)  # the layer is judged on merit: 0.4 and 0.55 are below
    assert fuse([Candidate("may", "", 0.40, None, in_window=True)], "what did we host", gate) == []


def test_a_lent_keyword_signal_orders_what_made_the_cut_and_never_makes_a_row_relevant() -> None:
    params = FusionParams(keyword_weight=0.5, min_score=0.3)
    ranked = fuse(
        [
            Candidate("hit", "snake", 0.2, 8.0, context=10.0),
            Candidate("other", "", 0.4, None, context=0.0),
            Candidate("beside", "", 0.35, None, context=5.0),
            Candidate("only-lent", "", 0.1, None, context=5.0),
        ],
        "snake",
        params,
    )
    scores = {r.key: r.score for r in ranked}
    assert [r.key for r in ranked] == ["hit", "beside", "other"]
    assert scores["hit"] == pytest.approx(0.2 + 0.5) and scores["beside"] == pytest.approx(0.35 + 0.5 * 0.5)


async def _backend(tmp_path: Path, handle: ModelHandle, turns: list[ConversationTurn]) -> LocalBackend:
    backend = LocalBackend(tmp_path, embeddings=handle)
    await backend.conversation.add(turns)
    encoder = handle.wait(60)
    assert encoder is not None and backend.semantic is not None
    backend.semantic.worker.drain(encoder)
    return backend


ANSWER = "I bought it a year ago in Paris, at a little shop near the river."


async def test_an_answer_is_found_through_the_question_before_it(
    tmp_path: Path, model_handle: ModelHandle
) -> None:
    at = datetime(2023, 3, 1, tzinfo=UTC)
    turns = [
        ConversationTurn("elsewhere", "s0", ANSWER, "What a find!", at),  # the same words, no snake near
        ConversationTurn("asked", "s1", "Tell me about your pet snake, Jolene!", "Her name is Susie.", at),
        ConversationTurn("answer", "s1", "Where did you get Susie?", ANSWER, at + timedelta(minutes=1)),
    ]
    backend = await _backend(tmp_path, model_handle, turns)
    assert backend.semantic is not None
    found = {
        h.turn_id: h.score for h in await backend.conversation.search("When did Jolene buy her pet snake?", 5)
    }
    assert found["answer"] > found.get("elsewhere", 0.0)
    backend.semantic.l0_params = replace(L0_PARAMS, neighbour_weight=0.0)
    alone = {
        h.turn_id: h.score for h in await backend.conversation.search("When did Jolene buy her pet snake?", 5)
    }
    assert alone.get("answer", 0.0) < found["answer"]  # what the snake question lent it
    await backend.close()


async def test_a_turn_said_in_the_named_month_ranks_first(tmp_path: Path, model_handle: ModelHandle) -> None:
    party = "We threw a small party for the veterans so they could share their stories."
    turns = [
        ConversationTurn("september", "s1", party, "That sounds lovely.", datetime(2023, 9, 2, tzinfo=UTC)),
        ConversationTurn("may", "s2", party, "That sounds lovely.", datetime(2023, 5, 20, tzinfo=UTC)),
        ConversationTurn(
            "may-noise", "s2", "The weather is nice today.", "Yes!", datetime(2023, 5, 21, tzinfo=UTC)
        ),
        ConversationTurn(
            "code",
            "s3",
            "The build failed with error 2023 again.",
            "Retry it.",
            datetime(2023, 9, 3, tzinfo=UTC),
        ),
    ]
    backend = await _backend(tmp_path, model_handle, turns)
    found = [
        h.turn_id
        for h in await backend.conversation.search("What did we host for the veterans in May 2023?", 5)
    ]
    assert found[:2] == ["may", "september"]
    assert "may-noise" not in found  # its date alone does not make it relevant
    assert "code" not in found[:1]  # the year is a date here, not an identifier to match
    await backend.close()
