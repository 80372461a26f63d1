"""Interactive commands as plain async functions that talk to the user through a `Dialog`.

A flow asks with `await dialog.select(...)`, `confirm(...)`, `input(...)` or `editor(...)` and
ends by returning an `Outcome`; it never sees how the question is shown. The same flow runs in Pi
(the engine turns each question into a `command/run` / `command/answer` step, `engine.dialogs`)
and in a terminal (`cli.terminal`). A dismissed select, input or editor raises `Cancelled`, so a
flow catches it once instead of checking every answer.

Safe by construction: `confirm` starts on No everywhere (in Pi it is shown as a choice with No
first; a dismissed confirm is a No), so a flow's destructive step always needs an explicit yes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

Level = Literal["info", "warning", "error"]


class Cancelled(Exception):
    """The user dismissed a dialog (or there is nobody to answer it)."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a command ended: what to tell the user, how loudly, and whether Pi must reload (it
    reads skills and configuration only at start-up)."""

    message: str
    level: Level = "info"
    reload: bool = False


class Dialog(Protocol):
    @property
    def has_ui(self) -> bool:
        """Whether anyone can answer (Pi's print and json modes cannot)."""
        ...

    async def confirm(self, title: str, message: str = "") -> bool:
        """Yes or no, starting on No; a dismissed dialog is a No."""
        ...

    async def select(self, title: str, options: Sequence[str], message: str = "") -> str:
        """One of `options`; `Cancelled` when dismissed."""
        ...

    async def input(self, title: str, message: str = "", placeholder: str = "") -> str:
        """The typed text, stripped; `Cancelled` when dismissed."""
        ...

    async def editor(self, title: str, prefill: str = "") -> str:
        """Multi-line text, starting from `prefill`; `Cancelled` when dismissed."""
        ...


Flow = Callable[[Dialog], Awaitable[Outcome]]
