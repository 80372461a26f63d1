"""Consolidation quality, by replaying recorded model answers over multi-session transcripts.

    .venv/bin/python bench/bench_consolidation.py            # replay bench/data/consolidation/replies.json
    .venv/bin/python bench/bench_consolidation.py --record   # (re)write it from the set's scripted answers
    .venv/bin/python bench/bench_consolidation.py --record-endpoint URL --model NAME
                                    # record a real model's answers instead (OpenAI-compatible URL)

Each user of `data/consolidation/set.json` gets a fresh local store; their sessions are captured
one after the other and consolidated by the real pipeline (`learning.consolidate`), with the
model replaced by the recorded answers, keyed by a hash of the whole prompt. A prompt without a
recorded answer fails its job (as an unusable answer would), so a change to the prompts shows up
as unrecorded prompts until the answers are recorded again.

Scored against each session's gold memories:
  * extraction precision / recall: learned memories matching a gold memory (all its `must` words);
  * duplicate rate after N sessions: active memories that repeat another active one's gold;
  * supersedes: updated facts whose old memory is no longer active and links to its successor;
  * stale leakage: active memories still matching a replaced gold memory.
Beside it, in the same run, the append-only baseline (every extracted memory added, no cheap
path, no reconcile), which is what consolidation must beat on duplicates and staleness.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pi_memory_bridge.backends.base import ConversationTurn
from pi_memory_bridge.backends.local import LocalBackend
from pi_memory_bridge.backends.local.learning.learned_rows import MemoryRow
from pi_memory_bridge.backends.local.learning.memories import LearnedMemories
from pi_memory_bridge.engine.learning import similar_search
from pi_memory_bridge.learning.consolidate import JobOutcome, JobSettings, consolidate_once
from pi_memory_bridge.learning.endpoint import EndpointModel
from pi_memory_bridge.learning.model import Completion, CompletionModel
from pi_memory_bridge.learning.prompts import EXTRACT_TAG, RECONCILE_TAG

DATA = Path(__file__).resolve().parent / "data" / "consolidation"
SET = DATA / "set.json"
REPLIES = DATA / "replies.json"
FAKE_KEY = "sk-proj-" + "Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0FeDcBa98"  # redaction must keep it out
T0 = datetime(2026, 4, 6, 9, 0, tzinfo=UTC)


def prompt_hash(system: str, user: str) -> str:
    return hashlib.sha256(f"{system}\n\n{user}".encode()).hexdigest()


def load_set() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(SET.read_text(encoding="utf-8").replace("{FAKE_KEY}", FAKE_KEY))
    return data


# ---- models ---------------------------------------------------------------------------------


class Replay:
    """Answers from the recorded file; an unrecorded prompt gets an answer no job can use."""

    label = "replay"

    def __init__(self, replies: dict[str, str]) -> None:
        self.replies = replies
        self.calls = 0
        self.unrecorded = 0

    async def complete(self, system: str, user: str, *, max_tokens: int, timeout_s: float) -> Completion:
        self.calls += 1
        text = self.replies.get(prompt_hash(system, user))
        if text is None:
            self.unrecorded += 1
            text = "(no recorded answer for this prompt)"
        return Completion(text, "stop", len(system + user) // 4, len(text) // 4, "replay")


_NEW = re.compile(r"^\[(n\d+)\] \([^)]*\) (.*)$", re.MULTILINE)
_OLD = re.compile(r"^\[(m\d+)\] \([^)]*\) (.*)$", re.MULTILINE)


class Scripted:
    """Answers from the set's scripted intent: the extraction as written, the reconcile decisions
    by memory text (mapped onto the prompt's local ids). Used to record the replay file."""

    label = "scripted"

    def __init__(self) -> None:
        self.session: dict[str, Any] = {}

    async def complete(self, system: str, user: str, *, max_tokens: int, timeout_s: float) -> Completion:
        if system.startswith(EXTRACT_TAG):
            text = json.dumps({"memories": self.session.get("extract", [])}, ensure_ascii=False)
        elif system.startswith(RECONCILE_TAG):
            text = json.dumps({"decisions": self._decisions(user)}, ensure_ascii=False)
        else:
            raise AssertionError("not a consolidation prompt")
        return Completion(text, "stop", 0, 0, "scripted")

    def _decisions(self, user: str) -> list[dict[str, Any]]:
        intents: dict[str, Any] = self.session.get("reconcile", {})
        existing = dict(_OLD.findall(user))
        out: list[dict[str, Any]] = []
        for ref, text in _NEW.findall(user):
            intent = intents.get(text, {"action": "add"})
            decision: dict[str, Any] = {"new": ref, "action": intent["action"]}
            targets = [m for m, old in existing.items() for part in intent.get("targets", []) if part in old]
            if targets:
                decision["targets"] = sorted(set(targets))
            if "text" in intent:
                decision["text"] = intent["text"]
            out.append(decision)
        return out


class Recorder:
    """Wraps a model and keeps every answer under its prompt's hash."""

    def __init__(self, model: CompletionModel | Scripted) -> None:
        self.model = model
        self.replies: dict[str, str] = {}
        self.label = model.label

    async def complete(self, system: str, user: str, *, max_tokens: int, timeout_s: float) -> Completion:
        completion = await self.model.complete(system, user, max_tokens=max_tokens, timeout_s=timeout_s)
        self.replies[prompt_hash(system, user)] = completion.text
        return completion


# ---- running --------------------------------------------------------------------------------


@dataclass
class UserResult:
    learned: list[tuple[int, MemoryRow]] = field(default_factory=list)  # (session index, memory)
    active: list[MemoryRow] = field(default_factory=list)
    history: list[MemoryRow] = field(default_factory=list)
    outcomes: list[JobOutcome] = field(default_factory=list)
    decisions: int = 0
    cheap: int = 0  # decisions made without a model call (duplicates, nothing similar stored)
    job_ms: list[float] = field(default_factory=list)  # our side of a job: the model answers at once


def _turns(user: str, index: int, session: dict[str, Any]) -> list[ConversationTurn]:
    start = T0 + timedelta(days=7 * index)
    return [
        ConversationTurn(
            turn_id=f"{user}-s{index}-t{i}",
            memory_session_id=f"{user}-s{index}",
            user_text=t["user"],
            assistant_text=t["assistant"],
            created_at=start + timedelta(minutes=i),
        )
        for i, t in enumerate(session["turns"])
    ]


async def run_user(user: dict[str, Any], model: Any, root: Path, *, append_only: bool) -> UserResult:
    backend = LocalBackend(root)
    learned_memories = LearnedMemories(backend.store)
    result = UserResult()
    try:
        for index, session in enumerate(user["sessions"]):
            if isinstance(model, Scripted):
                model.session = session
            elif isinstance(model, Recorder) and isinstance(model.model, Scripted):
                model.model.session = session
            await backend.conversation.add(_turns(user["name"], index, session))
            before = {r.memory_id for r in learned_memories.learned()}
            if append_only:
                await _append_only(backend, session, index)
            else:
                while True:
                    started = time.perf_counter()
                    outcome = await consolidate_once(
                        learned_memories, similar_search(backend), model, JobSettings(max_failures=1)
                    )
                    result.job_ms.append((time.perf_counter() - started) * 1000)
                    if outcome.kind == "nothing":
                        break
                    result.outcomes.append(outcome)
            result.learned += [(index, r) for r in learned_memories.learned() if r.memory_id not in before]
        result.history = learned_memories.learned()
        for outcome in result.outcomes:
            if outcome.summary is not None:
                ops = learned_memories.ledger.job_ops(outcome.summary.job_id)
                result.decisions += len(ops)
                result.cheap += sum(1 for op in ops if not op.why.startswith("model"))
        result.active = [r for r in result.history if r.active]
    finally:
        await backend.close()
    return result


async def _append_only(backend: LocalBackend, session: dict[str, Any], index: int) -> None:
    from pi_memory_bridge.backends.local.learning.learned_rows import JobOp, JobRecord, new_job_id
    from pi_memory_bridge.redact import redact_text

    turns = _turns("x", index, session)
    ops = tuple(
        JobOp("add", m["kind"], m["text"], observed_at=turns[0].created_at)
        for m in session.get("extract", [])
        if not redact_text(m["text"]).count
    )
    record = JobRecord(new_job_id(), "append-only", 0, 0, (), ops)
    LearnedMemories(backend.store).writer.apply_job(record)


# ---- scoring --------------------------------------------------------------------------------


def matches(gold: dict[str, Any], text: str) -> bool:
    folded = text.casefold()
    return all(word.casefold() in folded for word in gold["must"])


@dataclass
class Score:
    learned: int = 0
    learned_matching: int = 0
    gold: int = 0
    gold_found: int = 0
    active: int = 0
    active_duplicates: int = 0
    updates: int = 0
    updates_correct: int = 0
    stale_active: int = 0
    calls: int = 0
    failed_jobs: int = 0
    decisions: int = 0
    cheap: int = 0

    def add(self, other: Score) -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))


