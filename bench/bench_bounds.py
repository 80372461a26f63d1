"""The time bounds the unit tests used to assert, measured here instead (speed is measured in
bench/, never asserted in unit tests): each case prints its figures beside the bound it should stay
within, and exits 1 if one is over (rerun on a quiet machine before believing it).

    .venv/bin/python bench/bench_bounds.py [--runs 5]

Cases: recall with hanging layers against its deadline; layers in parallel (two 200 ms layers);
recall of a one-megabyte prompt; query terms of a one-megabyte query; a one-megabyte query on the
local store; redaction of one-megabyte adversarial inputs; a locked local store giving up after
its busy timeout; the vector worker's wait for a recall's search (how late it goes once the search
ends, and its first wait without any recall); the learning save timer's bound on a burst of saves
(the unit tests check these bounds on a virtual clock).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
from fake_backend import FakeBackend, mem, turn  # noqa: E402
from pi_memory_bridge.backends.base import BackendUnavailable, ConversationTurn  # noqa: E402
from pi_memory_bridge.backends.local import LocalBackend  # noqa: E402
from pi_memory_bridge.backends.local.backend import DB_FILENAME  # noqa: E402
from pi_memory_bridge.backends.local.search_activity import FIRST_WAIT_S, SearchActivity  # noqa: E402
from pi_memory_bridge.learning.scheduler import JobScheduler  # noqa: E402
from pi_memory_bridge.recall import RecallBudget, recall  # noqa: E402
from pi_memory_bridge.redact import redact_text  # noqa: E402
from pi_memory_bridge.textsearch import query_terms  # noqa: E402

PROMPT = "how do we deploy the billing service with the pipeline?"


def budget(deadline_ms: int = 3000) -> RecallBudget:
    return RecallBudget(deadline_ms=deadline_ms)


async def hanging_layers() -> None:
    b = FakeBackend()
    b.atomic = [mem("prefers tabs")]
    b.hang = {"search_conversation", "read_profile"}
    await recall(b, PROMPT, budget(deadline_ms=300))


async def parallel_layers() -> None:
    class Slow(FakeBackend):
        async def search_atomic(self, query: str, limit: int, type: str | None = None) -> list[object]:
            await asyncio.sleep(0.2)
            return [mem("a")]

        async def search_conversation(self, query: str, limit: int) -> list[object]:
            await asyncio.sleep(0.2)
            return []

    await recall(Slow(), PROMPT, budget())


async def huge_prompt() -> None:
    await recall(FakeBackend(), "word " * 200_000, budget())


async def huge_terms() -> None:
    query_terms("parse the config and retry the 数据库 query " * 25_000)


async def redact_adversarial() -> None:
    for text in ("a" * 1_000_000, "sk-" * 333_333, "=" * 1_000_000, "密码：a1 " * 170_000):
        redact_text(text)


class _Store:
    def __init__(self) -> None:
        self.dir = tempfile.TemporaryDirectory()
        self.backend = LocalBackend(Path(self.dir.name))


async def huge_local_query(store: _Store) -> None:
    await store.backend.conversation.search("parse the config and retry the 数据库 query " * 25_000, 4)


_HOLDER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
sys.stdin.read()
"""


