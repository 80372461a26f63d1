"""What a session costs at a provider that caches request prefixes, and the multi-turn scenario
that measures it (the acceptance E2E and bench/bench_prompt_cache.py run the same one).

Providers cache a request's prefix (tools, system prompt, earlier messages) and charge about a
tenth for the part that repeats the previous request from its first byte. Requests are compared
here as the provider reads them: the tool declarations, then each message in order, serialised
the same way every time; the shared prefix is counted in characters.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass

from bridge import SHIM, stored_turns
from harness import FakeModel, PiEnv, RecordedRequest, ScriptedDialogs, TextReply

# Learning off (no consolidation requests); a recall deadline that a first recall on a loaded
# machine (sidecar start, store open, model load) still meets: this measures cost, not latency.
BRIDGE_CONFIG = {"learning": {"enabled": False}, "recall": {"deadlineMs": 10_000}}

CACHED_PRICE = 0.1  # per character that repeats the previous request's prefix
FRESH_PRICE = 1.0  # per character that does not


def provider_text(request: RecordedRequest) -> str:
    """The request as a prefix cache sees it: tools first, then the messages in order."""
    parts = [request.body.get("tools") or [], *request.messages]
    return "\n".join(json.dumps(p, ensure_ascii=False, sort_keys=True) for p in parts)


@dataclass(frozen=True, slots=True)
class RequestCost:
    chars: int
    shared: int  # characters repeating the previous request from the first byte

    @property
    def share(self) -> float:
        return self.shared / self.chars if self.chars else 0.0

    @property
    def cost(self) -> float:
        return CACHED_PRICE * self.shared + FRESH_PRICE * (self.chars - self.shared)


def shared_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def request_costs(requests: Sequence[RecordedRequest]) -> list[RequestCost]:
    out: list[RequestCost] = []
    previous = ""
    for request in requests:
        text = provider_text(request)
        out.append(RequestCost(len(text), shared_prefix(previous, text)))
        previous = text
    return out


def session_cost(requests: Sequence[RecordedRequest]) -> float:
    return sum(c.cost for c in request_costs(requests))


# ---- the scenario ---------------------------------------------------------------------------

# What an earlier session told Pi: one fact a turn, each with a word nothing else uses.
FACTS = (
    "The staging cluster is called kestrel-west-kemub.",
    "Our billing service billing-quartz deploys only on Tuesdays after the 14:00 standup.",
    "The flaky integration suite is quarantined under the label flaky-orca.",
    "Database migrations go through the tool named pelican-migrate, never raw SQL.",
    "The on-call rotation hands over every Monday at 09:30 in the channel #ops-wren.",
    "Structured events go through our logger package evlog-heron; its request id field is named rid.",
)
# The later session: the question comes first, then the pasted log; each question names what it
# is about by its identifier (after a long paste a question in plain words is not found today:
# issue 23 item 2, another change). Turn 5 asks again what turn 2 recalled; turn 3 needs none.
QUESTIONS = (
    ("Which staging cluster should this go to, kestrel-west-kemub or another?", 0),
    ("Can billing-quartz deploy this today, or only on Tuesdays?", 1),
    ("Can you summarise what this log says about the parser?", None),
    ("Is flaky-orca still the label of the quarantined integration suite?", 2),
    ("Remind me: on which day does billing-quartz deploy?", 1),
    ("Should the migrations of this change go through pelican-migrate?", 3),
    ("Where does the on-call handover happen, still in #ops-wren on Mondays?", 4),
    ("Is evlog-heron still the logger for structured events, and which field holds the request id?", 5),
)
RECALLED_TURNS = [i for i, (_, fact) in enumerate(QUESTIONS) if fact is not None and i != 4]
AGAIN_TURN, FIRST_TURN = 4, 1  # turn 5 asks what turn 2 recalled (0-based)
LOG_CHARS = 2500  # of pasted log per turn


def pasted_log(turn: int, chars: int = LOG_CHARS) -> str:
    """A build log of `chars` characters, different for each turn, reproducible."""
    rng = random.Random(turn)
    lines: list[str] = []
    size = 0
    while size < chars:
        ms = rng.randint(1, 999)
        pkg = rng.choice(["parser", "lexer", "ast", "codegen", "runtime", "vm"])
        case, file = rng.randint(1, 400), rng.randint(1, 40)
        line = f"=== RUN   Test{pkg.title()}Case{case}  --- PASS ({ms}ms) {pkg}/{file}.go"
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines)[:chars]


def prompt_of(turn: int, log_chars: int = LOG_CHARS) -> str:
    question, _ = QUESTIONS[turn]
    return f"{question}\n\nHere is the log:\n{pasted_log(turn, log_chars)}"


def seed_earlier_session(env: PiEnv, model: FakeModel) -> None:
    """One earlier session with memory on: each fact said in a turn of its own (the assistant
    acknowledges it, as a model does, rather than echoing it), then captured."""
    rpc = env.start_rpc(extensions=[SHIM], dialogs=ScriptedDialogs())
    for fact in FACTS:
        model.script(TextReply("Noted, I will keep that in mind."))
        assert rpc.prompt_and_settle(f"Please remember this: {fact}").ran
    assert rpc.close() == 0
    stored = stored_turns(env)
    missing = [f for f in FACTS if not any(f in t["user_text"] for t in stored)]
    assert not missing, f"the earlier session was not captured: {missing}"


def run_session(
    env: PiEnv, model: FakeModel, *, memory: bool, log_chars: int = LOG_CHARS
) -> list[RecordedRequest]:
    """The 8-turn session; returns its model requests (one per turn: the scripted model echoes)."""
    before = len(model.chat_requests)
    rpc = env.start_rpc(extensions=[SHIM] if memory else [], dialogs=ScriptedDialogs())
    for turn in range(len(QUESTIONS)):
        assert rpc.prompt_and_settle(prompt_of(turn, log_chars)).ran
    assert rpc.close() == 0
    requests = [r for r in model.chat_requests[before:] if r.consolidation_task is None]
    assert len(requests) == len(QUESTIONS), [r.user_texts[-1][:60] for r in requests]
    return requests
