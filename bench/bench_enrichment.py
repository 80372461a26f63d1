"""Recall of memories saved by hand, before and after learning enriched them.

    .venv/bin/python bench/bench_enrichment.py [--split dev|test|all]

Loads bench/memory_set/ as bench_memory_quality.py does with `--enrichment none` (no tags, no
questions), then makes every current memory hand-saved (origin 'user', as `/tdai-memory-remember`,
the CLI or the model's save tool leave it) and scores the cases: the "before" column. Then it runs
the real enrichment jobs (`learning.enrich_job.enrich_once`: prompt, strict validation, the
store's transaction, the ledger) until no memory waits, on a replay model that answers each
enrichment prompt with the tags and questions recorded for those memories in
bench/memory_set/enrichment.json (written blind to the cases for the extract prompt; see its
about), computes the new vectors with the bundled model and scores again: the "after" column.
Superseded memories stay as they were (not current, never enriched).

The replay stands in for the user's model; what it measures is that the pipeline writes what a
model answers in a form recall uses, not how well a particular model writes questions.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench_memory_quality import SET, evaluate, injected_chars, load_set, print_summary, summarize
from pi_memory_bridge.backends.local.learning.memories import LearnedMemories
from pi_memory_bridge.embeddings import ModelHandle, load_use
from pi_memory_bridge.embeddings.cache_dir import default_cache_root
from pi_memory_bridge.learning.budget import estimate_tokens
from pi_memory_bridge.learning.consolidate import JobSettings
from pi_memory_bridge.learning.enrich_job import enrich_once
from pi_memory_bridge.learning.model import Completion

_SHOWN = re.compile(r"^\[(m\d+)\] \([a-z]+\) (.*)$")


def _json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


class ReplayModel:
    """Answers enrichment prompts from the recorded enrichment of the memories they show."""

    def __init__(self) -> None:
        by_text = {m["content"]: m["id"] for m in _json(SET / "memories.json")["memories"]}
        recorded = _json(SET / "enrichment.json")["memories"]
        self._cues = {text: recorded[set_id] for text, set_id in by_text.items() if set_id in recorded}
        self.calls = 0
        self.tokens = 0

    @property
    def label(self) -> str:
        return "replay/enrichment.json"

    async def complete(self, system: str, user: str, *, max_tokens: int, timeout_s: float) -> Completion:
        self.calls += 1
        entries = []
        for line in user.splitlines():
            shown = _SHOWN.match(line)
            if shown and shown.group(2) in self._cues:
                cues = self._cues[shown.group(2)]
                entries.append({"id": shown.group(1), "tags": cues["tags"], "questions": cues["questions"]})
        text = json.dumps({"memories": entries}, ensure_ascii=False)
        spent_in, spent_out = estimate_tokens(system + user), estimate_tokens(text)
        self.tokens += spent_in + spent_out
        return Completion(text, "stop", spent_in, spent_out, self.label)


async def main(argv: Sequence[str]) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--split", choices=("dev", "test", "all"), default="all")
    a = ap.parse_args(argv)
    handle = ModelHandle(lambda: load_use(default_cache_root(os.environ)))
    cases = [c for c in _json(SET / "cases.json")["cases"] if a.split == "all" or c["split"] == a.split]
    with tempfile.TemporaryDirectory() as tmp:
        loaded = load_set(Path(tmp), handle, enrichment="none")
        store = loaded.backend.store
        with store.writing("making the current memories hand-saved") as conn:
            saved = conn.execute("UPDATE atomic SET origin = 'user' WHERE valid_to IS NULL").rowcount
        print(f"{saved} current memories stored as hand-saved (no tags, no questions); {handle.describe()}")
        before = summarize(await evaluate(loaded, loaded.backend, cases))
        before_chars = await injected_chars(loaded.backend, cases)

        memories = LearnedMemories(store)
        model = ReplayModel()
        started = time.perf_counter()
        jobs = enriched = 0
        while True:
            outcome = await enrich_once(memories, model, JobSettings())
            if outcome.kind != "applied" or outcome.summary is None:
                if outcome.kind != "nothing":
                    raise SystemExit(f"enrichment job failed: {outcome.reason} {outcome.detail}")
                break
            jobs += 1
            enriched += outcome.summary.enriched
        took = time.perf_counter() - started
        encoder = handle.wait(600)
        assert encoder is not None and loaded.backend.semantic is not None, handle.describe()
        embedded = loaded.backend.semantic.worker.drain(encoder)
        print(
            f"enrichment: {jobs} job(s), {enriched} memories enriched, {model.calls} model call(s), "
            f"~{model.tokens:,} tokens (estimated), {took:.2f} s in jobs; {embedded} vectors computed; "
            f"{memories.enrichment.waiting_count()} still waiting"
        )
        after = summarize(await evaluate(loaded, loaded.backend, cases))
        after_chars = await injected_chars(loaded.backend, cases)
        print(f"== split {a.split} ({len(cases)} cases), hybrid search")
        print_summary("hand-saved, before enrichment", before, before_chars)
        print_summary("hand-saved, after learning enriched them", after, after_chars)
        for backend in (loaded.backend, loaded.keyword):
            await backend.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
