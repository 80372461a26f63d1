"""`/tdai-memory-status`: a report that tells the truth, in plain words, each problem with its fix.

The main text says what is remembered, what was recalled last and why, what is waiting, which Pi
session this is, and what is wrong with the one fix for it (a fix shared by several problems is
printed once). Internal names (layers, record states, budgets) appear only under "Details".
The sidecar gathers the live facts (backend status, outbox counts) and `operations.status_lines`
turns them into the report's lines and problems; this module holds the report and renders it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from pi_memory_bridge.plural import counted


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
    inspector_words: str = ""  # running inspectors of this agent dir, by address

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
            f"Memory works, with {counted(len(report.problems), 'problem')} "
            f"to look at (below). It is stored {where}."
        )
    return f"Memory is on and working. It is stored {where}."


_KINDS = (
    ("turns", "earlier conversation turn", "earlier conversation turns"),
    ("atomic", "fact or preference", "facts and preferences"),
    ("scenarios", "scenario note", "scenario notes"),
)


def describe_remembered(report: StatusReport) -> str:
    if not report.counts:
        return "Remembered: unknown (the store cannot be read right now)."
    parts = [counted(report.counts[key], one, many) for key, one, many in _KINDS if report.counts.get(key)]
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
                for line in (
                    report.learning_words,
                    report.catch_up_words,
                    report.embeddings_words,
                    report.inspector_words,
                )
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
