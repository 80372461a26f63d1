"""Recall of long prompts: the labelled questions after pasted logs and code (issue 23, Build 2).

    .venv/bin/python bench/bench_long_prompts.py [--split dev|test|all] [--show N]

People paste a log or a file and ask at its end. This loads bench/memory_set the way
bench_memory_quality.py does (L1 memories with their recorded enrichment, L0 transcripts
buried among the noise turns, every vector computed) and asks each case's question:

    short        the question alone (bench_memory_quality.py's figure)
    log-1k/3k/8k the question after 1k, 3k, 8k characters of a service's log
    code-1k/3k/8k the question after as much Python source (this repository's own, unfenced)
    middle-3k    the question between two halves of a 3k log (its identifiers mid-prompt)
    named-3k     identifier cases: the identifier named in a log line mid-paste, the question
                 at the end asking about "it" (the case's identifiers replaced)

and scores recall@5 per variant as bench_memory_quality.py does (L1 top 6, L0 top 4, best rank
of a gold id), through the backend's own searches (what recall and `search` run), hybrid and
keyword-only, plus the abstention cases' false recall. The pastes are generated here,
deterministically (seeded), and share no words with the set on purpose: what they measure is
whether the bulk drowns the question, not whether a log line happens to match a memory.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import bench_memory_quality as mq
from pi_memory_bridge.backends.local import LocalBackend
from pi_memory_bridge.embeddings import ModelHandle, load_use
from pi_memory_bridge.embeddings.cache_dir import default_cache_root
from pi_memory_bridge.embeddings.fusion import identifier_terms

ROOT = Path(__file__).resolve().parent.parent
CODE_FILES = ("src/pi_memory_bridge/backends/local/fts.py", "src/pi_memory_bridge/catchup/runner.py")

_SERVICES = ("gateway", "billing-api", "ledger", "notifier", "auth", "search-indexer")
_THREADS = ("http-worker-3", "http-worker-7", "pool-2-thread-1", "scheduler", "main")
_MESSAGES = (
    "GET /api/v1/orders/{n} 200 {ms}ms",
    "POST /api/v1/invoices 201 {ms}ms",
    "connection pool at {pct}% ({n}/60), waiting={k}",
    "upstream timeout after {ms}ms: POST https://pay.internal/charge",
    "retrying request id=req-{n} attempt={k}/5 backoff={ms}ms",
    "cache miss key=inv:{n} ttl=300s",
    "flushed {n} records to segment seg-{k}.log in {ms}ms",
    "health check ok latency={ms}ms",
    "slow query took {ms}ms: SELECT * FROM invoices WHERE tenant_id = ${k}",
    "tls handshake failed peer=10.0.{k}.{pct} reason=EOF",
)


def log_paste(chars: int, seed: int) -> str:
    """A service log of about `chars` characters."""
    rng = random.Random(seed)
    lines: list[str] = []
    size = 0
    second = rng.randrange(3600)
    while size < chars:
        second += rng.randrange(1, 4)
        level = rng.choices(("INFO", "DEBUG", "WARN", "ERROR"), (6, 3, 2, 1))[0]
        message = rng.choice(_MESSAGES).format(
            n=rng.randrange(1000, 99999),
            ms=rng.randrange(2, 4000),
            pct=rng.randrange(10, 99),
            k=rng.randrange(1, 9),
        )
        clock = f"{9 + second // 3600:02d}:{second // 60 % 60:02d}:{second % 60:02d}"
        stamp = f"2026-03-14T{clock}.{rng.randrange(1000):03d}Z"
        line = f"{stamp} {level:<5} [{rng.choice(_THREADS)}] {rng.choice(_SERVICES)}: {message}"
        lines.append(line)
        size += len(line) + 1
        if level == "ERROR" and rng.random() < 0.5:
            for depth in range(rng.randrange(2, 5)):
                frame = f"    at com.acme.billing.Client.call{depth}(Client.java:{rng.randrange(40, 400)})"
                lines.append(frame)
                size += len(frame) + 1
    return "\n".join(lines)


def code_paste(chars: int, seed: int) -> str:
    """About `chars` characters of this repository's own Python, from a seeded line."""
    source = "\n".join((ROOT / f).read_text(encoding="utf-8") for f in CODE_FILES).splitlines()
    start = random.Random(seed).randrange(len(source) // 2)
    out: list[str] = []
    size = 0
    for line in source[start:]:
        if size >= chars:
            break
        out.append(line)
        size += len(line) + 1
    return "\n".join(out)


def _seed(case: dict[str, Any]) -> int:
    return sum(map(ord, case["id"]))


def _named(case: dict[str, Any]) -> str | None:
    """The question with its identifiers replaced by "it", and a log line naming them mid-paste;
    None when the question names none."""
    query = str(case["query"])
    words = [w for w in re.findall(r"[\w./:@+#-]+", query) if identifier_terms(w)]
    if not words:
        return None
    question = query
    for w in words:
        question = question.replace(w, "it")
    paste = log_paste(3000, _seed(case)).splitlines()
    mid = len(paste) // 2
    named = f"2026-03-14T10:41:07.204Z ERROR [main] worker: {' '.join(words)} failed, see above"
    return "\n".join([*paste[:mid], named, *paste[mid:]]) + f"\n\n{question}"


Variant = Callable[[dict[str, Any]], str | None]
VARIANTS: dict[str, Variant] = {
    "short": lambda c: str(c["query"]),
    "log-1k": lambda c: f"{log_paste(1000, _seed(c))}\n\n{c['query']}",
    "log-3k": lambda c: f"{log_paste(3000, _seed(c))}\n\n{c['query']}",
    "log-8k": lambda c: f"{log_paste(8000, _seed(c))}\n\n{c['query']}",
    "code-1k": lambda c: f"{code_paste(1000, _seed(c))}\n\n{c['query']}",
    "code-3k": lambda c: f"{code_paste(3000, _seed(c))}\n\n{c['query']}",
    "code-8k": lambda c: f"{code_paste(8000, _seed(c))}\n\n{c['query']}",
    "middle-3k": lambda c: f"{log_paste(1500, _seed(c))}\n{c['query']}\n{log_paste(1500, _seed(c) + 1)}",
    "named-3k": _named,
}


async def score_variant(
    loaded: mq.Loaded, backend: LocalBackend, cases: Sequence[dict[str, Any]], variant: Variant
) -> tuple[mq.Scores, float, int]:
    """(scores of the answerable cases, abstention false recall, cases asked)."""
    asked = [{**c, "query": q} for c in cases if (q := variant(c)) is not None]
    results = await mq.evaluate(loaded, backend, asked)
    abstain = [r for r in results if not r.case["gold"]]
    false = sum(1 for r in abstain if r.returned > 0) / len(abstain) if abstain else float("nan")
    return mq.score(results), false, len(asked)


async def show_misses(loaded: mq.Loaded, cases: Sequence[dict[str, Any]], name: str, n: int) -> None:
    from pi_memory_bridge.prompt_focus import focus_prompt  # not on main: the baseline runs without it

    variant = VARIANTS[name]
    shown = 0
    for c in cases:
        if not c["gold"]:
            continue
        prompt = variant(c)
        if prompt is None:
            continue
        short = await mq.run_case(loaded, loaded.backend, c)
        long = await mq.run_case(loaded, loaded.backend, {**c, "query": prompt})
        if short.rank is not None and short.rank <= 5 and (long.rank is None or long.rank > 5):
            f = focus_prompt(prompt)
            print(f"  miss {c['id']} ({name}): question {f.question[:160]!r} anchors {f.anchors[:8]}")
            shown += 1
            if shown >= n:
                return


async def main(argv: Sequence[str]) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--split", choices=("dev", "test", "all"), default="all")
    ap.add_argument("--show", type=int, default=0, help="print up to N cases a variant loses")
    a = ap.parse_args(argv)
    handle = ModelHandle(lambda: load_use(default_cache_root(os.environ)))
    cases = [c for c in mq._json(mq.SET / "cases.json")["cases"] if a.split == "all" or c["split"] == a.split]
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        loaded = mq.load_set(Path(tmp), handle)
        took = time.perf_counter() - started
        print(f"memory set loaded in {took:.1f} s ({handle.describe()}); split {a.split}")
        print(f"  {'variant':<10} {'hybrid':<58} {'keyword only':<58}")
        for name, variant in VARIANTS.items():
            hy, hy_false, n = await score_variant(loaded, loaded.backend, cases, variant)
            kw, kw_false, _ = await score_variant(loaded, loaded.keyword, cases, variant)
            print(
                f"  {name:<10} R@5 {hy.r5:.2f} R@1 {hy.r1:.2f} MRR {hy.mrr:.2f} "
                f"abst-false {hy_false:.2f} (n={n:<3})"
                f"   R@5 {kw.r5:.2f} R@1 {kw.r1:.2f} MRR {kw.mrr:.2f} abst-false {kw_false:.2f}"
            )
            if a.show and name != "short":
                await show_misses(loaded, cases, name, a.show)
        for backend in (loaded.backend, loaded.keyword):
            await backend.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
