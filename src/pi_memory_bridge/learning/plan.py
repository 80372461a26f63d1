"""From validated model answers to a job's decisions: pure rules, no I/O.

1. `candidates_from_extraction`: the extracted memories with their source turns and the time they
   were said; each text redacted again (one with a secret is dropped, never stored redacted),
   anything that looks like file contents dropped, and the post-check (`postcheck`) applied:
   an instruction to the agent, or a memory the user's text of its turns does not say, is
   refused; one that would change how the agent acts, drawn from pasted text, is held.
2. `cheap_pass`: exact and near-exact duplicates are skipped, a memory with nothing similar stored
   is added; only the rest needs the reconcile call.
3. `plan_from_decisions`: the model's decisions checked against what it was shown (every new
   memory decided once, only known ids, each existing memory claimed once) and against the rule
   that hand-saved memories are never replaced automatically (such a decision becomes a proposal).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from pi_memory_bridge.backends.learning import JobOp, MemoryRow, OpKind, PendingTurn, content_key
from pi_memory_bridge.instruction_rules import instruction_in
from pi_memory_bridge.learning.cheap import is_exact_duplicate, is_near_duplicate
from pi_memory_bridge.learning.parse import Refused
from pi_memory_bridge.learning.postcheck import changes_how_agent_acts, support_of
from pi_memory_bridge.learning.prompts import PromptExisting, PromptNew
from pi_memory_bridge.learning.schemas import ExtractAnswer, FailReason, ReconcileAnswer
from pi_memory_bridge.plural import counted
from pi_memory_bridge.redact import redact_text

_FILE_MARKERS = ("```", "[code omitted]", "#!/", "<?xml", "-----BEGIN")


@dataclass(frozen=True, slots=True)
class Candidate:
    ref: str  # n1, n2, ... in the reconcile prompt
    kind: str
    text: str
    turn_ids: tuple[str, ...]
    observed_at: datetime
    project: str | None
    tags: tuple[str, ...] = ()
    questions: tuple[str, ...] = ()
    held: bool = False  # drawn from pasted text and changes how the agent acts: a proposal only


@dataclass(frozen=True, slots=True)
class Extraction:
    candidates: tuple[Candidate, ...]
    dropped: Counter[str]  # reason -> count, for status

    @property
    def refused(self) -> Counter[str]:
        """The post-check's refusals (the other drops are the model's own slips)."""
        return Counter({k: n for k, n in self.dropped.items() if k.startswith(REFUSED_PREFIXES)})

    def refusal_note(self) -> str:
        """The job record's word on what the post-check refused."""
        refused = self.refused
        if not refused:
            return ""
        what = "; ".join(f"{n} {reason}" for reason, n in sorted(refused.items()))
        return f"refused {counted(refused.total(), 'memory')}: {what}"


INSTRUCTION = "instruction to the agent"
UNSUPPORTED = "not said in the user's words of the turns it cites"
REFUSED_PREFIXES = (INSTRUCTION, UNSUPPORTED)
HELD_WHY = "learned from text you pasted or a tool returned, not your own words: held for your review"


def looks_like_file_content(text: str) -> bool:
    return "\n" in text.strip() or any(marker in text for marker in _FILE_MARKERS)


