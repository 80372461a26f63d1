"""Page loads of the memory inspector on a large store: 100k turns and 5k memories.

    .venv/bin/python bench/bench_ui.py [--turns 100000] [--memories 5000] [--rounds 40]

Builds a store in a temporary agent dir (deterministic synthetic EN/ZH turns from
bench_local_store, typed L1 memories, 20 project notes, a profile, 200 recall traces, a few dead
outbox records, 60 learning jobs), starts the real `pi-memory-bridge ui` process on it and loads
every page over real HTTP, one request at a time (a person clicking), after two warm-up rounds.
Beside the pages, in the same run, the baseline: the server's own style sheet, i.e. what any
request costs here.
Target (issue 15): p95 <= 200 ms for every page. Figures, not pass/fail.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx

from _stats import pct, summary
from bench_local_store import SyntheticCorpus
from pi_memory_bridge.backends.base import ConversationTurn
from pi_memory_bridge.backends.local import LocalBackend
from pi_memory_bridge.outbox import Outbox
from pi_memory_bridge.recall.trace import RecallTrace
from pi_memory_bridge.recall.trace_log import TraceLog

TARGET_P95_MS = 200.0
KINDS = ("fact", "preference", "constraint", "event", "instruction")
JOBS = 60
BATCH = 5000


def build(agent_dir: Path, n_turns: int, n_memories: int) -> tuple[str, str, str]:
    """Fill the store; return a memory id, a turn id and a session id to open pages of."""
    data = agent_dir / "memory-bridge"
    corpus = SyntheticCorpus(7)
    backend = LocalBackend(data)
    turns = corpus.turns(n_turns, datetime(2026, 1, 1, tzinfo=UTC))
    started = time.perf_counter()
    for start in range(0, len(turns), BATCH):
        backend.store.conversation.add(turns[start : start + BATCH])
    memory_id = ""
    for i in range(n_memories):
        saved = backend.store.memories.save(f"{corpus.text(5, 20)} #{i}", KINDS[i % len(KINDS)], "bench")
        memory_id = memory_id or saved.id
    for i in range(20):
        backend.notes.write_scenario(f"project-{i}/notes.md", f"# Project {i}\n\n{corpus.text(40, 120)}\n")
    backend.notes.write_profile("Backend engineer. Go, Postgres, short answers.\n")
    print(f"store built in {time.perf_counter() - started:.1f} s: {n_turns:,} turns, {n_memories:,} memories")
    traces = TraceLog.open(data)
    t0 = datetime(2026, 6, 1, tzinfo=UTC)
    for i in range(200):
        items = [
            {
                "layer": "L1",
                "source_id": memory_id,
                "fate": "injected",
                "text": corpus.text(5, 20),
                "score": 3.2,
            },
            {"layer": "L0", "source_id": turns[i].turn_id, "fate": "budget", "text": corpus.text(20, 60)},
        ]
        traces.write(
            RecallTrace.model_validate(
                {
                    "at": t0 + timedelta(minutes=i),
                    "prompt": corpus.query(),
                    "outcome": "recalled",
                    "items": items,
                }
            )
        )
    traces.close()
    with Outbox.open(data) as box:
        box.enqueue(
            [ConversationTurn(f"ob-{i}", "session-x", corpus.text(5, 10), "ok", t0) for i in range(5)]
        )
    with backend.store.connection("bench: learning jobs") as conn:  # the learning page lists them
        conn.executemany(
            "INSERT INTO learning_jobs(job_id, created_at, state, reason, model, turns, added, skipped, "
            "superseded, merged, proposed, undone_at) "
            "VALUES (?, ?, 'applied', '', 'bench/model', 4, 2, 1, 1, 0, 0, NULL)",
            [(f"job-bench-{i:03d}", (t0 + timedelta(hours=i)).isoformat()) for i in range(JOBS)],
        )
    asyncio.run(backend.close())
    return memory_id, turns[len(turns) // 2].turn_id, turns[len(turns) // 2].memory_session_id


def start_server(agent_dir: Path) -> tuple[subprocess.Popen[str], str]:
    env = {**os.environ, "PI_CODING_AGENT_DIR": str(agent_dir), "HOME": str(agent_dir.parent)}
    cli = "import sys; from pi_memory_bridge.cli import main; sys.exit(main())"
    proc = subprocess.Popen(
        [sys.executable, "-c", cli, "ui", "--no-open"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=100_000)
    parser.add_argument("--memories", type=int, default=5_000)
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--keep", type=Path, help="build the store here once and reuse it on later runs")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-ui-") as tmp:
        agent = (args.keep or Path(tmp)) / "agent"
        ids = agent / "bench-ids.json"
        if args.keep is not None and ids.exists():
            memory_id, turn_id, session = json.loads(ids.read_text())
            print(f"reusing the store in {agent}")
        else:
            memory_id, turn_id, session = build(agent, args.turns, args.memories)
            ids.write_text(json.dumps([memory_id, turn_id, session]))
        proc, url = start_server(agent)
        base = url.split("/?", 1)[0]
        pages = {
            "baseline: /static/app.css": "/static/app.css",
            "overview /": "/",
            "memories (newest 50)": "/memories",
            "memories by kind": "/memories?kind=constraint",
            "memories page 20": "/memories?offset=1000",
            "memories search": "/memories?q=deploy+timeout+cache",
            "memory detail": f"/memories/{memory_id}",
            "conversation (newest 50)": "/conversation",
            "conversation of a session": f"/conversation?session={session}",
            "conversation search": "/conversation?q=database+migration+rollback",
            "turn detail": f"/conversation/{turn_id}",
            "notes and profile": "/notes",
            "recall traces (200)": "/traces",
            "outbox": "/outbox",
            "learning": "/learning",
        }
        samples: dict[str, list[float]] = {name: [] for name in pages}
        try:
            with httpx.Client(base_url=base, timeout=30) as client:
                assert client.get(url.removeprefix(base)).status_code == 303
                client.cookies.set(f"pmb_inspector_{base.rsplit(':', 1)[1]}", url.split("token=", 1)[1])
                traces = client.get("/traces").text
                trace_id = re.search(r'href="/traces/(\d+)"', traces)
                if trace_id:
                    pages["recall trace detail"] = f"/traces/{trace_id.group(1)}"
                    samples["recall trace detail"] = []
                order = list(pages.items())
                for round_no in range(args.rounds + 2):
                    random.Random(round_no).shuffle(order)
                    for name, path in order:
                        started = time.perf_counter()
                        response = client.get(path)
                        elapsed = (time.perf_counter() - started) * 1000
                        if response.status_code != 200:
                            raise SystemExit(f"{path}: HTTP {response.status_code}")
                        if round_no >= 2:
                            samples[name].append(elapsed)
        finally:
            proc.terminate()
            proc.wait(timeout=10)
    print(f"\npage loads over HTTP, {args.rounds} rounds, target p95 <= {TARGET_P95_MS:.0f} ms:")
    worst = 0.0
    for name, values in samples.items():
        p95 = pct(values, 95)
        if not name.startswith("baseline"):
            worst = max(worst, p95)
        print(summary(name, values, "ok" if p95 <= TARGET_P95_MS else "OVER TARGET"))
    print(f"\nworst page p95: {worst:.1f} ms ({'within' if worst <= TARGET_P95_MS else 'over'} the target)")


if __name__ == "__main__":
    main()
