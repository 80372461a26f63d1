"""`/tdai-memory-status`: a report that tells the truth, each problem with the fix to try."""

from __future__ import annotations

from dataclasses import dataclass, field


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

    def footer(self) -> str:
        if not self.enabled:
            return "memory: off"
        if not self.backend_ok:
            return f"memory: {self.backend} unavailable"
        return "memory: ready" if not self.problems else f"memory: {len(self.problems)} problem(s)"

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
