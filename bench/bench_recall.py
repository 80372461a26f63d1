"""Whole-recall latency on the local backend at 1k, 10k and 100k stored turns.

    .venv/bin/python bench/bench_recall.py [--sizes 1000,10000,100000] [--queries 200]

Two views of the same recall:
  * sidecar side: the recall engine in-process (all layers in parallel, budget, rendering);
  * shim side: what the extension waits for, a `recall` request over stdio to a real
    `pi-memory-bridge serve` process, JSON framing and validation included.
Targets (issue 3): p99 <= 30 ms at 100k turns; from 10k to 100k the p99 grows at most 2x.
The store is generated (deterministic synthetic EN/ZH turns, L1 memories, L2 notes, a profile).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _stats import pct, summary  # noqa: E402
from bench_local_store import SEED, SyntheticCorpus  # noqa: E402
from pi_memory_bridge.backends.local import LocalBackend  # noqa: E402
from pi_memory_bridge.recall import RecallBudget, recall  # noqa: E402

REPO = HERE.parent
EXE = REPO / ".venv" / "bin" / "pi-memory-bridge"
BATCH = 2000


def build_store(root: Path, size: int, corpus: SyntheticCorpus) -> None:
    backend = LocalBackend(root)
    turns = corpus.turns(size, datetime(2026, 1, 1, tzinfo=UTC))
    for start in range(0, len(turns), BATCH):
        backend.store.conversation.add(turns[start : start + BATCH])
    for i in range(300):
        backend.store.memories.save(corpus.text(5, 20), ("fact", "preference", "constraint")[i % 3], "bench")
    for i in range(40):
        note = f"---\nsummary: {corpus.text(4, 10)}\n---\n{corpus.text(40, 120)}\n"
        backend.notes.write_scenario(f"topic-{i}.md", note)
    backend.notes.write_profile("# Profile\n" + corpus.text(30, 60))
    asyncio.run(backend.close())


async def sidecar_side(root: Path, queries: list[str]) -> list[float]:
    backend = LocalBackend(root)
    budget = RecallBudget()
    for q in queries[:20]:
        await recall(backend, q, budget)
    out: list[float] = []
    for q in queries:
        started = time.perf_counter()
        result = await recall(backend, q, budget)
        out.append((time.perf_counter() - started) * 1000)
        assert result.outcome in ("recalled", "empty"), result
    await backend.close()
    return out


def shim_side(agent_dir: Path, queries: list[str]) -> list[float]:
    env = {**os.environ, "PI_CODING_AGENT_DIR": str(agent_dir), "HOME": str(agent_dir.parent)}
    proc = subprocess.Popen([str(EXE), "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    assert proc.stdin and proc.stdout

    def call(i: int, method: str, params: dict[str, object]) -> dict[str, object]:
        assert proc.stdin and proc.stdout
        msg = {"jsonrpc": "2.0", "id": i, "method": method, "params": params}
        proc.stdin.write(json.dumps(msg).encode() + b"\n")
        proc.stdin.flush()
        while True:  # skip notifications (status/changed) until the answer comes
            reply: dict[str, object] = json.loads(proc.stdout.readline())
            if "id" in reply:
                return reply

    call(0, "initialize", {"protocolVersion": "1.0", "client": {"name": "bench", "version": "0"}, "cwd": "/"})
    out: list[float] = []
    for i, q in enumerate(queries[:20] + queries):
        started = time.perf_counter()
        reply = call(i + 1, "recall", {"piSessionId": "bench", "prompt": q})
        if i >= 20:
            out.append((time.perf_counter() - started) * 1000)
        assert "result" in reply, reply
    proc.stdin.close()
    proc.wait(10)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--queries", type=int, default=200)
    a = ap.parse_args()
    p99: dict[int, float] = {}
    for size in (int(s) for s in a.sizes.split(",")):
        corpus = SyntheticCorpus(SEED)
        with tempfile.TemporaryDirectory(prefix="bench-recall-") as tmp:
            agent = Path(tmp) / "home" / ".pi" / "agent"
            root = agent / "memory-bridge"
            started = time.perf_counter()
            build_store(root, size, corpus)
            built = time.perf_counter() - started
            rng = random.Random(size)
            queries = [corpus.query() for _ in range(a.queries)]
            rng.shuffle(queries)
            side = asyncio.run(sidecar_side(root, queries))
            shim = shim_side(agent, queries)
        print(f"== {size:,} turns (built in {built:.1f} s)")
        print(summary("  recall, sidecar side (engine, all layers)", side))
        print(summary("  recall, shim side (request over stdio)", shim, "target: p99 <= 30 ms at 100k"))
        p99[size] = pct(shim, 99)
    if 10000 in p99 and 100000 in p99:
        print(f"p99 growth 10k -> 100k (shim side): {p99[100000] / p99[10000]:.2f}x  [target: <= 2x]")


if __name__ == "__main__":
    main()
