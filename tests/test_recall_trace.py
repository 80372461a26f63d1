"""Recall traces: what each prompt was given, what was left out and why, kept bounded on disk."""

from __future__ import annotations

import stat
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from fake_backend import FakeBackend, mem, turn
from pi_memory_bridge.backends.base import ConversationTurn, Profile
from pi_memory_bridge.backends.local import LocalBackend
from pi_memory_bridge.operations.forget import ForgetDeps, delete_candidates
from pi_memory_bridge.recall import Layer, RecallBudget, recall
from pi_memory_bridge.recall.trace import RecallTrace
from pi_memory_bridge.recall.trace_log import DB_FILENAME, FORGOTTEN, TraceLog, open_trace_log
from pi_memory_bridge.vocabulary.forget import ForgetCandidate

PROMPT = "which Go style conventions do I prefer for the backend?"


class Traces:
    """A recorder that keeps traces in memory (for checks on the trace itself)."""

    def __init__(self) -> None:
        self.traces: list[RecallTrace] = []

    def record(self, trace: RecallTrace) -> None:
        self.traces.append(trace)


@pytest.fixture
def log(tmp_path: Path) -> Iterator[TraceLog]:
    traces = TraceLog.open(tmp_path / "data")
    yield traces
    traces.close()


@pytest.fixture
async def local(tmp_path: Path) -> AsyncIterator[LocalBackend]:
    backend = LocalBackend(tmp_path / "data", busy_timeout_ms=300)
    yield backend
    await backend.close()


async def test_a_trace_lists_each_given_item_with_its_source_and_score(
    local: LocalBackend, log: TraceLog
) -> None:
    saved = await local.memories.save(
        "prefers the Go style guide from Uber for backend code", "preference", "user"
    )
    for n in range(5):  # a few others, so the ranking score means something
        await local.memories.save(f"unrelated memory {n} about gardening", "fact", "user")
    t0 = datetime(2026, 5, 1, tzinfo=UTC)
    await local.conversation.add(
        [ConversationTurn("turn-1", "s1", "what Go style do we use?", "Uber's guide, gofumpt", t0, "pi")]
    )
    out = await recall(local, PROMPT, RecallBudget(), recorder=log)
    await log.drain()
    (stored,) = log.recent(5)
    trace = stored.trace
    assert trace.prompt == PROMPT and trace.outcome == out.outcome == "recalled"
    given = {(i.layer, i.source_id): i for i in trace.given()}
    l1 = given[("L1", saved.id)]
    assert l1.fate == "injected" and l1.score is not None and l1.score > 0 and "Uber" in l1.text
    assert given[("L0", "turn-1")].text.startswith("user: what Go style")
    assert {layer.layer: layer.state for layer in trace.layers}["L1"] == "ok"
    assert trace.chars == out.chars and trace.max_chars == 12000


async def test_duplicates_budget_and_live_context_say_why_they_were_left_out() -> None:
    b = FakeBackend()
    b.profile = Profile("Prefers Go with the Uber style guide.")
    b.atomic = [mem("Prefers Go with the Uber style guide.", i=1), mem("x" * 3000, i=2), mem("y" * 3000, i=3)]
    live_ms = 1_760_000_000_000
    b.turns = [
        turn("go style again?", "yes", ts_ms=live_ms),
        turn("older go style talk", "ok", ts_ms=live_ms - 9),
    ]
    traces = Traces()
    await recall(
        b, PROMPT, RecallBudget(max_chars=2500), live_user_timestamps=frozenset({live_ms}), recorder=traces
    )
    (trace,) = traces.traces
    fates = {(i.layer, i.source_id or i.text[:5]): (i.fate, i.detail) for i in trace.items}
    assert fates[("L1", "id1")] == ("duplicate", "same text as an item of L3")
    assert fates[("L0", f"t{live_ms}")][0] == "live_context"
    budget_or_cut = {fates[("L1", "id2")][0], fates[("L1", "id3")][0]}
    assert "budget" in budget_or_cut
    assert all(i.fate != "injected" or i.chars > 0 for i in trace.items)
    assert [i.fate for i in trace.items][:1] in (["injected"], ["truncated"])  # given ones first


