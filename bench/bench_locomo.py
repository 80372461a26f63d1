"""LoCoMo evidence recall@5 through `import` and `search --json` (issue 23, acceptance 4).

    .venv/bin/python bench/bench_locomo.py --data /path/to/locomo10.json [--conversations conv-41,...]
        [--held-out] [--cli-check N] [--workers N]

LoCoMo (snap-research/LoCoMo, `data/locomo10.json`) is ten long two-person conversations, each
in 19-32 dated sessions, with questions whose evidence is named utterance by utterance. It is
CC BY-NC 4.0: the data stays out of this repository, the bench takes its path (`fetch` the
repository, then `git show HEAD:data/locomo10.json > /tmp/locomo10.json`).

Per conversation, in a fresh agent dir of its own:

1. each LoCoMo session becomes a Pi session file, written the way Pi writes one, dated by the
   session's date: each turn is one utterance as the user's message and the next as the
   assistant's answer, each prefixed by its speaker's name ("Maria: ...") since the questions
   ask who did what; a shared photo is kept as its caption ("[shares a photo of ...]");
2. `pi-memory-bridge import --yes` stores them (the real CLI, a process of its own);
3. the turns' vectors are completed in this process if `import` left any missing (the
   background sidecar's work, which it does not do without a Pi yet: issue 23, item 4);
4. each question is asked as `search --json --limit 5` asks it (`conversation.search(q, 5)`,
   the same code in this process, the model warm), and `--cli-check N` runs the first N
   questions through the real `search --json` too and reports any difference in the turns;
5. a question is a hit when one of its top 5 results holds one of its evidence utterances.

Learning stays off (the default: no consent), so only L0 is searched. Development and tuning
happen on conv-41 .. conv-50 (the default); conv-26 and conv-30 are held out and are scored only
with `--held-out` (then alone: the lead scores them from outside). Figures: per conversation
and overall, per LoCoMo category (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop,
5 adversarial) and for categories 1-4, the usual scope of LoCoMo retrieval figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pi_memory_bridge.backends.local import LocalBackend
from pi_memory_bridge.config import data_dir
from pi_memory_bridge.embeddings import ModelHandle, load_use
from pi_memory_bridge.embeddings.cache_dir import default_cache_root
from pi_memory_bridge.embeddings.fusion import L0_PARAMS

ROOT = Path(__file__).resolve().parent.parent
CLI = ROOT / ".venv" / "bin" / "pi-memory-bridge"
DEVELOPMENT = tuple(f"conv-{n}" for n in (41, 42, 43, 44, 47, 48, 49, 50))
HELD_OUT = ("conv-26", "conv-30")
TOP = 5
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}

Json = dict[str, Any]


def _when(text: str) -> datetime:
    """LoCoMo's "1:56 pm on 8 May, 2023"."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def _iso(moment: datetime) -> str:
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{moment.microsecond // 1000:03d}Z"


def _said(utterance: Json) -> str:
    text = f"{utterance['speaker']}: {utterance['text']}"
    caption = utterance.get("blip_caption")
    return f"{text} [shares {caption}]" if caption else text


@dataclass
class Conversation:
    sample_id: str
    sessions: list[tuple[datetime, list[Json]]]
    questions: list[Json]
    utterances: dict[str, str] = field(default_factory=dict)  # dia_id -> text as stored


def load(path: Path, wanted: Sequence[str]) -> list[Conversation]:
    out = []
    for sample in json.loads(path.read_text(encoding="utf-8")):
        if sample["sample_id"] not in wanted:
            continue
        conv = sample["conversation"]
        numbers = sorted(int(m.group(1)) for k in conv if (m := re.fullmatch(r"session_(\d+)", k)))
        sessions = [(_when(conv[f"session_{n}_date_time"]), conv[f"session_{n}"]) for n in numbers]
        c = Conversation(sample["sample_id"], sessions, sample["qa"])
        for _, utterances in sessions:
            for u in utterances:
                c.utterances[u["dia_id"]] = _said(u)
        out.append(c)
    return sorted(out, key=lambda c: wanted.index(c.sample_id))


def write_sessions(conv: Conversation, sessions_dir: Path) -> int:
    """Each LoCoMo session as a Pi session file; returns the turns written."""
    folder = sessions_dir / "--locomo--"
    folder.mkdir(parents=True, exist_ok=True)
    turns = 0
    for start, utterances in conv.sessions:
        sid = str(uuid.uuid4())
        clock = start
        entries: list[Json] = [
            {"type": "session", "version": 3, "id": sid, "timestamp": _iso(clock), "cwd": "/locomo"}
        ]
        leaf: str | None = None

        def add(message: Json, entries: list[Json] = entries) -> None:
            nonlocal leaf, clock
            clock += timedelta(seconds=20)
            entry_id = f"{len(entries):08x}"
            message["timestamp"] = int(clock.timestamp() * 1000)
            entries.append(
                {
                    "type": "message",
                    "id": entry_id,
                    "parentId": leaf,
                    "timestamp": _iso(clock),
                    "message": message,
                }
            )
            leaf = entry_id

        for i in range(0, len(utterances), 2):
            pair = utterances[i : i + 2]
            add({"role": "user", "content": [{"type": "text", "text": _said(pair[0])}]})
            answer = _said(pair[1]) if len(pair) > 1 else "(no reply)"
            add(
                {
                    "role": "assistant",
                    "content": [{"type": "text", "text": answer}],
                    "stopReason": "stop",
                    "provider": "locomo",
                    "model": "locomo",
                }
            )
            turns += 1
        name = f"{start:%Y-%m-%dT%H-%M-%S-000Z}_{sid}.jsonl"
        (folder / name).write_text("".join(json.dumps(e) + "\n" for e in entries), encoding="utf-8")
    return turns


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PI_", "TDAI_"))}
    env["HOME"] = str(home)
    env["PI_CODING_AGENT_DIR"] = str(home / ".pi" / "agent")
    return env


def _cli(env: dict[str, str], *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(CLI), *args],
        env=env,
        cwd=env["HOME"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@dataclass
class Scored:
    by_category: dict[int, list[bool]] = field(default_factory=lambda: defaultdict(list))

    def add(self, category: int, hit: bool) -> None:
        self.by_category[category].append(hit)

    def share(self, categories: Sequence[int]) -> tuple[float, int]:
        hits = [h for c in categories for h in self.by_category.get(c, [])]
        return (sum(hits) / len(hits) if hits else float("nan")), len(hits)

    def line(self) -> str:
        main, n = self.share((1, 2, 3, 4))
        every, m = self.share((1, 2, 3, 4, 5))
        cats = "  ".join(
            f"{CATEGORIES[c][:6]} {self.share((c,))[0]:.2f}"
            for c in sorted(self.by_category)
            if c in CATEGORIES
        )
        return f"R@5 cat 1-4 {main:.3f} (n={n})  all {every:.3f} (n={m})   {cats}"

    def merge(self, other: Scored) -> None:
        for c, hits in other.by_category.items():
            self.by_category[c].extend(hits)


def _params(variant: str) -> dict[str, float]:
    """'piece_weight=0.5,min_score=0.2' as FusionParams fields."""
    pairs = (item.split("=", 1) for item in variant.split(",") if item.strip())
    return {key.strip(): float(value) for key, value in pairs}


def _turn_ids_of(payload: str) -> list[str]:
    data = json.loads(payload)
    items = data.get("items", data.get("results", []))
    return [str(i.get("id", "")).removeprefix("L0:") for i in items if str(i.get("layer", "")) == "L0"]


async def score_conversation(
    conv: Conversation, handle: ModelHandle, cli_check: int, variants: Sequence[str] = ()
) -> tuple[Scored, dict[str, float], list[str], dict[str, Scored]]:
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix=f"locomo-{conv.sample_id}-") as tmp:
        home = Path(tmp)
        env = _env(home)
        agent_dir = Path(env["PI_CODING_AGENT_DIR"])
        written = write_sessions(conv, agent_dir / "sessions")
        started = time.perf_counter()
        done = _cli(env, "import", "--yes")
        import_s = time.perf_counter() - started
        if done.returncode != 0:
            raise SystemExit(f"import failed for {conv.sample_id}: {done.stdout}\n{done.stderr}")
        backend = LocalBackend(data_dir(agent_dir), embeddings=handle)
        assert backend.semantic is not None
        encoder = handle.wait(600)
        assert encoder is not None, handle.describe()
        before = backend.semantic.status().turns
        started = time.perf_counter()
        backend.semantic.worker.drain(encoder)
        embed_s = time.perf_counter() - started
        stored = before.total if before is not None else 0
        left = (before.total - before.done) if before is not None else 0
        timings = {"turns": float(written), "stored": float(stored), "import_s": import_s}
        timings.update({"missing_after_import": float(left), "embed_s": embed_s})
        scored = Scored()
        search_s: list[float] = []
        checked = differ = 0
        for q in conv.questions:
            evidence = [conv.utterances[e] for e in q.get("evidence", []) if e in conv.utterances]
            if not evidence:
                continue  # a few LoCoMo questions name evidence ids that do not exist
            question = str(q["question"])
            t0 = time.perf_counter()
            hits = await backend.conversation.search(question, TOP)
            search_s.append(time.perf_counter() - t0)
            texts = [f"{h.user_text}\n{h.assistant_text}" for h in hits[:TOP]]
            scored.add(int(q["category"]), any(e in t for e in evidence for t in texts))
            if checked < cli_check:
                checked += 1
                out = _cli(env, "search", "--json", "--limit", str(TOP), question, timeout=120)
                if out.returncode != 0 or _turn_ids_of(out.stdout) != [h.turn_id for h in hits]:
                    differ += 1
                    if differ <= 3:
                        notes.append(f"cli differs on {question!r}: {out.stdout[:300]} {out.stderr[:200]}")
        if cli_check:
            notes.append(f"search --json checked on {checked} questions: {differ} differ")
        swept: dict[str, Scored] = {}
        for variant in variants:  # the same store, L0's fusion parameters changed (fusion.L0_PARAMS)
            backend.semantic.l0_params = replace(L0_PARAMS, **_params(variant))
            swept[variant] = Scored()
            for q in conv.questions:
                evidence = [conv.utterances[e] for e in q.get("evidence", []) if e in conv.utterances]
                if evidence:
                    hits = await backend.conversation.search(str(q["question"]), TOP)
                    texts = [f"{h.user_text}\n{h.assistant_text}" for h in hits[:TOP]]
                    swept[variant].add(int(q["category"]), any(e in t for e in evidence for t in texts))
        backend.semantic.l0_params = L0_PARAMS
        search_s.sort()
        timings["search_p50_ms"] = 1000 * search_s[len(search_s) // 2] if search_s else 0.0
        await backend.close()
    return scored, timings, notes, swept


async def main(argv: Sequence[str]) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, required=True, help="LoCoMo's data/locomo10.json")
    ap.add_argument("--conversations", default=",".join(DEVELOPMENT))
    ap.add_argument("--held-out", action="store_true", help="score conv-26 and conv-30 (only them)")
    ap.add_argument("--cli-check", type=int, default=0, help="also run N questions through `search --json`")
    ap.add_argument(
        "--l0-variants",
        default="",
        help="also score L0 fusion parameters, e.g. 'piece_weight=0;min_score=0.2,keyword_weight=0.3'",
    )
    a = ap.parse_args(argv)
    wanted = list(HELD_OUT) if a.held_out else [c.strip() for c in a.conversations.split(",") if c.strip()]
    if not a.held_out and set(wanted) & set(HELD_OUT):
        raise SystemExit("conv-26 and conv-30 are held out: score them with --held-out only")
    handle = ModelHandle(lambda: load_use(default_cache_root(os.environ)))
    conversations = load(a.data, wanted)
    total = Scored()
    variants = [v.strip() for v in a.l0_variants.split(";") if v.strip()]
    swept_total = {v: Scored() for v in variants}
    print(f"LoCoMo evidence recall@{TOP} via import + search --json, learning off; {handle.describe()}")
    for conv in conversations:
        scored, t, notes, swept = await score_conversation(conv, handle, a.cli_check, variants)
        total.merge(scored)
        for w, sc in swept.items():
            swept_total[w].merge(sc)
            notes.append(f"L0 {w}: {sc.line()}")
        print(
            f"  {conv.sample_id}: {scored.line()}\n"
            f"           {int(t['turns'])} turns written, {int(t['stored'])} stored by import in "
            f"{t['import_s']:.1f} s, {int(t['missing_after_import'])} without vectors after it "
            f"(embedded here in {t['embed_s']:.1f} s); search p50 {t['search_p50_ms']:.0f} ms"
        )
        for n in notes:
            print(f"           {n}")
    print(f"  overall: {total.line()}")
    for w, sc in swept_total.items():
        print(f"  overall, L0 {w}: {sc.line()}")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
