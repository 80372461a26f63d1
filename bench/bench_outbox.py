"""Durable enqueue latency and delivery throughput of the capture outbox.

    .venv/bin/python bench/bench_outbox.py [--enqueues 1000] [--turns 2000] [--dir PATH]

Enqueue: one turn per call (what `turn/settled` does), each fsynced (WAL, synchronous=FULL)
before returning; timed through `Outbox.enqueue` directly, through `OutboxSink.submit` (the
async path with its thread hop), and through the sink while a worker drains into the local
store in the same process. Delivery: `--turns` queued turns over 8 memory sessions drained by
one `DeliveryWorker` into a real `LocalBackend` in the same data dir, with the default batch
size, with batches of one, and into a backend that does nothing (the outbox's own cost).
Runs in a temporary directory on the file system of `--dir` (default: the system temp dir);
fsync cost depends on that disk. Figures, not pass/fail.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

from _stats import summary
from pi_memory_bridge.backends.base import Capability, ConversationTurn, MemoryBackend
from pi_memory_bridge.backends.local import LocalBackend
from pi_memory_bridge.outbox import DEFAULT_BATCH_SIZE, DeliveryWorker, Outbox, OutboxSink

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
SESSIONS = 8
ENQUEUE_TARGET = "target p99 <= 20 ms"
THROUGHPUT_TARGET = 500.0


def make_turn(prefix: str, n: int) -> ConversationTurn:
    session = f"bench-session-{n % SESSIONS}"
    return ConversationTurn(
        turn_id=f"{prefix}-{n:07d}",
        memory_session_id=session,
        user_text=f"turn {n}: why does the retry loop in worker.go spin when the queue is empty? " * 4,
        assistant_text=(
            f"Answer {n}: the select has a default branch, so it never blocks; remove it and wait "
            "on the ticker channel instead. 修复：去掉 default 分支，等待 ticker。 "
        )
        * 10,
        created_at=T0 + timedelta(seconds=n),
        pi_session_id="pi-bench",
    )


class NullBackend:
    """Accepts everything at once: what is left is the outbox's own bookkeeping."""

    name = "null"
    capabilities = frozenset({Capability.L0_ADD})

    @property
    def conversation(self) -> NullBackend:
        return self  # a conversation-only backend: the part is the fake itself

    async def add(self, turns: Sequence[ConversationTurn], *, first_attempt: bool = False) -> None:
        return None

    async def stored_ids(self, turn_ids: Sequence[str]) -> set[str]:
        return set()


def bench_enqueue_direct(root: Path, count: int) -> list[float]:
    with Outbox.open(root) as outbox:
        timings = []
        for n in range(count):
            turn = make_turn("direct", n)
            started = time.perf_counter()
            outbox.enqueue([turn])
            timings.append((time.perf_counter() - started) * 1000)
        return timings


async def bench_enqueue_sink(root: Path, count: int, *, draining: bool) -> list[float]:
    prefix = "sink-draining" if draining else "sink"
    with Outbox.open(root) as outbox:
        local = LocalBackend(root)
        worker = DeliveryWorker(outbox, local)
        sink = OutboxSink(outbox, on_enqueued=worker.wake if draining else None)
        if draining:
            worker.start()
        timings = []
        try:
            for n in range(count):
                turn = make_turn(prefix, n)
                started = time.perf_counter()
                await sink.submit([turn])
                timings.append((time.perf_counter() - started) * 1000)
        finally:
            await worker.stop(drain_s=30.0 if draining else 0.0)
            await local.close()
        return timings


async def bench_delivery(root: Path, count: int, *, batch_size: int, into: str) -> tuple[float, int]:
    """Seconds to deliver `count` queued turns, and how many were delivered."""
    with Outbox.open(root) as outbox:
        outbox.enqueue([make_turn(f"deliver-{into}-{batch_size}", n) for n in range(count)])
        local = LocalBackend(root) if into == "local" else None
        backend: MemoryBackend = local if local is not None else NullBackend()  # type: ignore[assignment]
        worker = DeliveryWorker(outbox, backend, batch_size=batch_size)
        try:
            started = time.perf_counter()
            report = await worker.deliver_due()
            elapsed = time.perf_counter() - started
        finally:
            if local is not None:
                await local.close()
        if report.counts.waiting:
            raise SystemExit(f"delivery left {report.counts.waiting} turns waiting: {report.errors}")
        return elapsed, report.delivered


async def run(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="bench-outbox-") as tmp:
        base = Path(tmp)
        print(f"outbox bench in {base} (python {sys.version.split()[0]})")
        print()
        print("durable enqueue, one turn per call (fsynced before returning):")
        direct = bench_enqueue_direct(base / "direct", args.enqueues)
        print(summary("Outbox.enqueue", direct, ENQUEUE_TARGET))
        sink = await bench_enqueue_sink(base / "sink", args.enqueues, draining=False)
        print(summary("OutboxSink.submit", sink, ENQUEUE_TARGET))
        busy = await bench_enqueue_sink(base / "busy", args.enqueues, draining=True)
        print(summary("OutboxSink.submit while a worker delivers", busy, ENQUEUE_TARGET))
        print()
        print(f"delivery of {args.turns} queued turns ({SESSIONS} sessions, one worker):")
        for into, batch_size in (("local", DEFAULT_BATCH_SIZE), ("local", 1), ("null", DEFAULT_BATCH_SIZE)):
            root = base / f"deliver-{into}-{batch_size}"
            elapsed, delivered = await bench_delivery(root, args.turns, batch_size=batch_size, into=into)
            rate = delivered / elapsed
            default = into == "local" and batch_size == DEFAULT_BATCH_SIZE
            target = f"  [target >= {THROUGHPUT_TARGET:.0f} turns/s]" if default else "  [for comparison]"
            print(
                f"{'into ' + into + f' store, batches of {batch_size}':<44} {delivered} turns in "
                f"{elapsed:6.2f} s = {rate:8.0f} turns/s{target}"
            )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--enqueues", type=int, default=1000)
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--dir", default=None, help="where to make the temporary data dirs")
    asyncio.run(run(parser.parse_args(argv)))


if __name__ == "__main__":
    main()
