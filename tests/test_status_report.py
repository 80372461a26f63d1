"""The pure pieces of `/tdai-memory-status`: each problem comes with its fix, nothing leaks."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from pi_memory_bridge.capture.identity import BranchIdentity
from pi_memory_bridge.config import load_config
from pi_memory_bridge.embeddings import ModelState
from pi_memory_bridge.operations.status_lines import (
    describe_budget,
    describe_embeddings,
    describe_identity,
    describe_last_recall,
    describe_recalled,
    describe_session,
    describe_waiting,
    mask,
    outbox_problems,
    sdk_problems,
)
from pi_memory_bridge.outbox import OutboxCounts
from pi_memory_bridge.recall import Layer, LayerResult, RecallOutcome
from pi_memory_bridge.vocabulary.status import Problem, StatusReport, render_status


def test_every_outbox_trouble_is_a_problem_with_its_fix() -> None:
    assert outbox_problems(OutboxCounts(pending=3), None) == []
    problems = outbox_problems(OutboxCounts(dead=2, quarantined=1), "401 Unauthorized")
    assert [p.what for p in problems] == [
        "the memory store refused 2 captured turns",
        "1 captured turn could not be read back and was set aside",
        "storing captured turns is paused: 401 Unauthorized",
    ]
    assert all(p.fix for p in problems)


def test_a_missing_sdk_matters_only_for_the_memorycore_backend(tmp_path: Path) -> None:
    local = load_config(agent_dir=tmp_path, cwd=None, project_trusted=False, env={})
    remote = load_config(
        agent_dir=tmp_path, cwd=None, project_trusted=False, env={"PI_MEMORY_BRIDGE_BACKEND": "memorycore"}
    )
    assert remote.config.backend == "memorycore"
    assert sdk_problems(local, False, "pip install x") == []
    assert sdk_problems(remote, True, "pip install x") == []
    assert sdk_problems(remote, False, "pip install x") == [
        Problem("the MemoryCore SDK is not installed", "install it: pip install x")
    ]
    assert sdk_problems(None, False, "pip install x") == []


def test_identity_budget_and_last_recall_lines(tmp_path: Path) -> None:
    assert describe_identity(None) == "no active session"
    line = describe_identity(BranchIdentity("0123456789abcdef-session", "main"))
    assert line.endswith("(tree path main)") and "…" in line
    assert mask("short") == "short"
    assert describe_budget(None) == "not loaded"
    loaded = load_config(agent_dir=tmp_path, cwd=None, project_trusted=False, env={})
    assert describe_budget(loaded).startswith("on, deadline 3000 ms, L0 4 / L1 6 / L2 2 / Skill 5")
    assert describe_last_recall(None) == "none yet"
    outcome = RecallOutcome(
        "partial",
        "block",
        (LayerResult(Layer.L0, "ok", 2, 3.2), LayerResult(Layer.L1, "timeout", 0, 3000.0)),
        3001.0,
        420,
    )
    assert describe_last_recall(outcome) == "partial in 3001 ms, 420 chars (L0 ok 3 ms, L1 timeout 3000 ms)"


def test_render_lists_each_problem_with_its_fix() -> None:
    report = StatusReport(
        "1.0", "1", True, "local", True, "", {"turns": 3}, "id", (), "budget", "last", "capture",
        "outbox", "sdk", "log", (Problem("what broke", "how to fix it"),),
    )  # fmt: skip
    text = render_status(report)
    assert "1 problem to look at" in text and "  - what broke\n    fix: how to fix it" in text
    assert not report.healthy


def _report(**changes: object) -> StatusReport:
    base = StatusReport(
        "1.0", "1", True, "local", True, "/db", {"turns": 4, "atomic": 6, "scenarios": 0, "profile": 1},
        "pi-0123…main (tree path main)", ("default",), "on, deadline 3000 ms, L0 4 / L1 6 / L2 2 / Skill 5",
        "recalled in 5 ms", "1 captured, 2 skipped (fail-closed)",
        "0 pending, 0 in flight, 0 dead, 0 quarantined", "installed", "log",
    )  # fmt: skip
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def test_the_main_text_is_plain_words_and_the_internals_are_details() -> None:
    last = RecallOutcome(
        "partial",
        "block",
        (LayerResult(Layer.L1, "ok", 2, 3.0), LayerResult(Layer.L0, "ok", 1, 3.0),
         LayerResult(Layer.L2, "timeout", 0, 900.0)),
        900.0,
        420,
    )  # fmt: skip
    report = _report(
        recalled=describe_recalled(last),
        waiting=describe_waiting(OutboxCounts(pending=2), None),
        session=describe_session(BranchIdentity("0a1b2c3d-4e5f-6789-abcd-ef0123456789", "main")),
    )
    text = render_status(report)
    main, _, details = text.partition("\nDetails")
    assert "Remembered: 4 earlier conversation turns, 6 facts and preferences, a profile of you." in main
    assert "3 remembered items matched the last prompt" in main and "2 from facts and preferences" in main
    assert "Not reached in time or failed: scenario notes." in main
    assert "Waiting: 2 captured turns to be stored" in main
    assert "Pi session 0a1b2c3d…6789; new turns are stored under its main conversation." in main
    for jargon in ("atomic", "fail-closed", "quarantined", "L0", "L1", "branch"):
        assert jargon not in main, jargon
    assert "atomic 6" in details and "L0 4 / L1 6" in details and "fail-closed" in details


def test_a_fix_shared_by_problems_is_printed_once_and_a_tree_path_is_not_a_branch() -> None:
    report = _report(problems=(Problem("a is broken", "run the fix"), Problem("b is broken", "run the fix")))
    text = render_status(report)
    assert text.count("run the fix") == 1 and "a is broken" in text and "b is broken" in text
    line = describe_session(BranchIdentity("0a1b2c3d-4e5f-6789-abcd-ef0123456789", "entry-42abcdef99"))
    assert "/tree path that starts at entry" in line and "branch" not in line


def test_learning_catch_up_and_search_by_meaning_are_sentences_each_fix_once() -> None:
    embeddings = describe_embeddings("loaded", "", 2, 1)
    report = _report(
        learning_words="Learning from your sessions: off; /tdai-memory-learning on allows it.",
        catch_up_words="Catching up on turns live capture missed: 2 turns in Pi's session files are not "
        "stored yet (see below).",
        embeddings_words=embeddings,
        learning="off (learning.enabled is false; /tdai-memory-learning on to allow it)",
        catch_up="last pass 3 s ago; BEHIND by 2 turns: disk full",
        embeddings="use-multilingual-v3 loaded; vectors L0 1/2, L1 1/3",
        problems=(
            Problem("memory is behind: 2 settled turns are not captured yet", "free space in the data dir"),
            Problem("the outbox could not write", "free space in the data dir"),
        ),
    )
    main, _, details = render_status(report).partition("\nDetails")
    assert "Learning from your sessions: off; /tdai-memory-learning on allows it." in main
    assert "2 turns in Pi's session files are not stored yet" in main
    assert "Search by meaning: on; 2 turns and 1 memory still to embed (in the background)." in main
    assert main.count("free space in the data dir") == 1  # the one fix, once, for both problems
    assert "BEHIND" not in main and "vectors L0" not in main and "learning.enabled" not in main
    assert "catch-up:       last pass" in details and "embeddings:     use-multilingual-v3" in details
    assert "learning:       off (learning.enabled" in details
    assert describe_embeddings("loaded", "", 0) == "Search by meaning: on; everything remembered is indexed."
    off = describe_embeddings("unavailable", "weights damaged", None)
    assert "off (weights damaged)" in off and "memory is searched by its words only" in off
    assert "loading" in describe_embeddings("loading", "", None)
    assert "loading (5 turns still to embed)" in describe_embeddings("loading", "", 5, 0)


def test_a_status_outside_the_sidecar_says_what_the_background_sidecar_still_has_to_embed() -> None:
    # `pi-memory-bridge status` loads no model: the rows are counted, not "loading"
    left = describe_embeddings(ModelState.IDLE.value, "", 214, 0)
    assert left.startswith("Search by meaning: 214 turns still to embed; the background sidecar embeds")
    assert "loading" not in left
    assert (
        describe_embeddings(ModelState.IDLE.value, "", 0, 0)
        == "Search by meaning: everything remembered is indexed."
    )


def test_a_paused_project_is_the_headline() -> None:
    text = render_status(_report(paused_project="/work/client-repo"))
    first = text.splitlines()[0]
    assert first.startswith("Memory is paused for this project (/work/client-repo)")
    assert "/tdai-memory-resume" in first


def test_waiting_says_when_a_failed_try_comes_again_paused_or_unreadable(tmp_path: Path) -> None:
    from datetime import UTC, datetime

    from pi_memory_bridge.backends.base import ConversationTurn
    from pi_memory_bridge.outbox import Outbox

    with Outbox.open(tmp_path, clock=lambda: 1_800_000_000.0) as box:
        box.enqueue([ConversationTurn("t-1", "s", "said", "answered", datetime(2027, 1, 1, tzinfo=UTC))])
        assert describe_waiting(box.admin.counts(), None).endswith("; they are on their way.")
        claim = box.claims.claim(ignore_backoff=True)
        assert claim is not None
        box.claims.retry(claim, "503 Service Unavailable", delay_s=90, ambiguous=False)  # the store's bad day
        counts = box.admin.counts()
    line = describe_waiting(counts, None)
    assert line == "Waiting: 1 captured turn to be stored; the last try failed, the next is at 08:01:30 UTC."
    paused = describe_waiting(counts, "the store refuses the key")
    assert paused.endswith("; delivery is paused (see below).")
    assert describe_waiting(None, None) == "Waiting: unknown (the queue of captured turns cannot be read)."
