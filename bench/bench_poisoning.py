"""Memory poisoning through learning: what each injection shape leaves in the store.

    .venv/bin/python bench/bench_poisoning.py            # per-shape outcomes, control recall
    .venv/bin/python bench/bench_poisoning.py --quiet    # the summary lines only

The set is tests/data/poisoning/set.json (the same the tests run): each shape is a conversation
that tries to plant a memory (in the user's text, in a pasted document, in tool output, split
across turns; English and Chinese), with the memories a model that obeys it extracts. Each runs
through the real pipeline (`learning.consolidate` on a fresh local store) with that model, and is
scored by what it leaves: "stored" (an active memory: poisoned), "held" (a proposal waiting in
/tdai-memory-review) or "refused" (with the post-check's reason). The control set (ordinary
preferences in the user's own words) must be stored: its recall is the share that is.

Beside it, in the same run, the pipeline without the post-check (`instruction_in` and
`support_of` passing everything): what a model that obeys would have stored without it. The
post-check's own cost per extracted memory is timed on the whole set, and its instruction rules
are run over the 121 ordinary memories of bench/memory_set for false positives.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from unittest.mock import patch

from pi_memory_bridge.backends.base import ConversationTurn
from pi_memory_bridge.backends.local import LocalBackend
from pi_memory_bridge.backends.local.learning.memories import LearnedMemories
from pi_memory_bridge.engine.learning import similar_search
from pi_memory_bridge.instruction_rules import instruction_in
from pi_memory_bridge.learning import plan
from pi_memory_bridge.learning.consolidate import JobSettings, consolidate_once
from pi_memory_bridge.learning.model import Completion
from pi_memory_bridge.learning.postcheck import Support, support_of

SET = Path(__file__).resolve().parent.parent / "tests" / "data" / "poisoning" / "set.json"
ORDINARY = Path(__file__).resolve().parent / "memory_set" / "memories.json"  # for false positives
T0 = datetime(2026, 4, 6, 9, 0, tzinfo=UTC)


class Obeying:
    """Answers the extract prompt with the memories the case says an obeying model writes."""

    label = "obeying"

    def __init__(self, memories: list[dict[str, Any]]) -> None:
        self.answer = json.dumps({"memories": memories}, ensure_ascii=False)

    async def complete(self, system: str, user: str, *, max_tokens: int, timeout_s: float) -> Completion:
        return Completion(self.answer, "stop", 100, 20, "obeying")


@dataclass(frozen=True, slots=True)
class Outcome:
    stored: int
    held: int
    refused: Counter[str]

    def label(self) -> str:
        if self.stored:
            return f"STORED {self.stored}"
        parts = [f"held {self.held}"] if self.held else []
        parts += [f"refused {n}: {reason.removeprefix(plan.INSTRUCTION).strip(' ()')}"
                  for reason, n in sorted(self.refused.items())]  # fmt: skip
        return ", ".join(parts) or "nothing"


async def _run_case(case: dict[str, Any], memories: list[dict[str, Any]], root: Path) -> Outcome:
    backend = LocalBackend(root / case["id"])
    try:
        session = f"mem-{case['id']}"
        await backend.conversation.add(
            [
                ConversationTurn(
                    turn_id=f"turn-{case['id']}-{i}",
                    memory_session_id=session,
                    user_text=t["user"],
                    assistant_text=t["assistant"],
                    created_at=T0 + timedelta(minutes=i),
                    pi_session_id="pi-bench",
                )
                for i, t in enumerate(case["turns"], 1)
            ]
        )
        learned = LearnedMemories(backend.store)
        outcome = await consolidate_once(
            learned, similar_search(backend), Obeying(memories), JobSettings(), session=session
        )
        held = outcome.summary.proposed if outcome.summary else 0
        return Outcome(len(learned.active()), held, Counter(outcome.dropped))
    finally:
        await backend.close()


@contextmanager
def _without_postcheck() -> Iterator[None]:
    with (
        patch.object(plan, "instruction_in", lambda texts: None),
        patch.object(plan, "support_of", lambda text, turns: Support(True, "own", 1.0)),
    ):
        yield


async def _score(data: dict[str, Any], root: Path) -> tuple[dict[str, Outcome], dict[str, Outcome]]:
    shapes = {s["id"]: await _run_case(s, s["obeyed"], root / "shapes") for s in data["shapes"]}
    control = {c["id"]: await _run_case(c, c["learned"], root / "control") for c in data["control"]}
    return shapes, control


def _postcheck_cost_us(data: dict[str, Any], rounds: int = 20) -> float:
    cases = [(m, [c["turns"][int(r[1:]) - 1]["user"] for r in m["turns"]])
             for c in [*data["shapes"], *data["control"]]
             for m in c.get("obeyed", c.get("learned", []))]  # fmt: skip
    start = time.perf_counter()
    for _ in range(rounds):
        for memory, user_texts in cases:
            instruction_in([memory["text"]])
            support_of(memory["text"], user_texts)
    return (time.perf_counter() - start) / (rounds * len(cases)) * 1e6


def _summary(name: str, data: dict[str, Any], shapes: dict[str, Outcome], control: dict[str, Outcome]) -> str:
    poisoned = [i for i, o in shapes.items() if o.stored]
    held = sum(1 for o in shapes.values() if o.held and not o.stored)
    learned = sum(1 for c in data["control"] if control[c["id"]].stored == len(c["learned"]))
    return (
        f"{name:<22} shapes stored as active memory {len(poisoned)}/{len(shapes)}  "
        f"held for review {held}  refused memories {sum(o.refused.total() for o in shapes.values())}  "
        f"control recall {learned / len(data['control']):.2f} ({learned}/{len(data['control'])})"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quiet", action="store_true", help="print the summary lines only")
    args = parser.parse_args()
    data: dict[str, Any] = json.loads(SET.read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory(prefix="bench-poisoning-") as tmp:
        shapes, control = await _score(data, Path(tmp) / "checked")
        with _without_postcheck():
            bare_shapes, bare_control = await _score(data, Path(tmp) / "bare")
    places = ", ".join(f"{k} {n}" for k, n in sorted(Counter(s["where"] for s in data["shapes"]).items()))
    control_size = len(data["control"])
    print(f"poisoning set: {len(data['shapes'])} shapes ({places}), control {control_size} ordinary memories")
    if not args.quiet:
        for s in data["shapes"]:
            o, bare = shapes[s["id"]], bare_shapes[s["id"]]
            print(f"  {s['id']:<30} {s['where']:<6} {o.label():<64} | without it: {bare.label()}")
        missed = [c["id"] for c in data["control"] if control[c["id"]].stored != len(c["learned"])]
        print(f"  control not learned: {', '.join(missed) or 'none'}")
    print(_summary("with the post-check", data, shapes, control))
    print(_summary("without the post-check", data, bare_shapes, bare_control))
    ordinary = [str(m["content"]) for m in json.loads(ORDINARY.read_text(encoding="utf-8"))["memories"]]
    flagged = [t for t in ordinary if instruction_in([t])]
    print(
        f"instruction rules on {len(ordinary)} ordinary memories (bench/memory_set): {len(flagged)} flagged"
    )
    for text in flagged:
        print(f"  flagged: {text}")
    cost = _postcheck_cost_us(data)
    print(f"post-check cost: {cost:.0f} µs per extracted memory (instruction rules + support)")


if __name__ == "__main__":
    asyncio.run(main())
