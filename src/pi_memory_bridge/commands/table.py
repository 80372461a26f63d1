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


COMMANDS: tuple[CommandSpec, ...] = (
    CommandSpec(
        "tdai-memory-status",
        "status",
        "Show what memory holds, what it recalled last, what is waiting, and what to fix",
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
        "tdai-memory-remember",
        "remember",
        "Save a fact or preference to long-term memory: /tdai-memory-remember <text>",
    ),
)
