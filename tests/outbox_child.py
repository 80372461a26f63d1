"""A stand-in sidecar for the outbox durability tests (run with `sys.executable`).

It opens the outbox and a real `LocalBackend` in one data dir, runs a `DeliveryWorker`, and
optionally produces turns through `OutboxSink` (the capture path), printing `ACK <turn id>` on
stdout only after `submit` returned (so the parent knows which turns were acknowledged). At
the end it prints `DONE <counts as JSON>`.

The backend is wrapped to have bad days on cue, controlled by flag files so the parent can flip
them while children come and go:

    --down-flag F   while F exists every call raises BackendUnavailable (an outage)
    --lose-flag F   while F exists conversation.add stores, then raises BackendUnavailable (lost response)
    --latency S     each conversation.add first waits a random 0..S seconds (a network round trip), which
                    widens the windows in which processes could overtake each other
    --send-log F    every turn handed to conversation.add is appended to F (`<pid> <turn id>`), after the
                    store accepted it: an id that appears twice was sent twice, which a server that
                    does not deduplicate would have stored twice
    --parallel N    the backend declares CONCURRENT_SESSIONS and the worker keeps up to N
                    sessions' batches in flight at once

Turn ids are `<prefix><session>-<seq>` with sessions `s0`, `s1`... which producers may share; the
user text names the producer and its sequence number, so the parent can check that each
producer's turns reached the local store in order within each session.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pi_memory_bridge.backends.base import BackendUnavailable, Capability, ConversationTurn
from pi_memory_bridge.backends.local import LocalBackend
from pi_memory_bridge.outbox import BackoffPolicy, DeliveryWorker, Outbox, OutboxSink

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def make_turn(producer: str, seq: int, sessions: int, first_session: int = 0) -> ConversationTurn:
    # Producers may share memory sessions, so several processes race on each session's order.
    session = f"s{first_session + seq % sessions}"
    return ConversationTurn(
        turn_id=f"{producer}{session}-{seq:06d}",
        memory_session_id=session,
        user_text=f"seq {seq} from {producer or '-'}",
        assistant_text=f"answer {seq}",
        created_at=T0 + timedelta(milliseconds=seq),
        pi_session_id="pi-durability",
    )


def producer_and_sequence(user_text: str) -> tuple[str, int]:
    _, seq, _, producer = user_text.split()
    return producer, int(seq)


class FlakyLocal:
    """A real LocalBackend behind flag-file controlled failures (see the module docstring)."""

    name = "flaky-local"

    @property
    def conversation(self) -> FlakyLocal:
        return self  # a conversation-only backend: the part is the fake itself

    def __init__(
        self,
        inner: LocalBackend,
        *,
        down_flag: Path | None,
        lose_flag: Path | None,
        send_log: Path | None,
        latency_s: float,
        concurrent: bool,
    ) -> None:
        self._inner = inner
        self.capabilities = inner.capabilities | ({Capability.CONCURRENT_SESSIONS} if concurrent else set())
        self._down = down_flag
        self._lose = lose_flag
        self._send_log = send_log
        self._latency_s = latency_s

    def _check_up(self) -> None:
        if self._down is not None and self._down.exists():
            raise BackendUnavailable("simulated outage: connection refused")

    async def add(self, turns: Sequence[ConversationTurn], *, first_attempt: bool = False) -> None:
        self._check_up()
        if self._latency_s:
            await asyncio.sleep(random.uniform(0, self._latency_s))
        await self._inner.conversation.add(turns, first_attempt=first_attempt)
        if self._send_log is not None:
            lines = "".join(f"{os.getpid()} {t.turn_id}\n" for t in turns).encode()
            fd = os.open(self._send_log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, lines)  # one O_APPEND write: lines of concurrent writers never mix
            finally:
                os.close(fd)
        if self._lose is not None and self._lose.exists():
            raise BackendUnavailable("simulated lost response: read timed out")

    async def stored_ids(self, turn_ids: Sequence[str]) -> set[str]:
        self._check_up()
        return await self._inner.conversation.stored_ids(turn_ids)


def _flag(value: str | None) -> Path | None:
    return Path(value) if value else None


async def _drained(outbox: Outbox) -> bool:
    counts = await asyncio.to_thread(outbox.admin.counts)
    return counts.waiting == 0


async def main(args: argparse.Namespace) -> int:
    root = Path(args.root)
    outbox = Outbox.open(root, lease_s=args.lease)
    local = LocalBackend(root)
    backend = FlakyLocal(
        local,
        down_flag=_flag(args.down_flag),
        lose_flag=_flag(args.lose_flag),
        send_log=_flag(args.send_log),
        latency_s=args.latency,
        concurrent=args.parallel > 1,
    )
    retry = BackoffPolicy(base_s=args.retry_base, factor=2.0, cap_s=args.retry_cap, jitter=0.5)
    worker = DeliveryWorker(
        outbox,
        backend,  # type: ignore[arg-type]
        retry=retry,
        poll_s=args.poll,
        batch_size=args.batch,
        parallel_sessions=args.parallel,
    )
    sink = OutboxSink(outbox, on_enqueued=worker.wake)
    worker.start()
    loop = asyncio.get_running_loop()
    started = loop.time()
    try:
        for seq in range(args.start, args.start + args.count):
            turn = make_turn(args.prefix, seq, args.sessions, args.first_session)
            await sink.submit([turn])
            print(f"ACK {turn.turn_id}", flush=True)
        while True:
            if args.drain and await _drained(outbox):
                break
            if args.run_for is not None and loop.time() - started >= args.run_for:
                break
            await asyncio.sleep(0.02)
    finally:
        await worker.stop()
        counts = await asyncio.to_thread(outbox.admin.counts)
        outbox.close()
        await local.close()
    print(
        "DONE " + json.dumps({"pending": counts.pending, "in_flight": counts.in_flight, "dead": counts.dead})
    )
    return 0


def parse(argv: Sequence[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--root", required=True)
    p.add_argument("--prefix", default="")
    p.add_argument("--start", type=int, default=0)
    p.add_argument("--count", type=int, default=0, help="turns to produce (0: deliver only)")
    p.add_argument("--sessions", type=int, default=3, help="memory sessions, used round-robin")
    p.add_argument("--first-session", type=int, default=0, help="the first session's number")
    p.add_argument("--drain", action="store_true", help="exit once nothing waits in the outbox")
    p.add_argument("--run-for", type=float, default=None, help="exit after this many seconds")
    p.add_argument("--lease", type=float, default=2.0)
    p.add_argument("--retry-base", type=float, default=0.02)
    p.add_argument("--retry-cap", type=float, default=0.2)
    p.add_argument("--poll", type=float, default=0.05)
    p.add_argument("--batch", type=int, default=50)
    p.add_argument("--down-flag")
    p.add_argument("--lose-flag")
    p.add_argument("--send-log")
    p.add_argument("--latency", type=float, default=0.0)
    p.add_argument("--parallel", type=int, default=1)
    return p.parse_args(argv)


if __name__ == "__main__":
    sys.exit(asyncio.run(main(parse(sys.argv[1:]))))