async def locked_store_gives_up() -> float:
    with tempfile.TemporaryDirectory() as d:
        backend = LocalBackend(Path(d), busy_timeout_ms=300)
        holder = subprocess.Popen(  # noqa: ASYNC220 - a lock holder must be another process
            [sys.executable, "-c", _HOLDER, str(Path(d) / DB_FILENAME)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
            started = time.perf_counter()
            with contextlib.suppress(BackendUnavailable):
                await backend.conversation.add([turn("t2", "blocked")])
            return time.perf_counter() - started
        finally:
            assert holder.stdin is not None
            holder.stdin.close()
            holder.wait(10)
            await backend.close()


def worker_late_after_search() -> float:
    """How long after a recall's search ended the waiting vector worker goes on."""
    activity = SearchActivity()
    with activity.searching():
        pass
    ended: list[float] = []
    entered = threading.Event()

    def search() -> None:
        with activity.searching():
            entered.set()
            time.sleep(0.3)
            ended.append(time.perf_counter())

    thread = threading.Thread(target=search)
    thread.start()
    entered.wait(5)
    activity.wait_turn(threading.Event())
    went = time.perf_counter()
    thread.join()
    return went - ended[0]


def worker_first_wait() -> float:
    activity = SearchActivity()
    started = time.perf_counter()
    activity.wait_turn(threading.Event())
    return time.perf_counter() - started


async def save_burst_run_at() -> float:
    """When a burst of four saves 0.1 s apart (debounce 0.2 s, bound 0.35 s) gets its run."""
    loop = asyncio.get_running_loop()
    runs: list[float] = []

    async def run() -> None:
        runs.append(loop.time())

    scheduler = JobScheduler(run, idle_s=5.0, every_turns=100)
    start = loop.time()
    for _ in range(4):
        scheduler.soon(0.2, within_s=0.35)
        await asyncio.sleep(0.1)
    await asyncio.sleep(0.3)
    await scheduler.idle()
    await scheduler.close()
    return runs[0] - start


def _ranged(name: str, low: float, high: float, figures: list[float]) -> int:
    worst = max(figures, key=lambda f: max(low - f, f - high))
    flag = "" if all(low <= f <= high for f in figures) else "  OVER"
    bound = f"{low:g}-{high:g}"
    print(f"{name:<46} {bound:>8} {statistics.median(figures):>9.3f} {worst:>8.3f}{flag}")
    return 1 if flag else 0


async def timed(work: Callable[[], Awaitable[object]], runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        started = time.perf_counter()
        await work()
        out.append(time.perf_counter() - started)
    return out


async def main(runs: int) -> int:
    store = _Store()
    seeded = ConversationTurn("t", "s-main", "parse the config and retry the query", "ok", datetime.now(UTC))
    await store.backend.conversation.add([seeded])
    cases: list[tuple[str, float, Callable[[], Awaitable[object]]]] = [
        ("recall, two layers hang, deadline 300 ms", 0.55, hanging_layers),
        ("recall, two 200 ms layers in parallel", 0.35, parallel_layers),
        ("recall of a 1 MB prompt", 1.0, huge_prompt),
        ("query terms of a 1 MB query", 0.5, huge_terms),
        ("local store, a 1 MB query", 1.0, lambda: huge_local_query(store)),
        ("redaction of four 1 MB adversarial inputs", 20.0, redact_adversarial),
    ]
    over = 0
    print(f"{'case':<46} {'bound s':>8} {'median s':>9} {'max s':>8}")
    for name, bound, work in cases:
        figures = await timed(work, runs)
        worst = max(figures)
        over += worst > bound
        flag = "" if worst <= bound else "  OVER"
        print(f"{name:<46} {bound:>8.2f} {statistics.median(figures):>9.3f} {worst:>8.3f}{flag}")
    waited = await locked_store_gives_up()
    print(f"{'locked store gives up (busy timeout 0.3 s)':<46} {'0.25-5':>8} {waited:>9.3f} {waited:>8.3f}")
    over += not (0.25 < waited < 5)
    over += _ranged(
        "vector worker goes after the search ends",
        0.0,
        0.1,
        [worker_late_after_search() for _ in range(runs)],
    )
    over += _ranged(
        f"vector worker's first wait, no recall ({FIRST_WAIT_S:g} s)",
        FIRST_WAIT_S,
        FIRST_WAIT_S + 0.1,
        [worker_first_wait() for _ in range(min(runs, 2))],
    )
    over += _ranged(
        "save timer: a 4-save burst's run (bound 0.35 s)",
        0.35,
        0.45,
        [await save_burst_run_at() for _ in range(runs)],
    )
    await store.backend.close()
    store.dir.cleanup()
    return 1 if over else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    raise SystemExit(asyncio.run(main(parser.parse_args().runs)))