async def test_a_layer_past_the_deadline_is_in_the_trace() -> None:
    b = FakeBackend()
    b.atomic = [mem("prefers tabs")]
    b.hang = {"search_conversation"}
    traces = Traces()
    await recall(b, PROMPT, RecallBudget(deadline_ms=150), recorder=traces)
    (trace,) = traces.traces
    states = {layer.layer: (layer.state, layer.error) for layer in trace.layers}
    assert states["L0"] == ("timeout", "no answer within 150 ms")
    assert trace.outcome == "partial" and trace.deadline_ms == 150


async def test_a_trivial_prompt_is_traced_as_skipped() -> None:
    traces = Traces()
    out = await recall(FakeBackend(), "ok", RecallBudget(), recorder=traces)
    assert out.outcome == "skipped"
    assert [(t.prompt, t.outcome, t.items) for t in traces.traces] == [("ok", "skipped", [])]


def _trace(n: int, source_id: str = "", text: str = "") -> RecallTrace:
    return RecallTrace.model_validate(
        {
            "at": datetime(2026, 1, 1, tzinfo=UTC) + timedelta(minutes=n),
            "prompt": f"prompt {n}",
            "outcome": "recalled",
            "items": [{"layer": "L1", "source_id": source_id, "fate": "injected", "text": text}]
            if text
            else [],
        }
    )


def test_the_log_keeps_only_the_newest_and_is_private(tmp_path: Path) -> None:
    traces = TraceLog(tmp_path / "d" / DB_FILENAME, keep=5)
    try:
        for n in range(8):
            traces.record(_trace(n))  # no event loop: written at once
        assert [s.trace.prompt for s in traces.recent(50)] == [f"prompt {n}" for n in (7, 6, 5, 4, 3)]
        assert stat.S_IMODE((tmp_path / "d" / DB_FILENAME).stat().st_mode) == 0o600
        assert stat.S_IMODE((tmp_path / "d").stat().st_mode) == 0o700
        assert traces.get(traces.recent(1)[0].id) is not None and traces.get(1) is None
        assert traces.clear() == 5 and traces.recent() == []
    finally:
        traces.close()


def _file_bytes(log: TraceLog) -> bytes:
    return b"".join(p.read_bytes() for p in log.path.parent.glob(f"{DB_FILENAME}*"))


async def test_forgetting_an_item_scrubs_it_from_every_trace(local: LocalBackend, log: TraceLog) -> None:
    saved = await local.memories.save("my locker code is quetzalcoatl7781", "fact", "user")
    log.write(_trace(1, saved.id, "my locker code is quetzalcoatl7781"))
    log.write(_trace(2, "at-other", "an unrelated memory"))
    assert b"quetzalcoatl7781" in _file_bytes(log)
    deps = ForgetDeps(backend=local, backend_problem="", forgotten=log.scrub_forgotten)
    cand = ForgetCandidate.for_memory(saved.id, "fact", "my locker code is quetzalcoatl7781", None)
    lines = await delete_candidates(deps, [cand])
    assert len(lines) == 1 and lines[0].startswith("deleted")
    texts = {i.source_id: i.text for s in log.recent() for i in s.trace.items}
    assert texts == {saved.id: FORGOTTEN, "at-other": "an unrelated memory"}
    assert b"quetzalcoatl7781" not in _file_bytes(log)


async def test_forgetting_a_turn_scrubs_the_prompt_it_was(local: LocalBackend, log: TraceLog) -> None:
    said = "  the door code for the lab is 48151623  "
    stamp = datetime(2026, 5, 1, tzinfo=UTC)
    await local.conversation.add([ConversationTurn("turn-door", "s1", said.strip(), "noted", stamp, "pi")])
    await recall(local, said, RecallBudget(), recorder=log)  # the prompt's own trace
    await log.drain()
    log.write(_trace(9, "at-x", "something else"))
    assert b"48151623" in _file_bytes(log)
    deps = ForgetDeps(backend=local, backend_problem="", forgotten=log.scrub_forgotten)
    cand = ForgetCandidate.for_turn("turn-door", said.strip(), "noted", stamp)
    assert (await delete_candidates(deps, [cand]))[0].startswith("deleted")
    assert sorted(s.trace.prompt for s in log.recent()) == [FORGOTTEN, "prompt 9"]
    assert b"48151623" not in _file_bytes(log)


