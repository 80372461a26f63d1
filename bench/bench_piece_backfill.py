"""Backfill throughput and store size with real vectors, this checkout beside a baseline.

    .venv/bin/python bench/bench_piece_backfill.py [--turns 600] [--rounds 2]
        [--baseline-python /work/main/.venv/bin/python]

Each round, in a fresh process of each Python in turn (interleaved, so both see the same load),
stores --turns turns in a new store, a fifth of them long (an answer of ~2,500 characters, as
coding answers are), and lets the vector worker embed them all (`worker.drain`: throttled as in
the sidecar, it rests as long as it works). Prints turns/s, vectors/s and the store's size per
1k turns (the SQLite files: text, FTS, vectors).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent


def child(turns: int) -> None:
    sys.path.insert(0, str(HERE))
    from bench_local_store import SEED, SyntheticCorpus
    from pi_memory_bridge.backends.base import ConversationTurn
    from pi_memory_bridge.backends.local import LocalBackend
    from pi_memory_bridge.embeddings import ModelHandle, load_use
    from pi_memory_bridge.embeddings.cache_dir import default_cache_root

    handle = ModelHandle(lambda: load_use(default_cache_root(os.environ)))
    encoder = handle.wait(600)
    assert encoder is not None
    corpus = SyntheticCorpus(SEED)
    batch = corpus.turns(turns, datetime(2026, 1, 1, tzinfo=UTC))
    for i in range(0, len(batch), 5):  # a fifth are long answers
        t = batch[i]
        long = "\n\n".join(corpus.text(30, 60) for _ in range(8))
        batch[i] = ConversationTurn(t.turn_id, t.memory_session_id, t.user_text, long, t.created_at)
    with tempfile.TemporaryDirectory() as tmp:
        backend = LocalBackend(Path(tmp), embeddings=handle)
        backend.store.conversation.add(batch)
        assert backend.semantic is not None
        started = time.perf_counter()
        done = backend.semantic.worker.drain(encoder)
        elapsed = time.perf_counter() - started
        with backend.store.reading("counting") as conn:
            vectors = int(conn.execute("SELECT count(*) FROM turn_vectors").fetchone()[0])
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        size = sum(p.stat().st_size for p in Path(tmp).glob("*.sqlite3*"))
        import asyncio

        asyncio.run(backend.close())
    print(json.dumps({"turns": done, "vectors": vectors, "seconds": elapsed, "bytes": size}))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=600)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--baseline-python")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a.turns)
        return
    runs = [("this checkout", str(REPO / ".venv" / "bin" / "python"))]
    if a.baseline_python:
        runs.append(("baseline", a.baseline_python))
    for i in range(a.rounds):
        for name, python in runs if i % 2 == 0 else runs[::-1]:
            out = subprocess.run(
                [python, str(Path(__file__).resolve()), "--child", "--turns", str(a.turns)],
                stdout=subprocess.PIPE,
                text=True,
                check=True,
            )
            r = json.loads(out.stdout.strip().splitlines()[-1])
            load = " ".join(f"{x:.1f}" for x in os.getloadavg())
            print(
                f"round {i + 1}, {name:<13} (load {load}): {r['turns'] / r['seconds']:6.1f} turns/s, "
                f"{r['vectors'] / r['seconds']:6.1f} vectors/s ({r['vectors'] / r['turns']:.2f} a turn), "
                f"store {r['bytes'] / 1e6 * 1000 / r['turns']:.2f} MB per 1k turns"
            )


if __name__ == "__main__":
    main()
