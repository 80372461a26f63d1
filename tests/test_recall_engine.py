"""Recall rules: parallel layers under one deadline, partial results, budgets, dedupe, live context."""

from __future__ import annotations

import asyncio

from fake_backend import FakeBackend, mem, turn
from pi_memory_bridge.backends.base import BackendUnavailable, Capability, Profile, ScenarioNote, SkillHit
from pi_memory_bridge.prompt_focus import MAX_PROMPT_CHARS
from pi_memory_bridge.recall import Layer, RecallBudget, recall
from pi_memory_bridge.recall.budget import allocate
from pi_memory_bridge.recall.items import LAYER_ORDER

PROMPT = "which Go style conventions do I prefer for the backend?"


def budget(**kw: object) -> RecallBudget:
    return RecallBudget(**kw)  # type: ignore[arg-type]


def states(outcome) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return {str(r.layer): r.state for r in outcome.layers}


async def test_all_layers_render_in_order_inside_the_boundary() -> None:
    b = FakeBackend()
    b.profile = Profile("Backend engineer, writes Go.")
    b.atomic = [mem("Hates magic numbers in Go code", i=1)]
    b.scenarios = {
        "go/style.md": ScenarioNote("go/style.md", "Go backend style conventions", "Use named constants.")
    }
    b.turns = [turn("how do I name constants in Go?", "Use MixedCaps.")]
    b.skill_hits = [SkillHit("sk1", "go-lint", "Run golangci-lint")]
    out = await recall(b, PROMPT, budget())
    assert out.outcome == "recalled"
    block = out.block or ""
    positions = [
        block.index(t)
        for t in ("Backend engineer", "magic numbers", "named constants", "MixedCaps", "go-lint")
    ]
    assert positions == sorted(positions)
    assert "id=sk1" in block  # the skill id the read tool needs
    assert all(s == "ok" for s in states(out).values())


async def test_a_hanging_layer_is_dropped_within_the_deadline_and_reported_partial() -> None:
    b = FakeBackend()
    b.atomic = [mem("prefers tabs")]
    b.hang = {"search_conversation", "read_profile"}
    # how long it takes is measured in bench/bench_bounds.py; here: it ends (a hang guard) and says why
    out = await asyncio.wait_for(recall(b, PROMPT, budget(deadline_ms=300)), timeout=30)
    assert out.outcome == "partial"
    assert states(out)["L0"] == "timeout" and states(out)["L3"] == "timeout"
    assert "prefers tabs" in (out.block or "")


async def test_a_raising_layer_is_reported_failed_and_the_rest_still_recalled() -> None:
    b = FakeBackend()
    b.atomic = [mem("prefers tabs")]
    b.fail = {"search_conversation": BackendUnavailable("db locked")}
    out = await recall(b, PROMPT, budget())
    assert out.outcome == "partial"
    l0 = next(r for r in out.layers if r.layer == Layer.L0)
    assert l0.state == "failed" and "db locked" in (l0.error or "")


async def test_everything_failing_is_unavailable_not_an_exception() -> None:
    b = FakeBackend()
    b.fail = {
        m: RuntimeError("down")
        for m in ("search_conversation", "search_atomic", "list_scenarios", "read_profile", "search_skills")
    }
    out = await recall(b, PROMPT, budget())
    assert out.outcome == "unavailable" and out.block is None


async def test_layers_run_concurrently() -> None:
    """Each of two layers waits until the other has started: run one after the other, the first
    would wait until the deadline drops it (partial); run together, both answer (recalled)."""
    started = {"L1": asyncio.Event(), "L0": asyncio.Event()}

    class Meeting(FakeBackend):
        async def search_atomic(self, query, limit, type=None):  # type: ignore[no-untyped-def]
            started["L1"].set()
            await started["L0"].wait()
            return [mem("a")]

        async def search_conversation(self, query, limit):  # type: ignore[no-untyped-def]
            started["L0"].set()
            await started["L1"].wait()
            self.turns = [turn("q", "a")]
            return await super().search_conversation(query, limit)

    out = await recall(Meeting(), PROMPT, budget(deadline_ms=2000))
    assert out.outcome == "recalled", states(out)
    assert states(out)["L1"] == "ok" and states(out)["L0"] == "ok"


async def test_caps_per_layer() -> None:
    b = FakeBackend()
    b.atomic = [mem(f"memory number {i}", i=i) for i in range(20)]
    b.turns = [turn(f"question {i}", f"answer {i}", ts_ms=1_760_000_000_000 + i) for i in range(20)]
    out = await recall(b, PROMPT, budget())
    counts = {str(r.layer): r.items for r in out.layers}
    assert counts["L1"] == 6 and counts["L0"] == 4


async def test_budget_includes_headers_and_boundary_at_the_edges() -> None:
    b = FakeBackend()
    b.atomic = [mem("x" * 3000, i=i) for i in range(6)]
    b.turns = [turn("y" * 3000, "z" * 3000, ts_ms=1_760_000_000_000 + i) for i in range(4)]
    for max_chars in (1000, 1001, 4096, 12000, 48000):
        out = await recall(b, PROMPT, budget(max_chars=max_chars))
        assert out.block is not None and len(out.block) <= max_chars


async def test_unused_share_flows_to_other_layers() -> None:
    b = FakeBackend()
    b.atomic = [mem(f"fact {i} " + "w" * 1400, i=i) for i in range(6)]  # wants ~8.5k, share is 3k
    out = await recall(b, PROMPT, budget(max_chars=12000))
    l1 = next(r for r in out.layers if r.layer == Layer.L1)
    assert l1.items >= 5  # far more than its 25% share would allow alone