def score_user(user: dict[str, Any], result: UserResult) -> Score:
    s = Score()
    golds = [(i, g) for i, session in enumerate(user["sessions"]) for g in session["gold"]]
    s.gold = len(golds)
    s.learned = len(result.learned)
    s.learned_matching = sum(1 for _, m in result.learned if any(matches(g, m.text) for _, g in golds))
    s.gold_found = sum(1 for i, g in golds if any(j == i and matches(g, m.text) for j, m in result.learned))
    s.active = len(result.active)
    current = [g for _, g in golds if not any(o.get("replaces") == g["id"] for _, o in golds)]
    for g in current:
        hits = [m for m in result.active if matches(g, m.text)]
        s.active_duplicates += max(0, len(hits) - 1)
    by_id = {g["id"]: g for _, g in golds}
    for _, g in golds:
        old = by_id.get(g.get("replaces", ""))
        if old is None:
            continue
        s.updates += 1
        new_rows = [m for m in result.active if matches(g, m.text)]
        old_rows = [m for m in result.history if matches(old, m.text) and not matches(g, m.text)]
        retired = all(not m.active and m.superseded_by is not None for m in old_rows)
        s.updates_correct += int(bool(new_rows) and bool(old_rows) and retired)
        s.stale_active += sum(1 for m in old_rows if m.active)
    s.failed_jobs = sum(1 for o in result.outcomes if o.kind == "failed")
    s.decisions, s.cheap = result.decisions, result.cheap
    return s


