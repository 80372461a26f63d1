"""Recall latency and delivery throughput of the MemoryCore backend against the bare SDK.

    .venv/bin/python bench/bench_memorycore.py                       # the fake server (cost model)
    .venv/bin/python bench/bench_memorycore.py --url http://127.0.0.1:18420 --key <gateway key>

Recall, interleaved per prompt over the same prompts (5 warm-up calls not counted):

* `bare`: what a plain client does per answer, the reference adapter's recall (and the perf
  anchors' "py-par" floor): one keep-alive `AsyncMemoryClient` and `gather(read_core,
  search_atomic(6), list_scenarios -> read_scenario x<=2, search_conversation(4))`, with the same
  L2 selection rule as our recall.
* `ours`: the sidecar's real `recall()` over `MemoryCoreBackend` (same limits, skills off), which
  caches the L2 listing/notes and the L3 core for `--ttl` seconds.

Delivery of 500 queued turns (25 sessions x 20 turns), fresh copies per run, arms run A B C C B A:
`per-turn add` sends one `add_conversation` per turn (the baseline: what the reference adapter's
flush does); the other two queue the turns in a real outbox and let the sidecar's `DeliveryWorker`
deliver them into `MemoryCoreBackend` (one add of <= 100 messages per session batch, no redelivery
check on a first attempt), one session at a time and `--parallel` sessions at once. Each run
then counts the messages the server stored, so a lost or doubled message shows. With
`--drain-recall`, recall latency is measured while 500 queued turns drain (what a backlog costs
the user at 1 and at `--parallel` sessions in flight). With
`--server-pid` (a server on this machine) each run also reports the server's CPU time: a server
on CPU for most of a run sets the pace, whatever the client does.

With no --url the fake MemoryCore (tests/memorycore_fake.py) runs on 127.0.0.1 with a cost model
taken from reference/perf-anchors.md (uncontended per-request server times: conversation/search
10.6 ms, atomic/search 9.2, core/read 1.9, scenario/ls 2.0; reads and queries assumed 2.0; adds
as measured on the real server: 8 ms + 0.6 ms per message + 0.65 us per message per stored L0
row), one request at a time like the Node server. With --url
the real server is used; a fresh team/agent/user scope is seeded first (and L1/L2/L3 awaited).
Uses the official SDK when installed (else the fake SDK, for the fake server only).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from pydantic import SecretStr

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from _stats import summary  # noqa: E402
from memorycore_fake import FAKE_API_KEY, FakeMemoryCore, fake_sdk_bindings, serve  # noqa: E402
from pi_memory_bridge.backends.base import BackendConfigError, ConversationTurn  # noqa: E402
from pi_memory_bridge.backends.memorycore import (  # noqa: E402
    MemoryCoreBackend,
    MemoryCoreCredentials,
    MemoryCoreTarget,
    SdkBindings,
    load_sdk,
)
from pi_memory_bridge.outbox import DEFAULT_PARALLEL_SESSIONS, DeliveryWorker, Outbox  # noqa: E402
from pi_memory_bridge.recall import Layer, RecallBudget, recall  # noqa: E402
from pi_memory_bridge.textsearch import overlap_score, query_terms  # noqa: E402

SEED = 11
WARMUP = 5
SESSIONS, TURNS_PER_SESSION = 25, 20
L0_LIMIT, L1_LIMIT, L2_LIMIT = 4, 6, 2
ANCHOR_COSTS_MS = {
    "/v3/conversation/search": 10.6,
    "/v3/atomic/search": 9.2,
    "/v3/core/read": 1.9,
    "/v3/scenario/ls": 2.0,
    "/v3/scenario/read": 2.0,
    "/v3/conversation/query": 2.0,
    "/v3/conversation/add": 8.0,
}
# Measured on the loopback server (no embedding service) with this bench's calibration and the
# server's own log: about 8 ms per add, 0.6 ms per message on an empty instance, plus 0.65 us per
# message for every L0 row the instance holds (10.5 ms per message at 16,000 rows).
ADD_COST_PER_MESSAGE_MS = 0.6
ADD_COST_PER_MESSAGE_PER_ROW_MS = 0.00065

TOPICS = [
    ("Go backend", "named constants instead of magic numbers", "go-backend-style.md"),
    ("database migration", "run migrations inside a transaction", "db-migrations.md"),
    ("deploy pipeline", "blue-green deploys with a health check", "deploy.md"),
    ("retry policy", "exponential backoff with jitter", "retries.md"),
    ("logging", "structured JSON logs with request ids", "logging.md"),
]
UNRELATED = ["what is a good name for a cat", "how tall is mount everest", "recommend a novel", "ok thanks"]


@dataclass(frozen=True)
class Scope:
    team: str
    agent: str
    user: str


def corpus(rng: random.Random, scope_tag: str) -> list[ConversationTurn]:
    base = datetime(2026, 10, 1, 9, 0, tzinfo=UTC)
    turns: list[ConversationTurn] = []
    for s in range(SESSIONS):
        sid = f"bench-{scope_tag}-s{s}"
        for t in range(TURNS_PER_SESSION):
            topic, advice, _ = rng.choice(TOPICS)
            user = f"In the {topic} code, should we {rng.choice(['refactor', 'test', 'review'])} step {t}?"
            assistant = f"For the {topic}: {advice}. Step {t} of session {s} looks fine otherwise."
            at = base + timedelta(days=s, minutes=3 * t)
            turns.append(ConversationTurn(f"{sid}-t{t}", sid, user, assistant, at))
    return turns


def prompts(rng: random.Random, n: int) -> list[str]:
    out = []
    for i in range(n):
        if i % 3 == 2:
            out.append(rng.choice(UNRELATED) + f" ({i})")
        else:
            topic, advice, _ = rng.choice(TOPICS)
            out.append(f"How do we handle {topic} here? I remember something about {advice.split()[0]} ({i})")
    return out


class Bare:
    """The plain-client recall: every layer, every time, in parallel (the reference adapter)."""

    def __init__(self, sdk: SdkBindings, url: str, key: str, scope: Scope) -> None:
        self.client = sdk.memory_client(
            url, key, "default", team_id=scope.team, agent_id=scope.agent, user_id=scope.user, timeout=10
        )

    async def recall(self, prompt: str) -> int:
        async def l2() -> int:
            listing = await self.client.list_scenarios()
            terms = query_terms(prompt)
            entries = [e for e in listing.get("entries", []) if not str(e.get("path", "")).endswith("/")]
            scored = sorted(
                (
                    (overlap_score(terms, f"{e['path']}\n{e.get('summary') or ''}"), i, e)
                    for i, e in enumerate(entries)
                ),
                key=lambda x: (-x[0], x[1]),
            )
            chosen = [e for score, _, e in scored if score > 0][:L2_LIMIT]
            await asyncio.gather(*(self.client.read_scenario(e["path"]) for e in chosen))
            return 1 + len(chosen)

        results = await asyncio.gather(
            self.client.read_core(),
            self.client.search_atomic(prompt, limit=L1_LIMIT),
            l2(),
            self.client.search_conversation(prompt, limit=L0_LIMIT),
        )
        return 3 + int(results[2])

    async def close(self) -> None:
        await self.client.close()


class Counter:
    """Counts the SDK calls made through clients built by `counting(sdk, counter)`."""

    def __init__(self) -> None:
        self.calls = 0


class _CountingClient:
    def __init__(self, inner: Any, counter: Counter) -> None:
        self._inner = inner
        self._counter = counter

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name == "close" or not callable(attr):
            return attr

        async def call(*args: Any, **kwargs: Any) -> Any:
            self._counter.calls += 1
            return await attr(*args, **kwargs)

        return call


def counting(sdk: SdkBindings, counter: Counter) -> SdkBindings:
    def wrap(factory: Any) -> Any:
        return lambda *args, **kwargs: _CountingClient(factory(*args, **kwargs), counter)

    return replace(sdk, memory_client=wrap(sdk.memory_client), skill_client=wrap(sdk.skill_client))


def backend_for(sdk: SdkBindings, url: str, key: str, scope: Scope, ttl: float) -> MemoryCoreBackend:
    target = MemoryCoreTarget(url, "default", scope.team, scope.agent, scope.user, timeout_s=10)
    return MemoryCoreBackend(target, MemoryCoreCredentials(SecretStr(key)), cache_ttl_s=ttl, sdk=sdk)


async def bench_recall(sdk: SdkBindings, url: str, key: str, scope: Scope, ttl: float, n: int) -> None:
    budget = RecallBudget(
        deadline_ms=5000,
        limits={Layer.L3: 1, Layer.L1: L1_LIMIT, Layer.L2: L2_LIMIT, Layer.L0: L0_LIMIT, Layer.SKILL: 0},
        skip_trivial=False,
    )
    counters = {"bare": Counter(), "ours": Counter()}
    bare = Bare(counting(sdk, counters["bare"]), url, key, scope)
    ours = backend_for(counting(sdk, counters["ours"]), url, key, scope, ttl)
    times: dict[str, list[float]] = {"bare": [], "ours": []}
    requests: dict[str, int] = {"bare": 0, "ours": 0}
    outcomes: dict[str, int] = {}
    try:
        for i, prompt in enumerate(prompts(random.Random(SEED), n + WARMUP)):
            order = ("bare", "ours") if i % 2 == 0 else ("ours", "bare")
            for arm in order:
                before = counters[arm].calls
                started = time.perf_counter()
                if arm == "bare":
                    await bare.recall(prompt)
                else:
                    outcome = await recall(ours, prompt, budget)
                    outcomes[outcome.outcome] = outcomes.get(outcome.outcome, 0) + 1
                elapsed = (time.perf_counter() - started) * 1000
                if i >= WARMUP:
                    times[arm].append(elapsed)
                    requests[arm] += counters[arm].calls - before
    finally:
        await bare.close()
        await ours.close()
    for arm in ("bare", "ours"):
        print(summary(f"recall {arm}", times[arm], f"{requests[arm] / len(times[arm]):.2f} requests/recall"))
    ratio = statistics.median(times["ours"]) / statistics.median(times["bare"])
    print(f"recall p50 ratio ours/bare = {ratio:.2f} (target <= 0.80); outcomes {outcomes}")


async def calibrate(sdk: SdkBindings, url: str, key: str, tag: str) -> None:
    """Server cost of an add: per request vs per message (what batching can and cannot save)."""
    client = sdk.memory_client(
        url, key, "default", team_id=f"team-{tag}", agent_id="agt-cal", user_id="usr-cal"
    )
    costs: dict[int, float] = {}
    try:
        for size in (2, 100):
            runs = []
            for rep in range(5):
                messages = [
                    {
                        "role": "user" if i % 2 == 0 else "assistant",
                        "content": f"calibration {rep} message {i}",
                    }
                    for i in range(size)
                ]
                started = time.perf_counter()
                await client.add_conversation(messages, session_id=f"cal-{tag}-{size}-{rep}")
                runs.append((time.perf_counter() - started) * 1000)
            costs[size] = statistics.median(runs)
    finally:
        await client.close()
    per_message = max((costs[100] - costs[2]) / 98, 0.0)
    fixed = costs[2] - 2 * per_message
    best = costs[2] / (fixed / TURNS_PER_SESSION + 2 * per_message)
    print(
        f"add cost: 2 messages {costs[2]:.1f} ms, 100 messages {costs[100]:.1f} ms = about {fixed:.1f} ms "
        f"per request + {per_message:.2f} ms per message; {TURNS_PER_SESSION} turns per add can at best "
        f"be {best:.1f}x faster than one add per turn"
    )


async def per_turn_adds(
    sdk: SdkBindings, url: str, key: str, scope: Scope, turns: list[ConversationTurn]
) -> None:
    """The baseline: one `add_conversation` per turn, in order (the reference adapter's flush)."""
    client = sdk.memory_client(
        url, key, "default", team_id=scope.team, agent_id=scope.agent, user_id=scope.user, timeout=30
    )
    try:
        for t in turns:
            pair = [
                {"role": "user", "content": t.user_text},
                {"role": "assistant", "content": t.assistant_text},
            ]
            await client.add_conversation(pair, session_id=t.memory_session_id)
    finally:
        await client.close()


async def outbox_delivery(
    sdk: SdkBindings, url: str, key: str, scope: Scope, turns: list[ConversationTurn], parallel: int
) -> None:
    """Ours: the turns queued in a real outbox, delivered by the sidecar's worker into
    `MemoryCoreBackend` (batches of <= 50 turns per session, `parallel` sessions in flight)."""
    backend = backend_for(sdk, url, key, scope, 0)
    with tempfile.TemporaryDirectory(prefix="bench-outbox-") as tmp, Outbox.open(Path(tmp)) as outbox:
        outbox.enqueue(turns)
        try:
            report = await DeliveryWorker(outbox, backend, parallel_sessions=parallel).flush()
        finally:
            await backend.close()
        if report.delivered != len(turns) or report.counts.waiting:
            raise SystemExit(f"delivery incomplete: {report}")


async def stored_messages(sdk: SdkBindings, url: str, key: str, scope: Scope) -> int:
    backend = backend_for(sdk, url, key, scope, 0)
    try:
        return (await backend.status()).counts.get("turns", -1)  # L0 rows of the scope
    finally:
        await backend.close()


def cpu_seconds(pid: int | None) -> float | None:
    """CPU time a local process has used so far (user + system), from /proc; None if unknown."""
    if pid is None:
        return None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def bench_delivery(
    sdk: SdkBindings, url: str, key: str, tag: str, parallel: int, server_pid: int | None
) -> None:
    """Three arms over fresh copies of the same 25 sessions x 20 turns, run A B C C B A so the
    server's drift (its tables grow, its L1 extraction runs behind) weighs on each alike."""
    arms = ("per-turn add", "outbox, 1 session at a time", f"outbox, {parallel} sessions at once")
    runs: dict[str, list[float]] = {arm: [] for arm in arms}
    for n, arm in enumerate([*arms, *reversed(arms)]):
        scope = Scope(f"team-{tag}", f"agt-{tag}", f"usr-{tag}-d{n}")
        turns = corpus(random.Random(SEED), f"{tag}-d{n}")
        cpu_before = cpu_seconds(server_pid)
        started = time.perf_counter()
        if arm == arms[0]:
            await per_turn_adds(sdk, url, key, scope, turns)
        else:
            await outbox_delivery(sdk, url, key, scope, turns, 1 if arm == arms[1] else parallel)
        elapsed = time.perf_counter() - started
        cpu_after = cpu_seconds(server_pid)
        runs[arm].append(elapsed)
        stored = await stored_messages(sdk, url, key, scope)
        busy = ""
        if cpu_before is not None and cpu_after is not None:
            used = cpu_after - cpu_before
            busy = f"; server on CPU {used:5.2f} s = {used / elapsed:4.0%} of the run"
        print(
            f"delivery {arm:<30} {len(turns)} turns in {elapsed:6.2f} s = "
            f"{len(turns) / elapsed:7.1f} turns/s ({stored} messages stored, {2 * len(turns)} expected){busy}"
        )
    base = sum(runs[arms[0]])
    for arm in arms[1:]:
        print(f"delivery speed-up {arm} / per-turn add = {base / sum(runs[arm]):.1f}x (target >= 5x)")


async def bench_recall_during_drain(
    sdk: SdkBindings, url: str, key: str, tag: str, parallels: list[int]
) -> None:
    """What a backlog drain costs the user: recall latency (another identity on the same server,
    a recall every 50 ms) while the worker delivers 500 queued turns, per sessions in flight."""
    budget = RecallBudget(
        deadline_ms=5000,
        limits={Layer.L3: 1, Layer.L1: L1_LIMIT, Layer.L2: L2_LIMIT, Layer.L0: L0_LIMIT, Layer.SKILL: 0},
        skip_trivial=False,
    )
    reader = backend_for(sdk, url, key, Scope(f"team-{tag}", f"agt-{tag}", f"usr-{tag}-reader"), 60)
    questions = prompts(random.Random(SEED), 10_000)

    async def one(i: int) -> float:
        started = time.perf_counter()
        await recall(reader, questions[i], budget)
        return (time.perf_counter() - started) * 1000

    try:
        idle = [await one(i) for i in range(20)]
        print(summary("recall, no delivery running", idle))
        for n, parallel in enumerate(parallels):
            scope = Scope(f"team-{tag}", f"agt-{tag}", f"usr-{tag}-drain{n}")
            drain = asyncio.create_task(
                outbox_delivery(sdk, url, key, scope, corpus(random.Random(SEED), f"{tag}-r{n}"), parallel)
            )
            started, during = time.perf_counter(), []
            while not drain.done():
                during.append(await one(len(during)))
                await asyncio.sleep(0.05)
            await drain
            print(
                summary(f"recall while draining, {parallel} in flight", during)
                + f"  [drain {time.perf_counter() - started:.2f} s]"
            )
    finally:
        await reader.close()


def seed_fake_layers(fake: FakeMemoryCore, scope: Scope) -> None:
    """What MemoryCore's pipeline would have extracted (the fake has no pipeline)."""
    ids = (scope.team, scope.agent, scope.user)
    for topic, advice, path in TOPICS:
        fake.add_atomic(ids, f"In the {topic} code the team wants {advice}")
        fake.put_scenario(scope.team, scope.agent, path, f"# {topic}\n{advice}\n" * 20, f"{topic}: {advice}")
    fake.put_core(scope.team, scope.agent, "Backend engineer; Go; hates magic numbers. " * 8)


async def seed_recall_scope(
    sdk: SdkBindings, url: str, key: str, scope: Scope, *, await_pipeline: bool
) -> None:
    turns = corpus(random.Random(SEED + 1), f"recall-{scope.user}")
    backend = backend_for(sdk, url, key, scope, 0)
    try:
        await backend.conversation.add(turns)
        if not await_pipeline:
            return
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            counts = (await backend.status()).counts
            if (
                counts.get("atomic", 0) > 0
                and counts.get("scenarios", 0) > 0
                and counts.get("profile", 0) > 0
            ):
                print(f"seeded scope: {counts}")
                return
            await asyncio.sleep(2)
        print(f"warning: L1/L2/L3 not all present after 90 s: {(await backend.status()).counts}")
    finally:
        await backend.close()


def _run_fake(conn: Connection, scope: Scope) -> None:
    fake = FakeMemoryCore()
    fake.cost_ms.update(ANCHOR_COSTS_MS)
    fake.cost_per_message_ms = ADD_COST_PER_MESSAGE_MS
    fake.cost_per_message_per_row_ms = ADD_COST_PER_MESSAGE_PER_ROW_MS
    seed_fake_layers(fake, scope)
    with serve(fake) as url:
        conn.send(url)
        conn.recv()  # until the parent is done


@contextlib.contextmanager
def fake_server(scope: Scope) -> Iterator[str]:
    """The fake in a process of its own, so its Python work does not share the bench's GIL."""
    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe()
    process = context.Process(target=_run_fake, args=(child, scope), daemon=True)
    process.start()
    try:
        yield str(parent.recv())
    finally:
        parent.send("stop")
        process.join(timeout=10)


async def measure(
    sdk: SdkBindings, url: str, key: str, scope: Scope, tag: str, args: Any, *, real: bool
) -> None:
    if not args.skip_recall:
        await seed_recall_scope(sdk, url, key, scope, await_pipeline=real)
        await bench_recall(sdk, url, key, scope, args.ttl, args.prompts)
    await calibrate(sdk, url, key, tag)
    await bench_delivery(sdk, url, key, tag, args.parallel, args.server_pid)
    if args.drain_recall:
        await bench_recall_during_drain(sdk, url, key, tag, [1, args.parallel])


async def run(args: Any) -> None:
    try:
        sdk, official = load_sdk(), True
    except BackendConfigError:
        sdk, official = fake_sdk_bindings(), False
    tag = uuid.uuid4().hex[:8]
    scope = Scope(f"team-bench-{tag}", f"agt-bench-{tag}", f"usr-bench-{tag}")
    print(f"SDK: {'official ' + sdk.version if official else 'fake (the official SDK is not installed)'}")
    if args.url:
        if not official:
            sys.exit("the official SDK is needed to bench a real server")
        print(f"server: {args.url} (real MemoryCore); cache TTL {args.ttl} s")
        await measure(sdk, args.url, args.key, scope, tag, args, real=True)
        return
    with fake_server(scope) as url:
        print(f"server: fake MemoryCore at {url} with the perf-anchor cost model; cache TTL {args.ttl} s")
        await measure(sdk, url, FAKE_API_KEY, scope, tag, args, real=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="a real MemoryCore base URL (default: the fake server)")
    parser.add_argument("--key", default="", help="the gateway API key for --url")
    parser.add_argument("--prompts", type=int, default=200)
    parser.add_argument("--ttl", type=float, default=60.0, help="cache TTL for L2/L3 (seconds)")
    parser.add_argument(
        "--parallel", type=int, default=DEFAULT_PARALLEL_SESSIONS, help="sessions in flight at once"
    )
    parser.add_argument("--skip-recall", action="store_true", help="measure delivery only")
    parser.add_argument(
        "--drain-recall", action="store_true", help="also: recall latency while a backlog drains"
    )
    parser.add_argument(
        "--server-pid", type=int, help="pid of a local server process: report its CPU time per delivery run"
    )
    args = parser.parse_args()
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