def test_allocate_never_exceeds_available_and_respects_wants() -> None:
    wants = {Layer.L3: 0, Layer.L1: 9000, Layer.L2: 100, Layer.L0: 9000, Layer.SKILL: 0}
    got = allocate(wants, 10000)
    assert sum(got.values()) <= 10000
    assert got[Layer.L2] == 100 and got[Layer.L3] == 0
    assert got[Layer.L1] + got[Layer.L0] == 10000 - 100


async def test_cross_layer_duplicates_appear_once() -> None:
    b = FakeBackend()
    b.atomic = [mem("Prefers named constants over magic numbers.")]
    b.profile = Profile("prefers named constants over MAGIC numbers")
    out = await recall(b, PROMPT, budget())
    assert (out.block or "").lower().count("named constants") == 1


async def test_turns_of_the_live_branch_are_not_reinjected() -> None:
    b = FakeBackend()
    b.turns = [
        turn("live question", "live answer", ts_ms=1_000),
        turn("old question", "old answer", ts_ms=2_000),
    ]
    out = await recall(b, PROMPT, budget(), live_user_timestamps=frozenset({1_000}))
    assert "old question" in (out.block or "")
    assert "live question" not in (out.block or "")


async def test_recalled_text_is_redacted_again() -> None:
    b = FakeBackend()
    key = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0"
    b.atomic = [mem(f"the deploy key is {key}")]
    out = await recall(b, PROMPT, budget())
    assert key not in (out.block or "") and "REDACTED" in (out.block or "")


async def test_l2_scoring_ignores_stop_words_and_handles_cjk_and_bad_files() -> None:
    b = FakeBackend()
    b.scenarios = {
        "misc/printer.md": ScenarioNote(
            "misc/printer.md", "The thermal printer is in the hall", "printer stuff"
        ),
        "go/style.md": ScenarioNote("go/style.md", "Go 代码风格：讨厌魔法数字", "用常量代替魔法数字"),
        "go/broken.md": ScenarioNote("go/broken.md", "Go 代码风格 broken", "never read"),
    }
    b.unreadable = {"go/broken.md"}
    out = await recall(b, "what is the style? 我讨厌什么代码风格？", budget())
    block = out.block or ""
    assert "用常量代替魔法数字" in block
    assert "printer stuff" not in block
    assert states(out)["L2"] == "ok"


async def test_trivial_prompts_skip_recall() -> None:
    b = FakeBackend()
    b.atomic = [mem("anything")]
    for prompt in ("ok", "continue", "  Thanks!  ", "继续", "/tdai-memory-status", "", "?"):
        assert (await recall(b, prompt, budget())).outcome == "skipped"
    assert (await recall(b, "ok, now refactor the parser", budget())).outcome == "recalled"


async def test_capabilities_gate_layers() -> None:
    b = FakeBackend()
    b.capabilities = frozenset({Capability.L1_SEARCH})
    b.fail = {"search_conversation": AssertionError("must not be called")}
    b.atomic = [mem("only L1")]
    out = await recall(b, PROMPT, budget())
    assert out.outcome == "recalled"
    assert states(out)["L0"] == "skipped"


async def test_a_one_megabyte_prompt_is_bounded() -> None:
    seen: list[str] = []

    class Spy(FakeBackend):
        async def search_atomic(self, query, limit, type=None):  # type: ignore[no-untyped-def]
            seen.append(query)
            return []

    prompt = "word " * 200_000 + "what is my cat called?"
    out = await recall(Spy(), prompt, budget())  # its speed: bench/bench_bounds.py
    # the backend gets the head and the tail, where the question is (prompt_focus finds it there)
    assert len(seen[0]) <= MAX_PROMPT_CHARS + 1
    assert seen[0].startswith("word word") and seen[0].endswith("what is my cat called?")
    assert out.outcome == "empty"


def test_layer_order_is_stable() -> None:
    assert [str(x) for x in LAYER_ORDER] == ["L3", "L1", "L2", "L0", "Skill"]


async def test_items_an_earlier_block_of_the_branch_gave_are_not_given_again() -> None:
    b = FakeBackend()
    b.atomic = [mem("Hates magic numbers in Go code", i=1), mem("Prefers table-driven Go tests", i=2)]
    first = await recall(b, PROMPT, budget())
    assert len(first.keys) == 2 and "magic numbers" in (first.block or "")
    b.atomic.append(mem("Go backend uses chi for routing", i=3))
    second = await recall(b, PROMPT, budget(), in_context=frozenset(first.keys), in_context_chars=first.chars)
    block = second.block or ""
    assert "chi for routing" in block
    assert "magic numbers" not in block and "table-driven" not in block
    assert len(second.keys) == 1 and not set(second.keys) & set(first.keys)


async def test_nothing_new_to_give_is_an_empty_recall() -> None:
    b = FakeBackend()
    b.atomic = [mem("Hates magic numbers in Go code", i=1)]
    first = await recall(b, PROMPT, budget())
    again = await recall(b, PROMPT, budget(), in_context=frozenset(first.keys), in_context_chars=first.chars)
    assert again.outcome == "empty" and again.block is None and again.keys == ()


async def test_the_branch_budget_bounds_what_a_new_block_may_add() -> None:
    b = FakeBackend()
    b.atomic = [mem(f"Go convention number {i}: " + "x" * 300, i=i) for i in range(6)]
    roomy = await recall(b, PROMPT, budget(max_chars=12000, branch_max_chars=24000))
    assert roomy.chars > 1500
    tight = await recall(b, PROMPT, budget(max_chars=12000, branch_max_chars=24000), in_context_chars=23000)
    assert tight.block is not None and tight.chars <= 1000
    full = await recall(b, PROMPT, budget(branch_max_chars=24000), in_context_chars=24000)
    assert full.block is None and full.keys == ()
