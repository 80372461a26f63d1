"""A long prompt is searched for what it asks: its question and the identifiers it names, not
the paste in front of it (issue 23, problem 2; measured in bench/bench_long_prompts.py)."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pi_memory_bridge.backends.base import ConversationTurn
from pi_memory_bridge.backends.local import LocalBackend
from pi_memory_bridge.backends.local.prompt_terms import RARE_ANCHOR_ROWS, store_query
from pi_memory_bridge.backends.local.schema import TURNS_INDEX
from pi_memory_bridge.embeddings import ModelHandle
from pi_memory_bridge.prompt_focus import SHORT_PROMPT_CHARS, focus_prompt
from pi_memory_bridge.recall import Layer, RecallBudget, recall

NOW = datetime(2026, 6, 1, tzinfo=UTC)
FACT = "The staging cluster is called kestrel-west-kemub."
QUESTION = "Deploy the cache fix to kestrel-west-kemub: is that the staging cluster?"


def log_lines(chars: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    lines: list[str] = []
    while sum(len(x) + 1 for x in lines) < chars:
        n = len(lines)
        level = rng.choice(("INFO ", "DEBUG", "WARN ", "ERROR"))
        lines.append(
            f"2026-03-14T09:{n // 60 % 60:02d}:{n % 60:02d}.{rng.randrange(1000):03d}Z {level} "
            f"[http-worker-{rng.randrange(9)}] gateway: GET /api/v1/orders/{rng.randrange(10**5)} "
            f"200 {rng.randrange(2, 900)}ms"
        )
    return lines


def log_paste(chars: int) -> str:
    return "\n".join(log_lines(chars))


def test_a_short_prompt_is_its_own_question() -> None:
    focused = focus_prompt(f"  {QUESTION}\n")
    assert (focused.question, focused.anchors, focused.short) == (QUESTION, (), True)


def test_the_question_after_a_pasted_log_is_what_is_asked() -> None:
    prompt = f"{log_paste(2500)}\n\n{QUESTION}"
    focused = focus_prompt(prompt)
    assert len(prompt) > 2500 and not focused.short
    assert focused.question == QUESTION


def test_a_question_before_a_fenced_paste_and_a_cjk_question_after_one() -> None:
    asked = "Why does the gateway answer so slowly?"
    assert focus_prompt(f"{asked}\n```\n{log_paste(1500)}\n```").question == asked
    assert focus_prompt(f"{log_paste(1500)}\n\n测试环境的域名是什么？").question == "测试环境的域名是什么？"


def test_an_identifier_on_a_line_of_its_own_after_code_is_the_question() -> None:
    code = "\n".join(f"def handler_{i}(request):\n    return respond(request, status={i})" for i in range(40))
    assert focus_prompt(f"{code}\n\nKUBECONFIG_STAGING").question == "KUBECONFIG_STAGING"


def test_the_paste_gives_its_identifiers_not_its_timestamps_levels_or_measures() -> None:
    lines = log_lines(3000)
    lines.insert(len(lines) // 2, "2026-03-14T09:30:00.000Z ERROR [main] deploy to kestrel-west-kemub failed")
    focused = focus_prompt("\n".join(lines) + "\n\nwhy did that fail?")
    assert focused.question == "why did that fail?"
    assert "kestrel-west-kemub" in focused.anchors
    assert "http-worker-3" in focused.anchors
    for noise in ("ERROR", "INFO", "2026-03-14T09:30:00.000Z", "200", "12ms"):
        assert noise not in focused.anchors


def _store_turns(backend: LocalBackend, extra: list[str]) -> None:
    turns = [ConversationTurn("fact", "s1", FACT, "Noted: staging is kestrel-west-kemub.", NOW)]
    turns += [
        ConversationTurn(f"n{i}", "s2", text, "Done.", NOW - timedelta(hours=i + 1))
        for i, text in enumerate(extra)
    ]
    backend.store.conversation.add(turns)


def test_the_store_keeps_the_anchors_it_holds_in_a_few_rows(tmp_path: Path) -> None:
    backend = LocalBackend(tmp_path)
    common = [f"the http-worker-3 pool is busy again, ticket {i}" for i in range(RARE_ANCHOR_ROWS + 1)]
    _store_turns(backend, common)
    lines = log_lines(3000)
    lines.insert(10, "2026-03-14T09:30:00.000Z ERROR [main] deploy to kestrel-west-kemub failed")
    asked = store_query(backend.store, TURNS_INDEX, "\n".join(lines) + "\n\nwhy did that fail?")
    assert asked.meaning == "why did that fail?"
    # held by one row: kept; by more rows than RARE_ANCHOR_ROWS: names nothing; never seen: dropped
    assert asked.keywords == "why did that fail?\nkestrel-west-kemub"


async def test_keyword_search_and_recall_find_the_question_after_a_long_paste(tmp_path: Path) -> None:
    backend = LocalBackend(tmp_path)  # no model: keyword search alone
    _store_turns(backend, [f"rename the order table column {i}" for i in range(30)])
    for chars in (600, 1200, 2500, 8000):
        hits = await backend.conversation.search(f"{log_paste(chars)}\n\n{QUESTION}", 4)
        assert [h.turn_id for h in hits][:1] == ["fact"], chars
    budget = RecallBudget(limits={Layer.L0: 4})
    out = await recall(backend, f"{log_paste(2500)}\n\n{QUESTION}", budget)
    assert "kestrel-west-kemub" in (out.block or "")
    await backend.close()


async def test_hybrid_search_after_a_paste_returns_what_the_question_alone_returns(
    tmp_path: Path, model_handle: ModelHandle
) -> None:
    backend = LocalBackend(tmp_path, embeddings=model_handle)
    facts = [
        "My cat is called Tuanzi and she sleeps on the router.",
        "We deploy on Thursdays, never on Fridays.",
        "The billing service is written in Go.",
    ]
    _store_turns(backend, facts)
    encoder = model_handle.wait(600)
    assert encoder is not None and backend.semantic is not None
    backend.semantic.worker.drain(encoder)
    for question in ("What is the name of my pet?", "Which day of the week do we ship releases?", QUESTION):
        alone = [h.turn_id for h in await backend.conversation.search(question, 2)]
        pasted = [h.turn_id for h in await backend.conversation.search(f"{log_paste(2500)}\n\n{question}", 2)]
        assert alone and pasted == alone, question
    assert len(QUESTION) < SHORT_PROMPT_CHARS
    await backend.close()