def candidates_from_extraction(
    answer: ExtractAnswer, turns: Mapping[str, PendingTurn], project: str | None
) -> Extraction | Refused:
    """`turns` maps the prompt's turn refs (t1, ...) to the turns they stand for."""
    dropped: Counter[str] = Counter()
    seen: set[str] = set()
    out: list[Candidate] = []
    for memory in answer.memories:
        unknown = [ref for ref in memory.turns if ref not in turns]
        if unknown:
            return Refused(FailReason.UNKNOWN_ID, f"turn ids not shown: {', '.join(sorted(set(unknown)))}")
        # the tags and questions are held to the memory's own rules: one doubtful cue and the
        # whole memory is dropped (the model wrote down something it should not have)
        texts = (memory.text, *memory.tags, *memory.questions)
        if any(redact_text(t).count for t in texts):
            dropped["held a secret"] += 1
            continue
        if any(looks_like_file_content(t) or "[REDACTED" in t for t in texts):
            dropped["looked like file contents"] += 1
            continue
        rule = instruction_in(texts)
        if rule is not None:
            dropped[f"{INSTRUCTION} ({rule})"] += 1
            continue
        sources = [turns[ref] for ref in dict.fromkeys(memory.turns)]
        support = support_of(memory.text, [t.user_text for t in sources])
        if not support.supported:
            dropped[UNSUPPORTED] += 1
            continue
        key = content_key(memory.text)
        if not key or key in seen:
            dropped["repeated in the answer"] += 1
            continue
        seen.add(key)
        out.append(
            Candidate(
                ref=f"n{len(out) + 1}",
                kind=memory.kind,
                text=memory.text,
                turn_ids=tuple(t.turn_id for t in sources),
                observed_at=max(t.created_at for t in sources),
                project=project if memory.scope == "project" else None,
                tags=tuple(memory.tags),
                questions=tuple(memory.questions),
                held=support.source == "pasted" and changes_how_agent_acts(memory.kind, memory.text),
            )
        )
    return Extraction(tuple(out), dropped)


def _op(
    candidate: Candidate, op: OpKind, targets: Sequence[str] = (), why: str = "", text: str = ""
) -> JobOp:
    return JobOp(
        op=op,
        kind=candidate.kind,
        text=text or candidate.text,
        targets=tuple(targets),
        source_turn_ids=candidate.turn_ids,
        observed_at=candidate.observed_at,
        project=candidate.project,
        why=why,
        # what the model wrote for the candidate's topic also fits a merged sentence about it
        tags=candidate.tags,
        questions=candidate.questions,
    )


def _held(candidate: Candidate, targets: Sequence[str] = (), text: str = "", action: str = "add") -> JobOp:
    """What learning would have done with a held memory, as a proposal for the user to answer."""
    why = HELD_WHY if action == "add" else f"{action}: {HELD_WHY}"
    return _op(candidate, "propose", targets, why, text)


@dataclass(frozen=True, slots=True)
class CheapPass:
    ops: tuple[JobOp, ...]
    to_reconcile: tuple[tuple[Candidate, tuple[MemoryRow, ...]], ...]


def cheap_pass(
    candidates: Sequence[Candidate],
    equal_active: Mapping[str, MemoryRow],
    similar: Mapping[str, Sequence[MemoryRow]],
) -> CheapPass:
    """`equal_active` maps duplicate keys to active memories; `similar` candidate refs to the most
    similar active memories (best first)."""
    ops: list[JobOp] = []
    rest: list[tuple[Candidate, tuple[MemoryRow, ...]]] = []
    for candidate in candidates:
        equal = equal_active.get(content_key(candidate.text))
        if equal is not None:
            ops.append(_op(candidate, "skip", [equal.memory_id], "exact duplicate"))
            continue
        near = [m for m in similar.get(candidate.ref, ()) if m.active]
        twin = next((m for m in near if is_near_duplicate(candidate.text, m.text)), None)
        if twin is not None:
            why = "exact duplicate" if is_exact_duplicate(candidate.text, twin.text) else "near duplicate"
            ops.append(_op(candidate, "skip", [twin.memory_id], why))
        elif not near:
            ops.append(
                _held(candidate) if candidate.held else _op(candidate, "add", why="nothing similar stored")
            )
        else:
            rest.append((candidate, tuple(near)))
    return CheapPass(tuple(ops), tuple(rest))


@dataclass(frozen=True, slots=True)
class ReconcileView:
    new: tuple[PromptNew, ...]
    existing: tuple[PromptExisting, ...]
    pool: Mapping[str, MemoryRow]  # m-ref -> row
    candidates: Mapping[str, Candidate]  # n-ref -> candidate


