"""`/tdai-memory-status`: a report that tells the truth, in plain words, each problem with its fix.

The main text says what is remembered, what was recalled last and why, what is waiting, which Pi
session this is, and what is wrong with the one fix for it (a fix shared by several problems is
printed once). Internal names (layers, record states, budgets) appear only under "Details".
The sidecar gathers the live facts (backend status, outbox counts); the pure helpers here turn
them into the report's lines and problems.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from pi_memory_bridge.capture.identity import MAIN_BRANCH, BranchIdentity
from pi_memory_bridge.config import LoadedConfig
from pi_memory_bridge.outbox import OutboxCounts
from pi_memory_bridge.recall import Layer, RecallOutcome


@dataclass(frozen=True, slots=True)
class Problem:
    what: str
    fix: str


@dataclass(frozen=True, slots=True)
class StatusReport:
    version: str
    protocol: str
    enabled: bool
    backend: str
    backend_ok: bool
    backend_detail: str
    counts: dict[str, int]
    identity: str
    config_sources: tuple[str, ...]
    recall_budget: str
    last_recall: str
    capture: str
    outbox: str
    sdk: str
    log_file: str
    problems: tuple[Problem, ...] = field(default=())
    # search by meaning (local backend): model, loaded or why not, vectors done/total
    embeddings: str = ""
    paused_project: str = ""  # the project memory is paused for (/tdai-memory-pause), or ""
    catch_up: str = ""  # recovery of turns live capture missed, from Pi's session files
    learning: str = "off"  # consolidation: on/off and model, last job, tokens against the budget
    # the plain-words lines of the main text
    session: str = ""
    recalled: str = ""
    waiting: str = ""
    learning_words: str = ""
    catch_up_words: str = ""
    embeddings_words: str = ""

    def with_pause(self, project: str) -> StatusReport:
        return replace(self, paused_project=project)

    @property
    def healthy(self) -> bool:
        return self.enabled and self.backend_ok and not self.problems

    def to_dict(self) -> dict[str, object]:
        return {
            "version": self.version,
            "protocol": self.protocol,
            "enabled": self.enabled,
            "backend": self.backend,
            "backendOk": self.backend_ok,
            "backendDetail": self.backend_detail,
            "counts": dict(self.counts),
            "identity": self.identity,
            "configSources": list(self.config_sources),
            "recallBudget": self.recall_budget,
            "lastRecall": self.last_recall,
            "capture": self.capture,
            "outbox": self.outbox,
            "catchUp": self.catch_up,
            "sdk": self.sdk,
            "logFile": self.log_file,
            "embeddings": self.embeddings,
            "learning": self.learning,
            "problems": [{"what": p.what, "fix": p.fix} for p in self.problems],
            "healthy": self.healthy,
            "pausedProject": self.paused_project or None,
            "session": self.session,
            "recalled": self.recalled,
            "waiting": self.waiting,
            "remembered": describe_remembered(self),
        }


def headline(report: StatusReport) -> str:
    where = "on this machine" if report.backend == "local" else f"on the {report.backend} server"
    if not report.enabled:
        return 'Memory is off ("enabled": false in the memory-bridge config).'
    if report.paused_project:
        return (
            f"Memory is paused for this project ({report.paused_project}): nothing here is captured or "
            "recalled; /tdai-memory-resume turns it back on. Other projects are not affected."
        )
    if not report.backend_ok:
        return f"Memory is not working right now: its store {where} is unavailable (see below)."
    if report.problems:
        return (
            f"Memory works, with {len(report.problems)} problem(s) to look at (below). It is stored {where}."
        )
    return f"Memory is on and working. It is stored {where}."


_KINDS = (
    ("turns", "earlier conversation turn(s)"),
    ("atomic", "fact(s) and preference(s)"),
    ("scenarios", "scenario note(s)"),
)


def describe_remembered(report: StatusReport) -> str:
    if not report.counts:
        return "Remembered: unknown (the store cannot be read right now)."
    parts = [f"{report.counts[key]} {words}" for key, words in _KINDS if report.counts.get(key)]
    if report.counts.get("profile"):
        parts.append("a profile of you")
    if not parts:
        return "Remembered: nothing yet. Memory fills up as you talk with Pi."
    return f"Remembered: {', '.join(parts)}."


def render_status(report: StatusReport) -> str:
    lines = [headline(report)]
    if report.enabled:
        lines += [
            describe_remembered(report),
            report.recalled or "Last recall: none yet in this Pi session.",
            report.waiting or "Waiting: nothing.",
            report.session or "This session: no Pi session has used memory yet.",
            *(
                line
                for line in (report.learning_words, report.catch_up_words, report.embeddings_words)
                if line
            ),
        ]
    if report.problems:
        lines += ["", "What is wrong:"]
        by_fix: dict[str, list[str]] = {}
        for p in report.problems:
            by_fix.setdefault(p.fix, []).append(p.what)
        for fix, whats in by_fix.items():  # a fix shared by several problems is printed once
            lines += [f"  - {what}" for what in whats]
            lines.append(f"    fix: {fix}")
    counts = ", ".join(f"{k} {v}" for k, v in sorted(report.counts.items())) or "n/a"
    lines += [
        "",
        f"Details (pi-memory-bridge {report.version}, protocol {report.protocol}):",
        f"  backend:        {report.backend} - {'ok' if report.backend_ok else 'unavailable'}"
        + (f" ({report.backend_detail})" if report.backend_detail else ""),
        f"  stored:         {counts}",
        f"  memory session: {report.identity}",
        f"  config:         {', '.join(report.config_sources) or 'built-in defaults'}",
        f"  recall budget:  {report.recall_budget}",
        f"  last recall:    {report.last_recall}",
        f"  capture:        {report.capture}",
        *([f"  embeddings:     {report.embeddings}"] if report.embeddings else []),
        f"  outbox:         {report.outbox}",
        *([f"  catch-up:       {report.catch_up}"] if report.catch_up else []),
        f"  learning:       {report.learning}",
        f"  memorycore sdk: {report.sdk}",
        f"  log file:       {report.log_file}",
    ]
    return "\n".join(lines)


def config_problems(loaded: LoadedConfig | None) -> list[Problem]:
    if loaded is None:
        return []
    return [Problem(str(cp), "edit the file named above, then run /reload") for cp in loaded.problems]


def outbox_problems(counts: OutboxCounts, pause_reason: str | None) -> list[Problem]:
    problems: list[Problem] = []
    if counts.dead:
        problems.append(
            Problem(
                f"the memory store refused {counts.dead} captured turn(s)",
                "see `/tdai-memory-outbox list dead`, then requeue or purge them",
            )
        )
    if counts.quarantined:
        problems.append(
            Problem(
                f"{counts.quarantined} captured turn(s) could not be read back and were set aside",
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
        f"Last recall: {last.items} remembered item(s) matched the last prompt and were added to it as "
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
    text = f"Waiting: {counts.waiting} captured turn(s) to be stored"
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
    tail = f" ({left})" if left else ""
    return f"Search by meaning: the model is loading{tail}; until then memory is searched by its words."


def _still_to_embed(turns: int | None, memories: int | None) -> str:
    parts = []
    if turns:
        parts.append(f"{turns} turn(s)")
    if memories:
        parts.append(f"{memories} memory(ies)")
    return f"{' and '.join(parts)} still to embed" if parts else ""


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
