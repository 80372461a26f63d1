"""Recall keeps the provider's prompt cache: on real Pi, an 8-turn session that recalls an earlier
session's facts costs at most 1.25x what Pi alone costs at cache prices, every recalled fact
reaches the model inside the untrusted block, and a fact already given is not given again."""

from __future__ import annotations

import itertools

from bridge import use_bridge
from harness import FakeModel, PiEnv
from pi_memory_bridge.recall.boundary import CLOSE_TAG, OPEN_TAG
from prompt_cache import (
    AGAIN_TURN,
    BRIDGE_CONFIG,
    FACTS,
    FIRST_TURN,
    QUESTIONS,
    RECALLED_TURNS,
    request_costs,
    run_session,
    seed_earlier_session,
    session_cost,
)


def test_recall_in_a_long_session_keeps_the_prompt_cache(pi_env: PiEnv, fake_model: FakeModel) -> None:
    use_bridge(pi_env, config=BRIDGE_CONFIG)
    alone = run_session(pi_env, fake_model, memory=False)
    seed_earlier_session(pi_env, fake_model)
    with_memory = run_session(pi_env, fake_model, memory=True)

    for turn in RECALLED_TURNS:
        # the fact reaches the model inside an untrusted block of this request: this turn's, or
        # an earlier one of the branch that gave it already (then it is not sent again)
        fact = FACTS[QUESTIONS[turn][1] or 0]
        blocks = with_memory[turn].recalled_blocks
        assert sum(fact in b for b in blocks) == 1, f"turn {turn + 1}: {fact!r} in {len(blocks)} blocks"
        assert all(b.startswith(OPEN_TAG) and b.rstrip().endswith(CLOSE_TAG) for b in blocks)
    assert len(RECALLED_TURNS) == 6
    # turn 5 asks what turn 2 recalled: it is still in the context, and not sent again
    again = FACTS[QUESTIONS[AGAIN_TURN][1] or 0]
    assert again in with_memory[FIRST_TURN].recalled_block
    assert again not in with_memory[AGAIN_TURN].recalled_block
    assert sum(again in b for b in with_memory[AGAIN_TURN].recalled_blocks) == 1

    # every request repeats the one before it, recalled blocks included; skills are off, so
    # their tools are not declared, from the first request on
    assert all(r.tool_names == with_memory[0].tool_names for r in with_memory)
    assert "tdai_memory_search" in with_memory[0].tool_names
    assert "tdai_skill_search" not in with_memory[0].tool_names
    for previous, request in itertools.pairwise(with_memory):
        assert request.messages[: len(previous.messages)] == previous.messages
    costs = request_costs(with_memory)
    assert all(c.share > 0.5 for c in costs[1:]), [round(c.share, 2) for c in costs]
    ratio = session_cost(with_memory) / session_cost(alone)
    assert ratio <= 1.25, f"input cost at cache prices is {ratio:.2f}x Pi's alone"
