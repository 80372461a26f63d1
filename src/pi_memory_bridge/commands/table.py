"""The `/tdai-memory*` commands, defined once: the name Pi shows, the name `command/run` takes,
and the description Pi lists.

The shim registers one Pi command per row of a table generated from this one
(`sidecar.tables`); the engine runs each row's flow (`engine.commands`). A new command is a row
here, a flow there, and a regenerated shim table.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CommandSpec:
    pi_name: str  # what the user types after "/"
    name: str  # what `command/run` carries
    description: str
    # a long report: Pi's TUI keeps it in the transcript (never sent to the model) rather than in
    # a notification the next command's output replaces
    report: bool = False


COMMANDS: tuple[CommandSpec, ...] = (
    CommandSpec(
        "tdai-memory-status",
        "status",
        "Show what memory holds, what it recalled last, what is waiting, and what to fix",
        report=True,
    ),
    CommandSpec(
        "tdai-memory-forget",
        "forget",
        "Find memories matching a query, preview them, choose, confirm, delete: /tdai-memory-forget <query>",
    ),
    CommandSpec(
        "tdai-memory-sync-skills",
        "sync-skills",
        "Write chosen learned skills from the server as Pi skills (asks first; never overwrites your edits)",
    ),
    CommandSpec(
        "tdai-memory-setup",
        "setup",
        "Connect to a MemoryCore team server (optional): endpoint, key files, identity check, team and agent",
    ),
    CommandSpec(
        "tdai-memory-outbox",
        "outbox",
        "Capture outbox: status | list [pending|dead|quarantined] | flush | requeue <id|all> | "
        "purge <id|all>",
    ),
    CommandSpec(
        "tdai-memory-ui",
        "ui",
        "Open the memory inspector: a local web page to see, search, correct and forget what Pi remembers",
    ),
    CommandSpec(
        "tdai-memory",
        "memory",
        "See what memory knows: profile, memories by kind, recent conversation, notes; search, show, edit, "
        "forget",
    ),
    CommandSpec(
        "tdai-memory-pause",
        "pause",
        "Pause memory for this project: nothing here is captured or recalled until /tdai-memory-resume",
    ),
    CommandSpec(
        "tdai-memory-resume",
        "resume",
        "Turn memory back on for this project after /tdai-memory-pause",
    ),
    CommandSpec(
        "tdai-memory-import",
        "import",
        "Import sessions from before memory was set up: preview, confirm: [--since DATE] [--session FILE]",
    ),
    CommandSpec(
        "tdai-memory-undo",
        "undo",
        "Undo a consolidation job as a whole (default the last one): /tdai-memory-undo [job-id|list]",
    ),
    CommandSpec(
        "tdai-memory-review",
        "review",
        "Review what learning would change in memories you saved by hand: keep yours or take the new text",
    ),
    CommandSpec(
        "tdai-memory-learning",
        "learning",
        "Let memory learn from your sessions, or stop it: /tdai-memory-learning [on|off]",
    ),
    CommandSpec(
        "tdai-memory-remember",
        "remember",
        "Save a fact or preference to long-term memory: /tdai-memory-remember <text>",
    ),
)
