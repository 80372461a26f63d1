"""Conversation (L0) by meaning with learning off: the paraphrase slice where only turns exist.

    .venv/bin/python bench/bench_l0_meaning.py [--split dev|test|all]

A user who has not consented to learning has no L1 memories: what they said is only in L0
turns. This bench stores each fact of bench/memory_set/memories.json as the user's message of
a turn, with an assistant reply that acknowledges it at some length (as models do), among the
noise turns of tests/data/search_quality, computes every vector, and asks the set's questions
of L0 alone (`conversation.search(q, 5)`, what `search --json --limit 5` returns):

    turns        the fact is the user's message, the reply follows it
    long turns   the fact comes after 1,400 characters of pasted log in the same message
                 (past the first 1,200 characters, all one vector per turn ever read)

    paraphrase   R@5 (the fact's turn among the top 5), by language
    identifier   R@1 (exact names must stay first)
    keyword set  tests/data/search_quality's L0 recall@4 (hybrid), where keywords already work
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import bench_memory_quality as mq
from bench_long_prompts import log_paste
from pi_memory_bridge.backends.base import ConversationTurn
from pi_memory_bridge.backends.local import LocalBackend
from pi_memory_bridge.embeddings import ModelHandle, load_use
from pi_memory_bridge.embeddings.cache_dir import default_cache_root
from pi_memory_bridge.embeddings.fusion import L0_PARAMS

_CJK = re.compile(r"[\u4e00-\u9fff]")
REPLIES_EN = (
    "Got it, I'll keep that in mind from now on. If anything I suggest later conflicts with it, "
    "I'll point that out before changing anything, and I'll follow it in the code I write for you. "
    "Is there anything else about your setup or your preferences that I should know?",
    "Understood. I've noted it and will apply it consistently across the files we touch in this "
    "project, including tests and scripts. Tell me if there are exceptions I should respect.",
)
REPLIES_ZH = (
    "好的，我记住了。以后如果我的建议和这一点冲突，我会先提出来再改；写代码时也会照这个来。"
    "还有什么关于你的环境或习惯需要我知道的吗？",
    "明白，已经记下。我会在这个项目涉及的文件里一致地遵守，包括测试和脚本。如果有例外请告诉我。",
)


def _turns(long: bool) -> list[ConversationTurn]:
    start = datetime(2026, 2, 1, tzinfo=UTC)
    out = []
    for i, m in enumerate(mq._json(mq.SET / "memories.json")["memories"]):
        replies = REPLIES_ZH if _CJK.search(m["content"]) else REPLIES_EN
        said = f"{log_paste(1400, i)}\n\n{m['content']}" if long else m["content"]
        out.append(
            ConversationTurn(
                f"turn-{m['id']}", f"s{i % 7}", said, replies[i % 2], start + timedelta(hours=5 * i)
            )
        )
    noise = mq.NOISE / "turns.jsonl"
    for i, line in enumerate(noise.read_text(encoding="utf-8").splitlines()):
        t = mq.json.loads(line)
        if t["id"].startswith("noise-"):
            at = datetime(2026, 1, 5, tzinfo=UTC) + timedelta(hours=11 * i)
            out.append(ConversationTurn(t["id"], t["session"], t["user"], t["assistant"], at))
    return out


async def score(backend: LocalBackend, cases: Sequence[dict[str, Any]]) -> dict[str, tuple[float, int]]:
    out: dict[str, list[bool]] = {}
    for c in cases:
        gold = {f"turn-{g}" for g in c["gold"] if g.startswith("m")}
        if not gold or c["slice"] not in ("paraphrase", "identifier", "single_fact"):
            continue
        ids = [h.turn_id for h in await backend.conversation.search(c["query"], 5)]
        if c["slice"] == "identifier":
            out.setdefault("identifier R@1", []).append(bool(ids) and ids[0] in gold)
        elif c["slice"] == "single_fact":
            out.setdefault("single_fact R@5", []).append(bool(gold & set(ids)))
        else:
            hit = bool(gold & set(ids))
            out.setdefault("paraphrase R@5", []).append(hit)
            out.setdefault(f"  paraphrase/{c['lang']}", []).append(hit)
    return {k: (sum(v) / len(v), len(v)) for k, v in sorted(out.items(), key=lambda kv: kv[0].strip())}


async def main(argv: Sequence[str]) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--split", choices=("dev", "test", "all"), default="all")
    ap.add_argument("--piece-weights", default="", help="L0 piece weights to score (default: as set)")
    a = ap.parse_args(argv)
    weights = [float(w) for w in a.piece_weights.split(",") if w.strip()] or [
        getattr(L0_PARAMS, "piece_weight", 0.0)
    ]
    handle = ModelHandle(lambda: load_use(default_cache_root(os.environ)))
    encoder = handle.wait(600)
    assert encoder is not None, handle.describe()
    cases = [c for c in mq._json(mq.SET / "cases.json")["cases"] if a.split == "all" or c["split"] == a.split]
    print(f"L0 by meaning, learning off (no L1); split {a.split}; {handle.describe()}")
    with tempfile.TemporaryDirectory() as tmp:
        for long in (False, True):
            backend = LocalBackend(Path(tmp) / str(long), embeddings=handle)
            backend.store.conversation.add(_turns(long))
            assert backend.semantic is not None
            backend.semantic.worker.drain(encoder)
            with backend.store.reading("counting vectors") as conn:
                vectors = conn.execute("SELECT count(*) FROM turn_vectors").fetchone()[0]
                turns = conn.execute("SELECT count(*) FROM turns").fetchone()[0]
            print(f"  {'long turns' if long else 'turns'} ({turns} turns, {vectors} vectors)")
            for weight in weights:
                if hasattr(L0_PARAMS, "piece_weight"):
                    backend.semantic.l0_params = replace(L0_PARAMS, piece_weight=weight)
                figures = await score(backend, cases)
                print(f"   piece weight {weight}" if len(weights) > 1 else "", end="")
                print(
                    "".join(f"\n    {name:<22} {share:.2f}  (n={n})" for name, (share, n) in figures.items())
                )
            backend.semantic.l0_params = L0_PARAMS
            await backend.close()
        keyword_set = mq.KeywordSet(Path(tmp) / "keyword-set", handle)
        kw4, hy4 = await keyword_set.recall_at_4()
        print(f"  tests/data/search_quality L0 recall@4: keyword {kw4:.3f}, hybrid {hy4:.3f}")
        await keyword_set.backend.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
