"""Backfill throughput: how fast the rows of an import get their vectors, before and after.

    .venv/bin/python -B bench/bench_backfill.py [--turns 600] [--rounds 3]

Figures, not pass/fail. Each round embeds the same synthetic turns (bench_local_store's corpus)
into a fresh store, both ways side by side with the same loaded model:

  before  the vector worker's drain, the only way rows got vectors: throttled (it rests as long
          as each batch took, so recall in the same process stays fast), and only while a Pi's
          connection lived (the background sidecar closed the store with it);
  after   `pi-memory-bridge import`'s own pass (`LocalBackend.embed_missing`): the same batches
          without rest, in the command the user waits for; what it leaves (another process holds
          the lock, the model is off) the background sidecar's worker embeds, throttled as before
          but until its idle exit rather than until the Pi leaves.

Wall time, rows/s, and the process's CPU over wall time (1.0 = one core).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_local_store import SEED, SyntheticCorpus  # noqa: E402
from pi_memory_bridge.backends.local import LocalBackend  # noqa: E402
from pi_memory_bridge.embeddings import ModelHandle, load_use  # noqa: E402
from pi_memory_bridge.embeddings.cache_dir import default_cache_root  # noqa: E402


def _store(root: Path, handle: ModelHandle, corpus: SyntheticCorpus, turns: int) -> LocalBackend:
    backend = LocalBackend(root, embeddings=handle)
    backend.store.conversation.add(corpus.turns(turns, datetime(2026, 1, 1, tzinfo=UTC)))
    return backend


def _before(backend: LocalBackend, handle: ModelHandle) -> int:
    assert backend.semantic is not None
    encoder = handle.wait(600)
    assert encoder is not None
    return backend.semantic.worker.drain(encoder)


def _after(backend: LocalBackend, handle: ModelHandle) -> int:
    report = backend.embed_missing(600, threading.Event(), lambda _done, _left: None)
    assert report is not None and report.left == 0, report
    return report.embedded


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=600)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    handle = ModelHandle(lambda: load_use(default_cache_root({})))
    assert handle.wait(600) is not None, handle.reason
    figures: dict[str, list[tuple[float, float, int]]] = {"before": [], "after": []}
    ways = (("before", _before), ("after", _after))
    with tempfile.TemporaryDirectory() as tmp:
        for round_no in range(args.rounds):
            order = ways if round_no % 2 == 0 else ways[::-1]  # neither always runs on a warmer machine
            for name, embed in order:
                corpus = SyntheticCorpus(SEED)
                backend = _store(Path(tmp) / f"{name}-{round_no}", handle, corpus, args.turns)
                started, cpu = time.perf_counter(), time.process_time()
                done = embed(backend, handle)
                wall, spent = time.perf_counter() - started, time.process_time() - cpu
                asyncio.run(backend.close())
                assert done == args.turns, (name, done)
                figures[name].append((wall, spent, done))
    print(f"== backfill of {args.turns} turns, {args.rounds} rounds (median; each round a fresh store)")
    labels = {
        "before": "worker drain, throttled (only while a Pi lived)",
        "after": "import's embed_missing, unthrottled",
    }
    for name, rows in figures.items():
        wall = statistics.median(r[0] for r in rows)
        cpu = statistics.median(r[1] / r[0] for r in rows)
        rate = args.turns / wall
        print(f"  {name:<7} {labels[name]:<50} {rate:7.0f} turns/s  {wall:6.2f} s  CPU {cpu:.2f}")


if __name__ == "__main__":
    main()
