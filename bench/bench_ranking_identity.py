"""Whether this checkout ranks exactly as a baseline does: item for item, score for score.

    .venv/bin/python bench/bench_ranking_identity.py --baseline-python OTHER/.venv/bin/python
        [--store DIR] [--queries 200]

For changes to the search's hot path that must not change what it returns. Each Python opens
the same store in a fresh process and runs every query through the backend's L1 (top 6) and L0
(top 4) search with the model loaded; the two outputs are compared result by result (ids and
the scores as returned). The stores:

  * labelled: tests/data/search_quality's turns and bench/memory_set's sessions and memories,
    every vector computed with the bundled model (built here into a temporary directory), asked
    the labelled queries of both sets;
  * with --store, a bench_warm_recall store (100k synthetic turns + 5k memories), asked
    --queries of its synthetic queries.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
QUALITY = REPO / "tests" / "data" / "search_quality"
MEMORY_SET = HERE / "memory_set"
NOW = datetime(2026, 6, 1, tzinfo=UTC)


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _memory_set(name: str) -> Any:
    return json.loads((MEMORY_SET / name).read_text(encoding="utf-8"))


def labelled_queries() -> list[str]:
    asked = [str(q["query"]) for q in _jsonl(QUALITY / "queries.jsonl")]
    return asked + [str(c["query"]) for c in _memory_set("cases.json")["cases"]]


def build_labelled(root: Path) -> None:
    from pi_memory_bridge.backends.base import ConversationTurn
    from pi_memory_bridge.backends.local import LocalBackend
    from pi_memory_bridge.embeddings import ModelHandle, load_use
    from pi_memory_bridge.embeddings.cache_dir import default_cache_root

    handle = ModelHandle(lambda: load_use(default_cache_root(os.environ)))
    backend = LocalBackend(root, embeddings=handle)
    turns = [
        ConversationTurn(t["id"], t["session"], t["user"], t["assistant"], NOW)
        for t in _jsonl(QUALITY / "turns.jsonl")
    ]
    for session in _memory_set("sessions.json")["sessions"]:
        at = datetime.fromisoformat(session["at"])
        turns += [
            ConversationTurn(t["id"], session["id"], t["user"], t["assistant"], at) for t in session["turns"]
        ]
    backend.store.conversation.add(turns)
    for memory in _memory_set("memories.json")["memories"]:
        backend.store.memories.save(memory["content"], memory["type"], "bench")
    encoder = handle.wait(600)
    assert encoder is not None and backend.semantic is not None
    backend.semantic.worker.drain(encoder)
    asyncio.run(backend.close())


def child(root: Path, queries: list[str]) -> None:
    """Every query's L1 and L0 results in this process (prints JSON)."""
    from pi_memory_bridge.backends.local import LocalBackend
    from pi_memory_bridge.embeddings import ModelHandle, load_use
    from pi_memory_bridge.embeddings.cache_dir import default_cache_root

    handle = ModelHandle(lambda: load_use(default_cache_root(os.environ)))
    backend = LocalBackend(root, embeddings=handle)
    handle.start()
    assert handle.wait(600) is not None

    async def both(query: str) -> list[list[tuple[str, float]]]:
        l1 = await backend.memories.search(query, 6)
        l0 = await backend.conversation.search(query, 4)
        return [[(m.id, m.score) for m in l1], [(h.turn_id, h.score) for h in l0]]

    results = [asyncio.run(both(q)) for q in queries]
    asyncio.run(backend.close())
    print(json.dumps(results))


def run(python: str, root: Path, queries: list[str], queries_file: Path) -> list[Any]:
    out = subprocess.run(
        [
            python,
            str(Path(__file__).resolve()),
            "--child",
            "--store",
            str(root),
            "--queries-file",
            str(queries_file),
        ],
        stdout=subprocess.PIPE,
        text=True,
        check=True,
    )
    data: list[Any] = json.loads(out.stdout.strip().splitlines()[-1])
    assert len(data) == len(queries)
    return data


def compare(name: str, root: Path, queries: list[str], baseline: str, tmp: Path) -> None:
    queries_file = tmp / f"{name}-queries.json"
    queries_file.write_text(json.dumps(queries), encoding="utf-8")
    here = run(str(REPO / ".venv" / "bin" / "python"), root, queries, queries_file)
    other = run(baseline, root, queries, queries_file)
    differ = [(q, a, b) for q, a, b in zip(queries, here, other, strict=True) if a != b]
    returned = sum(len(l1) + len(l0) for l1, l0 in here)
    print(f"  {name}: {len(queries)} queries, {returned} results; differing queries: {len(differ)}")
    for query, a, b in differ[:5]:
        print(f"    {query!r}\n      this checkout {a}\n      baseline      {b}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline-python", help="another install's python (required)")
    ap.add_argument("--store", type=Path, help="also a bench_warm_recall store")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--queries-file", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a.store, json.loads(a.queries_file.read_text(encoding="utf-8")))
        return
    if a.baseline_python is None:
        ap.error("--baseline-python is required")
    print("== rankings of this checkout beside the baseline")
    with tempfile.TemporaryDirectory(prefix="bench-identity-") as temp:
        tmp = Path(temp)
        labelled = tmp / "labelled"
        build_labelled(labelled)
        compare("labelled", labelled, labelled_queries(), a.baseline_python, tmp)
        if a.store is not None:
            sys.path.insert(0, str(HERE))
            from bench_warm_recall import _queries

            compare("bench_warm_recall store", a.store, _queries(a.queries), a.baseline_python, tmp)


if __name__ == "__main__":
    main()
