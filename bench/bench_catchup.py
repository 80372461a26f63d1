"""What catch-up and import cost: passes over many session files, and recall while a pass runs.

    .venv/bin/python bench/bench_catchup.py [--files 200] [--rounds 15]

Session files are copies of the recorded Pi files (tests/data/pi_sessions: trees with branches,
compaction, forks, clones, the retry/steer/abort scenarios of both versions), each copy its own
session id, in a temporary agent dir. Figures, not pass/fail:

* first pass (every file read, every turn queued), and a pass when nothing changed (stat only),
  and when one file got one new turn; each on its own, with the default budget per pass;
* import: plan (preview) and run (queue) of every file;
* recall latency in the same process (the real local store, a few hundred stored turns) alone and
  while a first pass over the files runs in its thread: interleaved pairs, `--rounds` each.

Run with bytecode, as a user's install has it (`PYTHONDONTWRITEBYTECODE` unset; compile first).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

from _stats import summary
from pi_memory_bridge.backends.base import ConversationTurn
from pi_memory_bridge.backends.local import LocalBackend
from pi_memory_bridge.catchup.importer import ImportScope, plan_import, run_import
from pi_memory_bridge.catchup.runner import CatchUpRunner
from pi_memory_bridge.catchup.state import SINCE_FILENAME
from pi_memory_bridge.engine.catch_up_service import known_ids_via
from pi_memory_bridge.outbox import DeliveryWorker, Outbox
from pi_memory_bridge.recall import Layer, RecallBudget, recall

REPO = Path(__file__).resolve().parents[1]
RECORDED = sorted((REPO / "tests" / "data" / "pi_sessions").glob("*.jsonl"))


def make_agent(root: Path, files: int) -> tuple[Path, int]:
    """An agent dir with `files` session files; (agent dir, bytes written)."""
    agent = root / "agent"
    data = agent / "memory-bridge"
    data.mkdir(parents=True)
    (data / SINCE_FILENAME).write_text("1000000000000\n", encoding="ascii")  # everything counts
    written = 0
    for n in range(files):
        source = RECORDED[n % len(RECORDED)]
        lines = source.read_text(encoding="utf-8").splitlines()
        header = json.loads(lines[0])
        header["id"] = str(uuid.uuid4())
        dest = agent / "sessions" / f"--bench-{n % 7}--" / f"{n:05d}_{header['id']}.jsonl"
        dest.parent.mkdir(parents=True, exist_ok=True)
        text = "\n".join([json.dumps(header), *lines[1:]]) + "\n"
        dest.write_text(text, encoding="utf-8")
        written += len(text.encode())
    return agent, written


def append_turn(agent: Path) -> None:
    path = sorted((agent / "sessions").glob("*/*.jsonl"))[0]
    last = json.loads(path.read_text(encoding="utf-8").splitlines()[-1])
    now = int(time.time() * 1000)
    user = {
        "type": "message",
        "id": uuid.uuid4().hex[:8],
        "parentId": last["id"],
        "timestamp": "2026-12-01T00:00:00.000Z",
        "message": {"role": "user", "content": [{"type": "text", "text": f"new {now}"}], "timestamp": now},
    }
    answer = {
        "type": "message",
        "id": uuid.uuid4().hex[:8],
        "parentId": user["id"],
        "timestamp": "2026-12-01T00:00:00.001Z",
        "message": {
            "role": "assistant",
            "content": [{"type": "text", "text": "ok"}],
            "stopReason": "stop",
            "timestamp": now + 1,
        },
    }
    with path.open("a", encoding="utf-8") as f:
        f.write(json.dumps(user) + "\n" + json.dumps(answer) + "\n")


async def full_passes(runner: CatchUpRunner) -> tuple[float, int]:
    started = time.perf_counter()
    passes = 0
    while True:
        passes += 1
        if not (await runner.run_pass()).more:
            return (time.perf_counter() - started) * 1000, passes


async def bench_passes(files: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-catchup-") as tmp:
        agent, size = make_agent(Path(tmp), files)
        data = agent / "memory-bridge"
        with Outbox.open(data) as box:
            runner = CatchUpRunner(agent_dir=agent, data_dir=data, outbox=box)
            ms, passes = await full_passes(runner)
            turns = runner.progress.queued
            print(
                f"first pass over {files} files ({size / 1e6:.1f} MB, {turns} turns queued): "
                f"{ms:8.1f} ms in {passes} bounded pass(es), {ms / max(turns, 1):.2f} ms a turn"
            )
            idle = []
            for _ in range(15):
                t0 = time.perf_counter()
                await runner.run_pass()
                idle.append((time.perf_counter() - t0) * 1000)
            print(summary(f"pass, nothing changed ({files} files)", idle))
            one = []
            for _ in range(15):
                append_turn(agent)
                t0 = time.perf_counter()
                await runner.run_pass()
                one.append((time.perf_counter() - t0) * 1000)
            print(summary("pass, one file got a new turn", one))


async def bench_import(files: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-import-") as tmp:
        agent, _size = make_agent(Path(tmp), files)
        data = agent / "memory-bridge"
        with Outbox.open(data) as box:
            store = LocalBackend(data)
            try:
                known = known_ids_via(box, lambda: store)
                t0 = time.perf_counter()
                plan = await plan_import(agent, ImportScope(), known, None)
                t1 = time.perf_counter()

                async def submit(turns: Sequence[ConversationTurn]) -> int:
                    return await asyncio.to_thread(box.enqueue, list(turns), possibly_sent=True)

                result = await run_import(plan, state=None, known_ids=known, submit=submit)
                t2 = time.perf_counter()
                report = await DeliveryWorker(box, store).flush()
                t3 = time.perf_counter()
            finally:
                await store.close()
        print(
            f"import of {files} files, {result.queued} turns: preview {(t1 - t0) * 1000:.0f} ms, "
            f"queue {(t2 - t1) * 1000:.0f} ms ({result.queued / max(t2 - t1, 1e-9):.0f} turns/s), "
            f"deliver {(t3 - t2) * 1000:.0f} ms ({report.delivered} stored)"
        )


async def bench_recall_during_pass(files: int, rounds: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-recall-") as tmp:
        agent, _size = make_agent(Path(tmp), files)
        data = agent / "memory-bridge"
        store = LocalBackend(data)
        budget = RecallBudget(
            deadline_ms=3000,
            max_chars=12_000,
            limits={Layer.L3: 1, Layer.L1: 6, Layer.L2: 2, Layer.L0: 4, Layer.SKILL: 5},
        )
        try:
            with Outbox.open(data) as box:  # a few hundred turns to recall from
                seed = CatchUpRunner(agent_dir=agent, data_dir=data, outbox=box)
                await full_passes(seed)
                await DeliveryWorker(box, store).flush()
            alone: list[float] = []
            during: list[float] = []
            for n in range(rounds):
                t0 = time.perf_counter()
                await recall(store, "how did the steered answer go", budget)
                alone.append((time.perf_counter() - t0) * 1000)
                fresh = Path(tmp) / f"round-{n}"
                shutil.rmtree(fresh, ignore_errors=True)
                fresh.mkdir()
                box = Outbox.open(fresh)
                (fresh / SINCE_FILENAME).write_text("1000000000000\n", encoding="ascii")
                runner = CatchUpRunner(agent_dir=agent, data_dir=fresh, outbox=box)
                passing = asyncio.create_task(runner.run_pass())
                await asyncio.sleep(0.005)  # the pass is reading in its thread now
                t0 = time.perf_counter()
                await recall(store, "how did the steered answer go", budget)
                during.append((time.perf_counter() - t0) * 1000)
                await passing
                box.close()
            print(summary("recall alone", alone))
            print(summary(f"recall while a first pass reads {files} files", during))
            cost = statistics.median(during) - statistics.median(alone)
            print(f"median cost of the pass to recall: {cost:+.2f} ms")
        finally:
            await store.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    bytecode = "without bytecode" if sys.dont_write_bytecode else "with bytecode"
    print(f"Python {sys.version.split()[0]}, {bytecode}")
    asyncio.run(bench_passes(args.files))
    asyncio.run(bench_import(args.files))
    asyncio.run(bench_recall_during_pass(args.files, args.rounds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
