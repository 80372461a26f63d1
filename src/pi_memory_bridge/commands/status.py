"""`/tdai-memory-status`: a report that tells the truth, each problem with the fix to try.

The sidecar gathers the live facts (backend status, outbox counts); the pure helpers here turn
them into the report's lines and problems.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pi_memory_bridge.capture.identity import BranchIdentity
from pi_memory_bridge.config import LoadedConfig
from pi_memory_bridge.outbox import OutboxCounts
from pi_memory_bridge.recall import RecallOutcome


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
            "sdk": self.sdk,
            "logFile": self.log_file,
            "problems": [{"what": p.what, "fix": p.fix} for p in self.problems],
            "healthy": self.healthy,
        }


def render_status(report: StatusReport) -> str:
    state = "healthy" if report.healthy else "needs attention"
    counts = ", ".join(f"{k} {v}" for k, v in sorted(report.counts.items())) or "n/a"
    lines = [
        f"pi-memory-bridge {report.version} (protocol {report.protocol}): {state}",
        f"memory:       {'on' if report.enabled else 'off'}",
        f"backend:      {report.backend} - {'ok' if report.backend_ok else 'unavailable'}"
        + (f" ({report.backend_detail})" if report.backend_detail else ""),
        f"stored:       {counts}",
        f"identity:     {report.identity}",
        f"config:       {', '.join(report.config_sources) or 'built-in defaults'}",
        f"recall:       {report.recall_budget}",
        f"last recall:  {report.last_recall}",
        f"capture:      {report.capture}",
        f"outbox:       {report.outbox}",
        f"memorycore sdk: {report.sdk}",
        f"log file:     {report.log_file}",
    ]
    if report.problems:
        lines.append("problems:")
        for p in report.problems:
            lines.append(f"  - {p.what}")
            lines.append(f"    fix: {p.fix}")
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
                f"{counts.dead} capture record(s) were rejected by the backend",
                "see `/tdai-memory-outbox list dead`, then requeue or purge them",
            )
        )
    if counts.quarantined:
        problems.append(
            Problem(
                f"{counts.quarantined} outbox record(s) were unreadable and set aside",
                "see `/tdai-memory-outbox list quarantined`; purge them when done",
            )
        )
    if pause_reason:
        problems.append(
            Problem(
                f"delivery is paused: {pause_reason}",
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
    return f"{mask(identity.memory_session_id)} (branch {identity.branch})"


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