def reconcile_view(pairs: Sequence[tuple[Candidate, Sequence[MemoryRow]]]) -> ReconcileView:
    refs: dict[str, str] = {}  # memory_id -> m-ref
    pool: dict[str, MemoryRow] = {}
    new: list[PromptNew] = []
    for candidate, similar in pairs:
        shown: list[str] = []
        for row in similar:
            ref = refs.get(row.memory_id)
            if ref is None:
                ref = refs[row.memory_id] = f"m{len(refs) + 1}"
                pool[ref] = row
            shown.append(ref)
        new.append(
            PromptNew(candidate.ref, candidate.kind, candidate.text, candidate.observed_at, tuple(shown))
        )
    existing = tuple(PromptExisting(ref, r.kind, r.text, r.observed_at) for ref, r in pool.items())
    return ReconcileView(tuple(new), existing, pool, {c.ref: c for c, _ in pairs})


HAND_SAVED_WHY = "would replace a memory you saved by hand: proposed, not applied"


def plan_from_decisions(answer: ReconcileAnswer, view: ReconcileView) -> list[JobOp] | Refused:
    decided = Counter(d.new for d in answer.decisions)
    unknown_new = sorted(ref for ref in decided if ref not in view.candidates)
    if unknown_new:
        return Refused(FailReason.UNKNOWN_ID, f"new memory ids not shown: {', '.join(unknown_new)}")
    missing = sorted(ref for ref in view.candidates if ref not in decided)
    twice = sorted(ref for ref, n in decided.items() if n > 1)
    if missing or twice:
        return Refused(
            FailReason.OFF_SCHEMA, f"each new memory needs one decision (missing {missing}, repeated {twice})"
        )
    unknown_targets = sorted({t for d in answer.decisions for t in d.targets if t not in view.pool})
    if unknown_targets:
        return Refused(FailReason.UNKNOWN_ID, f"existing memory ids not shown: {', '.join(unknown_targets)}")
    claimed = Counter(
        t for d in answer.decisions if d.action in ("supersede", "merge") for t in set(d.targets)
    )
    if any(n > 1 for n in claimed.values()):
        return Refused(FailReason.OFF_SCHEMA, "one existing memory is replaced by two decisions")
    ops: list[JobOp] = []
    for d in answer.decisions:
        candidate = view.candidates[d.new]
        rows = [view.pool[t] for t in dict.fromkeys(d.targets)]
        ids = [r.memory_id for r in rows]
        shape = _shape_problem(d.action, len(rows), d.text is not None)
        if shape:
            return Refused(FailReason.OFF_SCHEMA, f"{d.new}: {shape}")
        if candidate.held and d.action != "skip":
            if (
                d.action == "merge"
                and d.text is not None
                and (redact_text(d.text).count or looks_like_file_content(d.text) or instruction_in([d.text]))
            ):
                ops.append(_op(candidate, "skip", ids, "merged text refused"))
                continue
            text = d.text if d.action == "merge" and d.text is not None else candidate.text
            ops.append(_held(candidate, ids, text, d.action))
        elif d.action == "add":
            ops.append(_op(candidate, "add", why="model: new"))
        elif d.action == "skip":
            ops.append(_op(candidate, "skip", ids, "model: already known"))
        else:
            text = candidate.text
            if d.action == "merge":
                assert d.text is not None
                if redact_text(d.text).count or looks_like_file_content(d.text):
                    ops.append(_op(candidate, "skip", ids, "merged text refused (secret or file contents)"))
                    continue
                if instruction_in([d.text]):  # the reconcile answer is held to the same post-check
                    ops.append(
                        _op(candidate, "skip", ids, "merged text refused (an instruction to the agent)")
                    )
                    continue
                text = d.text
            hand_saved = [r.memory_id for r in rows if r.origin == "user"]
            if hand_saved:
                ops.append(_op(candidate, "propose", hand_saved, f"{d.action} {HAND_SAVED_WHY}", text))
            else:
                ops.append(_op(candidate, d.action, ids, f"model: {d.action}", text))
    return ops


def _shape_problem(action: str, targets: int, has_text: bool) -> str:
    if action == "add" and targets:
        return "add takes no targets"
    if action in ("supersede", "merge") and not targets:
        return f"{action} needs targets"
    if action == "merge" and not has_text:
        return "merge needs the combined text"
    if action != "merge" and has_text:
        return f"{action} takes no text"
    return ""
