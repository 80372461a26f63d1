"""Commands in Pi: each flow runs as a task whose dialog questions become protocol steps.

`command/run` starts a flow and answers with its first step (a question, or `done`);
`command/answer` hands the user's answer to the waiting question and answers with the next step.
A flow left unanswered (the user walked away, the shim restarted) expires: its task is cancelled,
so its clean-up (`finally`) runs. This is the only place that knows the wire's `CommandStep`.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from pi_memory_bridge.vocabulary.dialog import Cancelled, Flow, Outcome
from pi_memory_bridge.wire import CommandStep

Answer = bool | str | list[str] | None
FLOW_TTL_S = 15 * 60
NO = "No"
YES = "Yes"


class UnknownFlow(Exception):
    pass


def done_step(outcome: Outcome) -> CommandStep:
    return CommandStep(kind="done", message=outcome.message, level=outcome.level, reload=outcome.reload)


@dataclass(frozen=True, slots=True)
class _Failed:
    error: BaseException


class PiDialog:
    """The `Dialog` a flow sees in Pi: each question is handed to the registry as a step, and the
    flow waits until the user's answer comes back."""

    def __init__(self, has_ui: bool) -> None:
        self._has_ui = has_ui
        self.shown: asyncio.Queue[CommandStep | _Failed] = asyncio.Queue(maxsize=1)
        self._answer: asyncio.Future[Answer] | None = None

    @property
    def has_ui(self) -> bool:
        return self._has_ui

    def give(self, answer: Answer) -> None:
        if self._answer is not None and not self._answer.done():
            self._answer.set_result(answer)

    async def _ask(self, step: CommandStep) -> Answer:
        if not self._has_ui:
            return None  # nobody can answer: what Pi itself gives a dialog in print mode
        self._answer = asyncio.get_running_loop().create_future()
        await self.shown.put(step)
        return await self._answer

    async def confirm(self, title: str, message: str = "") -> bool:
        # Pi's own confirm starts on Yes and cannot be told otherwise: ask a choice with No first
        heading = f"{title}\n{message}" if message else title
        return await self._ask(CommandStep(kind="select", title=heading, options=[NO, YES])) == YES

    async def select(self, title: str, options: Sequence[str], message: str = "") -> str:
        answer = await self._ask(
            CommandStep(kind="select", title=title, message=message, options=list(options))
        )
        if not isinstance(answer, str) or answer not in options:
            raise Cancelled
        return answer

    async def input(self, title: str, message: str = "", placeholder: str = "") -> str:
        answer = await self._ask(
            CommandStep(kind="input", title=title, message=message, placeholder=placeholder)
        )
        if not isinstance(answer, str):
            raise Cancelled
        return answer.strip()

    async def editor(self, title: str, prefill: str = "") -> str:
        answer = await self._ask(CommandStep(kind="editor", title=title, prefill=prefill))
        if not isinstance(answer, str):
            raise Cancelled
        return answer


@dataclass
class _Running:
    dialog: PiDialog
    task: asyncio.Task[None]
    expires: float = field(default_factory=lambda: time.monotonic() + FLOW_TTL_S)


class FlowRegistry:
    def __init__(self) -> None:
        self._pending: dict[str, _Running] = {}

    async def start(self, flow: Flow, *, has_ui: bool) -> CommandStep:
        dialog = PiDialog(has_ui)

        async def run() -> None:
            try:
                outcome = await flow(dialog)
            except Cancelled:
                outcome = Outcome("Cancelled: nothing was changed.", "warning")
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # handed to the caller, who reports it as an RPC error
                await dialog.shown.put(_Failed(exc))
                return
            await dialog.shown.put(done_step(outcome))

        running = _Running(dialog, asyncio.get_running_loop().create_task(run()))
        return await self._next(secrets.token_hex(8), running)

    async def answer(self, flow_id: str, answer: Answer) -> CommandStep:
        self._expire()
        running = self._pending.pop(flow_id, None)
        if running is None:
            raise UnknownFlow(
                f"no command is waiting for an answer under id {flow_id!r} (it may have expired)"
            )
        running.dialog.give(answer)
        return await self._next(flow_id, running)

    async def _next(self, flow_id: str, running: _Running) -> CommandStep:
        shown = await running.dialog.shown.get()
        if isinstance(shown, _Failed):
            raise shown.error
        if shown.kind == "done":
            await running.task
            return shown
        running.expires = time.monotonic() + FLOW_TTL_S
        self._pending[flow_id] = running
        return shown.model_copy(update={"flow_id": flow_id})

    def _expire(self) -> None:
        now = time.monotonic()
        for flow_id in [k for k, r in self._pending.items() if r.expires < now]:
            self._pending.pop(flow_id).task.cancel()

    async def close(self) -> None:
        """Cancel every flow still waiting for an answer (their clean-up runs)."""
        tasks = [r.task for r in self._pending.values()]
        self._pending.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