def ratio(a: int, b: int) -> str:
    return f"{a / b:.2f}" if b else "n/a"


def report(label: str, s: Score) -> str:
    return (
        f"{label:<24} precision {ratio(s.learned_matching, s.learned)} ({s.learned_matching}/{s.learned})  "
        f"recall {ratio(s.gold_found, s.gold)} ({s.gold_found}/{s.gold})  "
        f"duplicates {ratio(s.active_duplicates, s.active)} ({s.active_duplicates}/{s.active} active)  "
        f"supersedes {s.updates_correct}/{s.updates}  stale active {s.stale_active}  "
        f"model calls {s.calls}  failed jobs {s.failed_jobs}  "
        f"decided without a model {s.cheap}/{s.decisions}"
    )


async def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--record", action="store_true", help="record the set's scripted answers")
    parser.add_argument(
        "--record-endpoint", help="record a real model's answers (OpenAI-compatible base URL)"
    )
    parser.add_argument("--model", default="", help="the model name at --record-endpoint")
    args = parser.parse_args()
    data = load_set()
    recorder: Recorder | None = None
    if args.record_endpoint:
        recorder = Recorder(EndpointModel(args.record_endpoint, args.model, {}))
    elif args.record:
        recorder = Recorder(Scripted())
    replay = Replay(
        json.loads(REPLIES.read_text(encoding="utf-8")) if REPLIES.exists() and not recorder else {}
    )
    total, baseline = Score(), Score()
    job_ms: list[float] = []
    with tempfile.TemporaryDirectory(prefix="bench-consolidation-") as tmp:
        for n, user in enumerate(data["users"]):
            model: Any = recorder if recorder is not None else replay
            calls_before = replay.calls
            result = await run_user(user, model, Path(tmp) / f"u{n}", append_only=False)
            job_ms += result.job_ms
            s = score_user(user, result)
            s.calls = replay.calls - calls_before
            total.add(s)
            baseline.add(score_user(user, await run_user(user, None, Path(tmp) / f"b{n}", append_only=True)))
    if recorder is not None:
        REPLIES.write_text(json.dumps(recorder.replies, indent=1, ensure_ascii=False, sort_keys=True) + "\n")
        print(f"recorded {len(recorder.replies)} answers into {REPLIES}")
    users = len(data["users"])
    sessions = sum(len(u["sessions"]) for u in data["users"])
    print(f"consolidation replay: {users} users, {sessions} sessions, {total.gold} gold memories")
    print(report("consolidation", total))
    print(report("append-only baseline", baseline))
    if job_ms:
        ordered = sorted(job_ms)
        print(
            f"pipeline per job (model answers at once; prompts, validation, search, store writes): "
            f"p50 {ordered[len(ordered) // 2]:.1f} ms, max {ordered[-1]:.1f} ms over {len(ordered)} calls"
        )
    if replay.unrecorded:
        print(f"UNRECORDED prompts: {replay.unrecorded} (prompts changed? run with --record)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
