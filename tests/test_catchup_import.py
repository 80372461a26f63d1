"""Import of past sessions: preview, consent, idempotence, resuming after an interruption, turns
stored before keys were entry ids; and one copy in MemoryCore when catch-up meets a live turn."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from pathlib import Path

import pytest

from catchup_files import DATA, PI_VERSIONS, T0_MS, SessionWriter, copy_fixture
from flow_driver import start
from memorycore_fake import FAKE_API_KEY, FakeMemoryCore, fake_sdk_bindings, serve
from pi_memory_bridge.backends.base import BackendUnavailable, ConversationTurn
from pi_memory_bridge.backends.local import LocalBackend
from pi_memory_bridge.backends.memorycore import MemoryCoreBackend, MemoryCoreTarget
from pi_memory_bridge.capture.identity import BranchIdentity
from pi_memory_bridge.capture.prepare import live_user_entries, prepare_capture
from pi_memory_bridge.catchup.importer import ImportPlan, ImportScope, KnownIds, plan_import, run_import
from pi_memory_bridge.catchup.runner import CatchUpRunner
from pi_memory_bridge.catchup.state import CatchUpState
from pi_memory_bridge.commands.import_flow import ImportDeps, ImportOutcome, import_flow, parse_import_args
from pi_memory_bridge.engine.catch_up_service import known_ids_via
from pi_memory_bridge.outbox import DeliveryWorker, Outbox
from pi_memory_bridge.wire import EntryRef

# every settled turn of the recorded files: 15 in each tree, one of their own in each fork/clone
EXPECTED_TURNS = 2 * (15 + 1 + 1)


@pytest.fixture
def agent(tmp_path: Path) -> Path:
    agent_dir = tmp_path / "agent"
    for version in PI_VERSIONS:
        for kind in ("tree", "fork", "clone"):
            copy_fixture(
                f"{kind}-{version}.jsonl", agent_dir / "sessions" / f"--{kind}--" / f"{version}.jsonl"
            )
    return agent_dir


@pytest.fixture
def outbox(agent: Path) -> Iterator[Outbox]:
    with Outbox.open(agent / "memory-bridge") as box:
        yield box


@pytest.fixture
async def store(agent: Path) -> AsyncIterator[LocalBackend]:
    backend = LocalBackend(agent / "memory-bridge")
    yield backend
    await backend.close()


@pytest.fixture
def state(agent: Path) -> Iterator[CatchUpState]:
    with CatchUpState.open(agent / "memory-bridge") as s:
        yield s


def _submit(outbox: Outbox) -> Callable[[Sequence[ConversationTurn]], Awaitable[int]]:
    async def submit(turns: Sequence[ConversationTurn]) -> int:
        return await asyncio.to_thread(outbox.enqueue, list(turns), possibly_sent=True)

    return submit


async def _deliver(outbox: Outbox, store: LocalBackend) -> None:
    await DeliveryWorker(outbox, store).flush()


async def _stored(store: LocalBackend) -> int:
    return (await store.status()).counts["turns"]


async def test_import_adds_every_settled_turn_once_and_a_second_import_adds_nothing(
    agent: Path, outbox: Outbox, store: LocalBackend, state: CatchUpState
) -> None:
    known = known_ids_via(outbox, lambda: store)
    plan = await plan_import(agent, ImportScope(), known, state)
    assert plan.turns == EXPECTED_TURNS and len(plan.files) == 6 and plan.already == 0
    assert f"{EXPECTED_TURNS} turns in 6 sessions" in plan.preview()
    result = await run_import(plan, state=state, known_ids=known, submit=_submit(outbox))
    assert result.queued == EXPECTED_TURNS and not result.errors
    await _deliver(outbox, store)
    assert await _stored(store) == EXPECTED_TURNS
    again = await plan_import(agent, ImportScope(), known, state)
    assert again.turns == 0 and again.already == EXPECTED_TURNS
    assert (await run_import(again, state=state, known_ids=known, submit=_submit(outbox))).queued == 0
    assert state.unfinished_import() is None


async def test_an_interrupted_import_resumes_with_the_files_it_had_not_finished(
    agent: Path, outbox: Outbox, store: LocalBackend, state: CatchUpState
) -> None:
    known = known_ids_via(outbox, lambda: store)
    plan = await plan_import(agent, ImportScope(), known, state)
    calls = 0

    async def dies_on_the_third_file(turns: Sequence[ConversationTurn]) -> int:
        nonlocal calls
        calls += 1
        if calls == 3:
            raise BackendUnavailable("disk full")
        return await _submit(outbox)(turns)

    first = await run_import(plan, state=state, known_ids=known, submit=dies_on_the_third_file)
    assert first.files_done == 2 and first.errors
    job = state.unfinished_import()
    assert job is not None and len(job.remaining) == 4
    resumed = await plan_import(agent, ImportScope(), known, state)
    assert resumed.resuming is not None and "resuming an interrupted import" in resumed.preview()
    assert resumed.turns == EXPECTED_TURNS - first.queued
    second = await run_import(resumed, state=state, known_ids=known, submit=_submit(outbox))
    assert first.queued + second.queued == EXPECTED_TURNS
    assert state.unfinished_import() is None


async def test_the_sidecar_continues_an_interrupted_import_in_the_background(
    agent: Path, outbox: Outbox, store: LocalBackend, state: CatchUpState
) -> None:
    known = known_ids_via(outbox, lambda: store)
    plan = await plan_import(agent, ImportScope(), known, state)
    state.begin_import(None, None, [str(f.path) for f in plan.files])  # then the process was killed
    runner = CatchUpRunner(agent_dir=agent, data_dir=agent / "memory-bridge", outbox=outbox, known_ids=known)
    await runner.run_pass()
    assert runner.progress.imported == EXPECTED_TURNS and runner.progress.import_files_left == 0
    assert state.unfinished_import() is None
    assert runner.progress.queued == 0  # catch-up itself: these files are from before memory ran


async def test_since_limits_the_import_to_turns_said_after_the_date(tmp_path: Path, outbox: Outbox) -> None:
    agent = tmp_path / "other-agent"
    w = SessionWriter(agent / "sessions" / "--new--" / "n.jsonl", created_ms=T0_MS, clock=T0_MS)
    w.turn("old")
    w.clock = T0_MS + 86_400_000
    w.turn("new")
    known = known_ids_via(outbox, lambda: None)
    plan = await plan_import(agent, ImportScope(since_ms=T0_MS + 3_600_000), known, None)
    assert plan.turns == 1
    one = await plan_import(agent, ImportScope(session_file=w.path), known, None)
    assert one.turns == 2 and one.files_scanned == 1


async def test_a_turn_stored_before_keys_were_entry_ids_is_not_imported_again(
    agent: Path, outbox: Outbox, store: LocalBackend
) -> None:
    w = SessionWriter(agent / "sessions" / "--old--" / "o.jsonl", created_ms=T0_MS, clock=T0_MS)
    asked = w.turn("captured by an older version")
    log_entry = {"role": "user", "content": [{"type": "text", "text": "captured by an older version"}]}
    # what an older version stored: the content-derived id (no entry id known)
    lines = w.path.read_text(encoding="utf-8").splitlines()
    messages = [json.loads(x)["message"] for x in lines[1:]]
    assert messages[0]["content"] == log_entry["content"]
    old = prepare_capture([messages], aborted=False, identity=BranchIdentity(w.session_id, "main"))
    await store.conversation.add(old.turns)
    plan = await plan_import(
        agent, ImportScope(session_file=w.path), known_ids_via(outbox, lambda: store), None
    )
    assert plan.turns == 0 and plan.already == 1 and asked


# ---- the dialog ----------------------------------------------------------------------------


def _deps(agent: Path, outbox: Outbox, runs: list[int]) -> ImportDeps:
    known: KnownIds = known_ids_via(outbox, lambda: None)

    async def plan(scope: ImportScope) -> ImportPlan:
        return await plan_import(agent, scope, known, None)

    async def run(p: ImportPlan) -> ImportOutcome:
        result = await run_import(p, state=None, known_ids=known, submit=_submit(outbox))
        runs.append(result.queued)
        return ImportOutcome(f"imported {result.queued}")

    return ImportDeps("", plan, run)


async def test_without_a_ui_the_flow_shows_the_preview_and_imports_nothing(
    agent: Path, outbox: Outbox
) -> None:
    runs: list[int] = []
    deps = _deps(agent, outbox, runs)
    step = (await start(lambda d: import_flow(deps, "", d), has_ui=False)).step
    assert step.kind == "done" and step.level == "warning" and "--yes" in step.message
    assert f"{EXPECTED_TURNS} turns" in step.message and runs == []


async def test_the_answer_decides_and_no_is_the_default(agent: Path, outbox: Outbox) -> None:
    runs: list[int] = []
    deps = _deps(agent, outbox, runs)
    for answer in (None, False):
        running = await start(lambda d: import_flow(deps, "", d))
        step = running.step
        # the question starts on No and names what an import adds
        assert step.kind == "confirm" and step.raw.options == ["No", "Yes"]
        assert f"Import {EXPECTED_TURNS} turns from " in step.title and "sessions" in step.title
        step = await running.answer(answer)
        assert step.message == "import cancelled: nothing imported"
    assert runs == []
    running = await start(lambda d: import_flow(deps, "", d))
    step = await running.answer(True)
    assert step.message == f"imported {EXPECTED_TURNS}" and runs == [EXPECTED_TURNS]
    step = (await start(lambda d: import_flow(deps, "--yes", d), has_ui=False)).step
    assert "nothing to import" in step.message  # nothing to do: nothing is asked


async def test_yes_imports_without_asking(agent: Path, outbox: Outbox) -> None:
    runs: list[int] = []
    deps = _deps(agent, outbox, runs)
    step = (await start(lambda d: import_flow(deps, "--yes", d), has_ui=False)).step
    assert step.kind == "done" and runs == [EXPECTED_TURNS]


@pytest.mark.parametrize("args", ["--since yesterday", "--bogus", "--session", "'unclosed"])
def test_bad_arguments_are_explained(args: str) -> None:
    parsed = parse_import_args(args)
    assert isinstance(parsed, str) and "usage:" in parsed


def test_arguments_are_parsed_with_paths_relative_to_the_cwd(tmp_path: Path) -> None:
    parsed = parse_import_args("  --since 2026-01-31  --session 'my dir/s.jsonl' -y ", cwd=tmp_path)
    assert not isinstance(parsed, str)
    assert parsed.yes and parsed.scope.session_file == tmp_path / "my dir" / "s.jsonl"
    assert parsed.scope.since_ms is not None


async def test_a_missing_session_file_is_an_error(agent: Path, outbox: Outbox) -> None:
    deps = _deps(agent, outbox, [])
    step = (await start(lambda d: import_flow(deps, "--session /nope/x.jsonl --yes", d), has_ui=False)).step
    assert step.level == "error" and "not a session file" in step.message


# ---- MemoryCore: the redelivery check keeps one copy --------------------------------------------


@pytest.fixture
def core() -> FakeMemoryCore:
    return FakeMemoryCore()


@pytest.fixture
def core_url(core: FakeMemoryCore) -> Iterator[str]:
    with serve(core) as base:
        yield base


async def test_a_turn_delivered_live_and_found_again_by_catch_up_is_stored_once_in_memorycore(
    tmp_path: Path, core: FakeMemoryCore, core_url: str
) -> None:
    agent_dir = tmp_path / "agent"
    root = agent_dir / "memory-bridge"
    root.mkdir(parents=True)
    (root / "capture-since").write_text(f"{T0_MS}\n", encoding="ascii")
    w = SessionWriter(agent_dir / "sessions" / "--w--" / "s.jsonl", created_ms=T0_MS, clock=T0_MS)
    w.turn("remember the release train")
    entries = [json.loads(x) for x in w.path.read_text(encoding="utf-8").splitlines()[1:]]
    refs = [
        EntryRef(
            id=e["id"],
            parent_id=e["parentId"],
            type="message",
            role=e["message"]["role"],
            ts=e["message"]["timestamp"],
        )
        for e in entries
    ]
    # live capture, as the sidecar does it at agent_settled, delivered to MemoryCore
    live = prepare_capture(
        [[e["message"] for e in entries]],
        aborted=False,
        identity=BranchIdentity(w.session_id, "main"),
        user_entries=live_user_entries(refs),
    )
    target = MemoryCoreTarget(core_url, "default", "team-t", "agt-t", "usr-t")

    def remote() -> MemoryCoreBackend:  # a fresh process knows nothing of earlier sends
        return MemoryCoreBackend.with_keys(target, gateway_api_key=FAKE_API_KEY, sdk=fake_sdk_bindings())

    with Outbox.open(root) as box:
        box.enqueue(live.turns)
        first = remote()
        try:
            await DeliveryWorker(box, first).flush()
        finally:
            await first.close()
    assert len(core.rows()) == 2  # the user and the assistant message
    # what the outbox knew is lost (a new data dir, a damaged file); catch-up finds the turn again
    for name in ("outbox.sqlite3", "outbox.sqlite3-wal", "outbox.sqlite3-shm"):
        (root / name).unlink(missing_ok=True)
    with Outbox.open(root) as box:
        again = CatchUpRunner(agent_dir=agent_dir, data_dir=root, outbox=box)
        await again.run_pass()
        assert again.progress.queued == 1
        (entry,) = box.admin.list_entries()
        assert entry.id == live.turns[0].turn_id  # the same key on both paths
        second = remote()
        try:
            report = await DeliveryWorker(box, second).flush()
        finally:
            await second.close()
    assert report.counts.waiting == 0 and report.already_stored + report.delivered == 1
    assert len(core.rows()) == 2  # checked before sending: stored once


def test_the_recorded_fixtures_are_where_the_tests_expect_them() -> None:
    assert sorted(p.name for p in DATA.glob("*.jsonl")) == sorted(
        f"{k}-{v}.jsonl" for k in ("tree", "fork", "clone", "scenarios") for v in PI_VERSIONS
    )


async def test_files_too_large_to_read_are_named_in_the_preview_and_the_rest_is_imported(
    agent: Path, outbox: Outbox, store: LocalBackend, state: CatchUpState
) -> None:
    from pi_memory_bridge.catchup.files import MAX_FILE_BYTES

    huge = []
    for n in range(7):
        path = agent / "sessions" / "--huge--" / f"big-{n}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
        os.truncate(path, MAX_FILE_BYTES + 1)  # sparse: no disk is used
        huge.append(path)
    known = known_ids_via(outbox, lambda: store)
    plan = await plan_import(agent, ImportScope(), known, state)
    assert plan.turns == EXPECTED_TURNS and len(plan.unreadable) == 7
    preview = plan.preview()
    assert preview.count(": too large to read (256 MiB)") == 5  # five named, the rest counted
    assert "... and 2 more unreadable files" in preview
    result = await run_import(plan, state=state, known_ids=known, submit=_submit(outbox))
    assert result.queued == EXPECTED_TURNS and not result.errors


async def test_a_file_gone_after_the_preview_is_an_error_and_the_other_files_are_imported(
    agent: Path, outbox: Outbox, store: LocalBackend, state: CatchUpState
) -> None:
    known = known_ids_via(outbox, lambda: store)
    plan = await plan_import(agent, ImportScope(), known, state)
    gone = plan.files[0]
    gone.path.unlink()  # the user deleted it while reading the preview
    result = await run_import(plan, state=state, known_ids=known, submit=_submit(outbox))
    assert result.files_done == len(plan.files) - 1 and result.queued == EXPECTED_TURNS - gone.new_turns
    assert [e.split(":")[0] for e in result.errors] == [str(gone.path)]
    job = state.unfinished_import()  # not finished: the next run would try it again
    assert job is not None and job.remaining == (str(gone.path),)
    # the sidecar continues it: a file that is gone by then has nothing to import, and the job ends
    runner = CatchUpRunner(agent_dir=agent, data_dir=agent / "memory-bridge", outbox=outbox, known_ids=known)
    await runner.run_pass()
    assert runner.progress.import_files_left == 0 and state.unfinished_import() is None


async def test_an_import_whose_job_cannot_be_recorded_still_imports_everything(
    agent: Path, outbox: Outbox, store: LocalBackend, caplog: pytest.LogCaptureFixture
) -> None:
    broken = CatchUpState.open(agent / "memory-bridge")
    broken.close()  # every read and write of the job now fails
    known = known_ids_via(outbox, lambda: store)
    plan = await plan_import(agent, ImportScope(), known, broken)
    assert plan.turns == EXPECTED_TURNS and plan.resuming is None
    result = await run_import(plan, state=broken, known_ids=known, submit=_submit(outbox))
    assert result.queued == EXPECTED_TURNS and not result.errors
    assert "import: cannot read the import job" in caplog.text
    assert "import: cannot record the import job" in caplog.text  # only resuming would not work


async def test_an_import_in_pi_that_the_outbox_stops_says_it_resumes_later_and_refuses_a_second_meanwhile(
    agent: Path, store: LocalBackend
) -> None:
    import sqlite3

    from pi_memory_bridge.config import load_config
    from pi_memory_bridge.engine.catch_up_service import SidecarImports
    from pi_memory_bridge.outbox.delivery import CaptureDelivery

    told: list[str] = []

    async def notify(line: str) -> None:
        told.append(line)

    delivery = await CaptureDelivery.open(agent / "memory-bridge", lambda _counts: None)
    loaded = load_config(agent_dir=agent, cwd=agent.parent, project_trusted=False, env={})
    try:
        imports = SidecarImports(agent, delivery, lambda: store, notify)
        assert (
            SidecarImports(agent, None, lambda: store, notify)
            .deps(loaded)
            .problem.startswith("the capture outbox is not open")
        )
        deps = imports.deps(loaded)
        assert deps.problem == ""
        plan = await deps.plan(ImportScope())
        assert plan.turns == EXPECTED_TURNS
        other = sqlite3.connect(delivery.outbox.db_path, isolation_level=None)
        other.execute("ALTER TABLE records RENAME TO records_aside")  # the outbox fails every enqueue
        other.close()
        started = await deps.run(plan)
        assert "in the background" in started.message
        assert imports.deps(loaded).problem.startswith("an import is already running (0 of 6 sessions")
        running = imports._task  # the background run the command started
        assert running is not None
        await asyncio.wait_for(running, 30)  # a hang guard, not a measurement
        assert imports.line.startswith("done: 0 turns queued from 0 sessions; stopped early, resumes later: ")
        (notice,) = told
        assert notice.startswith(
            "memory: import stopped after 0 turns from 0 sessions; it resumes later ("
        ), notice
        with CatchUpState.open(agent / "memory-bridge") as state:  # left for the next sidecar to finish
            job = state.unfinished_import()
            assert job is not None and len(job.remaining) == 6
    finally:
        await delivery.close()
