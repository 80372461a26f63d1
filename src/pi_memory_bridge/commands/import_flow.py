"""`/tdai-memory-import` and `pi-memory-bridge import`: preview, confirm, import past sessions.

    /tdai-memory-import [--since DATE] [--session FILE] [--yes]

Shows how many sessions and turns an import would add, asks (default No), then imports. Never
imports without an answer: without a UI (print mode, a terminal that is not interactive) it shows
the preview and stops, unless `--yes` says the user agreed up front (for scripts).
"""

from __future__ import annotations

import shlex
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from pi_memory_bridge.catchup.importer import ImportPlan, ImportScope
from pi_memory_bridge.plural import counted
from pi_memory_bridge.vocabulary.dialog import Dialog, Level, Outcome

USAGE = "usage: /tdai-memory-import [--since YYYY-MM-DD[THH:MM]] [--session FILE] [--yes]"


@dataclass(frozen=True, slots=True)
class ImportRequest:
    scope: ImportScope
    yes: bool = False


@dataclass(frozen=True, slots=True)
class ImportOutcome:
    message: str
    level: Level = "info"


@dataclass(frozen=True, slots=True)
class ImportDeps:
    problem: str  # why import cannot run here ("" when it can)
    plan: Callable[[ImportScope], Awaitable[ImportPlan]]
    run: Callable[[ImportPlan], Awaitable[ImportOutcome]]


def parse_since(text: str) -> int:
    """Epoch ms of a date or date-time (local time unless it says otherwise). Raises ValueError."""
    moment = datetime.fromisoformat(text.strip())
    return int(moment.astimezone().timestamp() * 1000)


def parse_import_args(args: str, cwd: Path | None = None) -> ImportRequest | str:
    """The request in a command's raw arguments, or what is wrong with them."""
    try:
        words = shlex.split(args)
    except ValueError as exc:
        return f"{exc}\n{USAGE}"
    since: int | None = None
    session: Path | None = None
    yes = False
    while words:
        word = words.pop(0)
        if word in ("--yes", "-y"):
            yes = True
        elif word == "--since" and words:
            value = words.pop(0)
            try:
                since = parse_since(value)
            except ValueError:
                return f"--since {value!r} is not a date such as 2026-01-31 or 2026-01-31T09:00\n{USAGE}"
        elif word == "--session" and words:
            path = Path(words.pop(0)).expanduser()
            session = path if path.is_absolute() or cwd is None else cwd / path
        else:
            return f"unexpected {word!r}\n{USAGE}"
    return ImportRequest(ImportScope(since, session), yes)


async def import_flow(
    deps: ImportDeps, request: ImportRequest | str, dialog: Dialog, *, cwd: Path | None = None
) -> Outcome:
    parsed = parse_import_args(request, cwd) if isinstance(request, str) else request
    if isinstance(parsed, str):
        return Outcome(parsed, "warning")
    if deps.problem:
        return Outcome(f"cannot import: {deps.problem}", "error")
    session = parsed.scope.session_file
    if session is not None and not session.is_file():
        return Outcome(f"cannot import: {session} is not a session file", "error")
    plan = await deps.plan(parsed.scope)
    preview = plan.preview()
    if plan.turns == 0:
        return Outcome(f"{preview}\nnothing to import")  # nothing to do: nothing is asked
    if not parsed.yes:
        if not dialog.has_ui:
            return Outcome(
                f"{preview}\nnothing imported: run it where you can confirm, or add --yes", "warning"
            )
        sessions = len(plan.files)
        title = f"Import {counted(plan.turns, 'turn')} from {counted(sessions, 'session')} into memory?"
        if not await dialog.confirm(title, preview):
            return Outcome("import cancelled: nothing imported")
    outcome = await deps.run(plan)
    # agreed up front: say what was decided, as the dialog would have shown it
    message = f"{preview}\n{outcome.message}" if parsed.yes else outcome.message
    return Outcome(message, outcome.level)
