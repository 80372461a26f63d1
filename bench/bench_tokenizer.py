"""The bundled model's tokenizer: the pure-Python one restored from our cache (what runs now)
against the `sentencepiece` package reading the wheel's own `sp.model` (hash-checked), each in a
fresh process, side by side. Prints the load and encode figures and whether the token ids agree.

    .venv/bin/python bench/bench_tokenizer.py [--runs 5]

Needs `pip install sentencepiece` (not a dependency: this bench decides whether it becomes one)
and a built model cache (any test run or `pi-memory-bridge` start leaves one).

"load" for the current tokenizer is its tables' unmarshalling only (the mapped prefix table and
its hash check are not counted, which favours it); for sentencepiece it is the import, reading
and hashing `sp.model`, and parsing it. "first pass" encodes the corpus once on a fresh tokenizer
(the current one on its mapped prefix table, as a recall does); "bulk pass" after
`prepare_bulk` (the current one's dict, ~0.2 s to build, counted in "bulk prep").
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from ordinary_corpus import ordinary_samples  # noqa: E402

CLIP = 1200  # use_model.MAX_EMBED_CHARS


def corpus() -> list[str]:
    # no empty text: the encoder never tokenizes one (an empty text gets a zero vector), and there
    # the two differ ([bos, eos] from sentencepiece, [bos, unk, eos] from the pure one)
    texts = [text for _, text in ordinary_samples() if text.strip()]
    long = " ".join(texts)
    return [t[:CLIP] for t in texts] + [long[i : i + CLIP] for i in range(0, len(long) - CLIP, CLIP)]


def _ids_digest(all_ids: list[list[int]]) -> str:
    return hashlib.sha256(json.dumps(all_ids).encode()).hexdigest()[:16]


def child_current() -> dict[str, object]:
    started = time.perf_counter()
    from pi_memory_bridge.embeddings import bundle, cache, use_model
    from pi_memory_bridge.embeddings.cache_check import MANIFEST, cache_key
    from pi_memory_bridge.embeddings.cache_dir import default_cache_root

    files = bundle.locate()
    root = default_cache_root(os.environ)
    directory = root / cache_key(files)
    digest = json.loads((directory / MANIFEST).read_text())["files"][cache.TOKENIZER_FILE]
    imported = time.perf_counter()
    cache._read_tokenizer(directory, digest)  # the tokenizer's share of a start
    tables_ms = (time.perf_counter() - imported) * 1000
    encoder = use_model.restore(cache.load(root, files))
    tokenizer = encoder._backend.sp
    texts = corpus()
    t0 = time.perf_counter()
    first = [tokenizer.encode(t, out_type=int, add_bos=True, add_eos=True) for t in texts]
    first_ms = (time.perf_counter() - t0) * 1000
    t0 = time.perf_counter()
    encoder.prepare_bulk()
    prep_ms = (time.perf_counter() - t0) * 1000
    t0 = time.perf_counter()
    bulk = [tokenizer.encode(t, out_type=int, add_bos=True, add_eos=True) for t in texts]
    bulk_ms = (time.perf_counter() - t0) * 1000
    assert bulk == first
    return {
        "imports_ms": (imported - started) * 1000,
        "load_ms": tables_ms,
        "first_ms": first_ms,
        "prep_ms": prep_ms,
        "bulk_ms": bulk_ms,
        "ids": _ids_digest(first),
        "tokens": sum(map(len, first)),
    }


def child_sentencepiece() -> dict[str, object]:
    started = time.perf_counter()
    from pi_memory_bridge.embeddings import bundle

    files = bundle.unchecked_files()
    assert files is not None
    imported = time.perf_counter()
    import sentencepiece

    data = files.tokenizer.read_bytes()
    if hashlib.sha256(data).hexdigest() != bundle.RESOURCE_SHA256["sp.model"]:
        raise SystemExit("sp.model does not match its pinned SHA-256")
    tokenizer = sentencepiece.SentencePieceProcessor(model_proto=data)
    load_ms = (time.perf_counter() - imported) * 1000
    texts = corpus()
    t0 = time.perf_counter()
    first = [tokenizer.encode(t, out_type=int, add_bos=True, add_eos=True) for t in texts]
    first_ms = (time.perf_counter() - t0) * 1000
    return {
        "imports_ms": (imported - started) * 1000,
        "load_ms": load_ms,
        "first_ms": first_ms,
        "prep_ms": 0.0,
        "bulk_ms": first_ms,
        "ids": _ids_digest(first),
        "tokens": sum(map(len, first)),
    }


def run_child(variant: str) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", variant], capture_output=True, text=True, check=True
    ).stdout
    result: dict[str, object] = json.loads(out.strip().splitlines()[-1])
    return result


def main(runs: int) -> int:
    texts = corpus()
    print(f"corpus: {len(texts)} texts, {sum(map(len, texts))} characters; {runs} fresh processes each")
    rows = {v: [run_child(v) for _ in range(runs)] for v in ("current", "sentencepiece")}
    print(
        f"{'variant':<14} {'load ms':>8} {'first pass ms':>14} {'bulk prep ms':>13} "
        f"{'bulk pass ms':>13} {'ids':>17}"
    )
    for variant, results in rows.items():

        def med(key: str, results: list[dict[str, object]] = results) -> float:
            return statistics.median(float(str(r[key])) for r in results)

        ids = {str(r["ids"]) for r in results}
        print(
            f"{variant:<14} {med('load_ms'):>8.1f} {med('first_ms'):>14.1f} {med('prep_ms'):>13.1f} "
            f"{med('bulk_ms'):>13.1f} {','.join(ids):>17}"
        )
    same = {str(r["ids"]) for results in rows.values() for r in results}
    print("token ids: identical" if len(same) == 1 else "token ids: DIFFER")
    return 0 if len(same) == 1 else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--child", choices=["current", "sentencepiece"])
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child_current() if args.child == "current" else child_sentencepiece()))
        raise SystemExit(0)
    raise SystemExit(main(args.runs))