async def test_the_engine_records_a_trace_per_prompt(tmp_path: Path) -> None:
    from pi_memory_bridge.config import load_config
    from pi_memory_bridge.engine.core import Engine
    from pi_memory_bridge.wire import RecallParams

    agent = tmp_path / "agent"
    env = {"PI_CODING_AGENT_DIR": str(agent), "HOME": str(tmp_path)}
    loaded = load_config(agent_dir=agent, cwd=tmp_path, project_trusted=False, env=env)
    engine = await Engine.open(loaded, agent, tmp_path, env=env)
    try:
        backend, traces = engine.slot.backend, engine.traces
        assert backend is not None and traces is not None
        await backend.memories.save("deploys go out on tuesdays only", "constraint", "user")
        await engine.recall(RecallParams(pi_session_id="p1", prompt="when do deploys go out?"))
        await traces.drain()
        (stored,) = traces.recent()
        assert [(i.layer, i.fate) for i in stored.trace.items] == [(str(Layer.L1), "injected")]
    finally:
        await engine.shutdown()


async def test_a_damaged_trace_file_turns_traces_off_and_recall_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / DB_FILENAME).write_bytes(b"not a database at all " * 100)
    assert await open_trace_log(data) is None
    assert "recall traces are off: cannot open the recall traces" in caplog.text
    assert (
        data / DB_FILENAME
    ).read_bytes() == b"not a database at all " * 100  # left for the user to look at


def test_an_unreadable_trace_row_is_skipped_and_the_others_are_read(log: TraceLog) -> None:
    import sqlite3

    log.write(_trace(1, "at-a", "kept text"))
    bad_id = log.write(_trace(2, "at-b", "to be damaged"))
    conn = sqlite3.connect(log.path)
    conn.execute("UPDATE traces SET body = '{\"at\": 3' WHERE id = ?", (bad_id,))
    conn.commit()
    conn.close()
    assert [s.trace.prompt for s in log.recent()] == ["prompt 1"]
    assert log.get(bad_id) is None
    assert log.scrub(["at-a"]) == 1  # the damaged row does not stop forgetting in the others
    assert [i.text for s in log.recent() for i in s.trace.items] == [FORGOTTEN]


async def test_a_trace_that_cannot_be_written_is_dropped_with_a_warning_and_a_failed_scrub_is_reported(
    local: LocalBackend, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import sqlite3

    traces = TraceLog.open(tmp_path / "traces")
    try:
        other = sqlite3.connect(traces.path)
        other.execute("DROP TABLE traces")  # damaged under the sidecar: every statement now fails
        other.close()
        traces.record(_trace(1))  # recall's recorder: never raises into the prompt
        await traces.drain()
        assert "recall trace not kept: writing a recall trace to" in caplog.text
        saved = await local.memories.save("my locker code is quetzalcoatl7781", "fact", "user")
        deps = ForgetDeps(backend=local, backend_problem="", forgotten=traces.scrub_forgotten)
        cand = ForgetCandidate.for_memory(saved.id, "fact", "my locker code is quetzalcoatl7781", None)
        lines = await delete_candidates(deps, [cand])
        assert lines[0].startswith("deleted")  # the memory is gone; the copy that may remain is named
        assert lines[1].startswith(
            "FAILED  to remove copies in recall traces: scrubbing the recall traces in"
        )
    finally:
        traces.close()


async def test_a_trace_queued_as_the_log_closes_is_dropped_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    traces = TraceLog.open(tmp_path / "traces")
    traces.close()  # the sidecar shutting down while recall still records
    traces.record(_trace(1))
    await traces.drain()
    assert "recall trace not kept: writing a recall trace to" in caplog.text
    with pytest.raises(OSError, match="scrubbing the recall traces in"):
        await traces.scrub_forgotten([ForgetCandidate.for_memory("at-x", "fact", "x", None)])
