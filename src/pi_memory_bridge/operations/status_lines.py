"""The status report's lines and problems, from the live facts (config, outbox counts, the
session's identity, the last recall): shared by `/tdai-memory-status`, `pi-memory-bridge status`
and the inspector's overview. The report itself is `vocabulary.status`."""

from __future__ import annotations

from collections.abc import Sequence

from pi_memory_bridge.capture.identity import MAIN_BRANCH, BranchIdentity
from pi_memory_bridge.config import LoadedConfig
from pi_memory_bridge.inspector_registry import RunningInspector
from pi_memory_bridge.outbox import OutboxCounts
from pi_memory_bridge.plural import counted, noun
from pi_memory_bridge.recall import Layer, RecallOutcome
from pi_memory_bridge.vocabulary.status import Problem


def config_problems(loaded: LoadedConfig | None) -> list[Problem]:
    if loaded is None:
        return []
    return [Problem(str(cp), "edit the file named above, then run /reload") for cp in loaded.problems]


def outbox_problems(counts: OutboxCounts, pause_reason: str | None) -> list[Problem]:
    problems: list[Problem] = []
    if counts.dead:
        problems.append(
            Problem(
                f"the memory store refused {counted(counts.dead, 'captured turn')}",
                "see `/tdai-memory-outbox list dead`, then requeue or purge them",
            )
        )
    if counts.quarantined:
        problems.append(
            Problem(
                f"{counted(counts.quarantined, 'captured turn')} could not be read back and "
                f"{noun(counts.quarantined, 'was', 'were')} set aside",
                "see `/tdai-memory-outbox list quarantined`; purge them when done",
            )
        )
    if pause_reason:
        problems.append(
            Problem(
                f"storing captured turns is paused: {pause_reason}",
                "fix the backend configuration, then `/tdai-memory-outbox flush`",
            )
        )
    return problems


def sdk_problems(loaded: LoadedConfig | None, sdk_installed: bool, install_command: str) -> list[Problem]:
    if loaded is None or loaded.config.backend != "memorycore" or sdk_installed:
        return []
    return [Problem("the MemoryCore SDK is not installed", f"install it: {install_command}")]


def mask(value: str) -> str:
    return value if len(value) <= 12 else f"{value[:8]}…{value[-4:]}"


def describe_identity(identity: BranchIdentity | None) -> str:
    if identity is None:
        return "no active session"
    return f"{mask(identity.memory_session_id)} (tree path {identity.branch})"


def describe_session(identity: BranchIdentity | None) -> str:
    """Which Pi session this is and where its turns go, in words that do not read as git."""
    if identity is None:
        return "This session: no Pi session has used memory yet."
    where = (
        "its main conversation"
        if identity.branch == MAIN_BRANCH
        else f"the /tree path that starts at entry {mask(identity.branch)}"
    )
    return f"This session: Pi session {mask(identity.pi_session_id)}; new turns are stored under {where}."


_LAYER_WORDS = {
    Layer.L3: "your profile",
    Layer.L1: "facts and preferences",
    Layer.L2: "scenario notes",
    Layer.L0: "earlier conversations",
    Layer.SKILL: "learned skills",
}


def describe_recalled(last: RecallOutcome | None) -> str:
    """What the last prompt got from memory and why, in words."""
    if last is None:
        return "Last recall: none yet in this Pi session."
    if last.outcome == "empty":
        return "Last recall: nothing in memory matched the last prompt, so nothing was added."
    used = [f"{r.items} from {_LAYER_WORDS[r.layer]}" for r in last.layers if r.state == "ok" and r.items]
    text = (
        f"Last recall: {counted(last.items, 'remembered item')} matched the last prompt and "
        f"{noun(last.items, 'was', 'were')} added to it as "
        f"reference ({', '.join(used)}), in {last.elapsed_ms:.0f} ms."
    )
    missed = [_LAYER_WORDS[r.layer] for r in last.layers if r.state in ("failed", "timeout")]
    if missed:
        text += f" Not reached in time or failed: {', '.join(missed)}."
    return text


def describe_waiting(counts: OutboxCounts | None, pause_reason: str | None) -> str:
    if counts is None:
        return "Waiting: unknown (the queue of captured turns cannot be read)."
    if not counts.waiting:
        return "Waiting: nothing; every captured turn is stored."
    text = f"Waiting: {counted(counts.waiting, 'captured turn')} to be stored"
    if pause_reason:
        return f"{text}; delivery is paused (see below)."
    if counts.next_attempt_at is not None and counts.last_error:
        return f"{text}; the last try failed, the next is at {counts.next_attempt_at:%H:%M:%S} UTC."
    return f"{text}; they are on their way."


def describe_embeddings(
    state: str, reason: str, turns_left: int | None, memories_left: int | None = 0
) -> str:
    """Search by meaning in a sentence: `state` is the model's in this process (`ModelState`
    value; "not loaded yet": not loaded here, as in `pi-memory-bridge status`), `turns_left` and
    `memories_left` the rows still waiting for their vector (None: not counted)."""
    left = _still_to_embed(turns_left, memories_left)
    if state == "loaded":
        if left:
            return f"Search by meaning: on; {left} (in the background)."
        return "Search by meaning: on; everything remembered is indexed."
    if state == "unavailable":
        why = f" ({reason})" if reason else ""
        return f"Search by meaning: off{why}; memory is searched by its words only."
    if state == "not loaded yet":
        if left:
            return (
                f"Search by meaning: {left}; the background sidecar embeds them while Pi runs and "
                "after it leaves (until then they are found by their words)."
            )
        if turns_left is not None:
            return "Search by meaning: everything remembered is indexed."
        # a process that has not searched yet (the terminal's status, a sidecar's first instant):
        # nothing is loading here, so say when it will be rather than "loading"
        return (
            "Search by meaning: ready; its model loads on the first search "
            "(Pi's memory sidecar loads it when it starts)."
        )
    tail = f" ({left})" if left else ""
    return f"Search by meaning: the model is loading{tail}; until then memory is searched by its words."


def _still_to_embed(turns: int | None, memories: int | None) -> str:
    parts = []
    if turns:
        parts.append(counted(turns, "turn"))
    if memories:
        parts.append(counted(memories, "memory"))
    return f"{' and '.join(parts)} still to embed" if parts else ""


def describe_inspectors(running: Sequence[RunningInspector]) -> str:
    """The inspectors running for this agent dir, by address only: the token stays out of a report
    that may be pasted into an issue; `/tdai-memory-ui` shows the full link to this same user."""
    if not running:
        return ""
    addresses = ", ".join(r.address() for r in running)
    where = "a memory inspector is running at" if len(running) == 1 else "memory inspectors are running at"
    return f"Inspector: {where} {addresses}; /tdai-memory-ui in Pi gives its link to open it."


def describe_budget(loaded: LoadedConfig | None) -> str:
    if loaded is None:
        return "not loaded"
    r = loaded.config.recall
    return (
        f"{'on' if r.enabled else 'off'}, deadline {r.deadline_ms} ms, L0 {r.l0_limit} / "
        f"L1 {r.l1_limit} / L2 {r.l2_limit} / Skill {r.skill_limit}, {r.max_chars} chars"
    )


def describe_last_recall(last: RecallOutcome | None) -> str:
    if last is None:
        return "none yet"
    parts = ", ".join(f"{x.layer} {x.state} {x.ms:.0f} ms" for x in last.layers)
    return f"{last.outcome} in {last.elapsed_ms:.0f} ms, {last.chars} chars ({parts})"
