"""Interactive commands as async generators: each yields a dialog step and receives the answer.

The shim renders a step and sends the answer back with `command/answer`; a flow ends with a step
of kind "done". Flows left unanswered (the user walked away, the shim restarted) expire.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass

from pi_memory_bridge.sidecar.protocol import CommandStep

Answer = bool | str | list[str] | None
Flow = AsyncGenerator[CommandStep, Answer]
FLOW_TTL_S = 15 * 60


class UnknownFlow(Exception):
    pass


@dataclass
class _Pending:
    flow: Flow
    expires: float


class FlowRegistry:
    def __init__(self) -> None:
        self._pending: dict[str, _Pending] = {}

    async def start(self, flow: Flow) -> CommandStep:
        return await self._advance(secrets.token_hex(8), flow, None, first=True)

    async def answer(self, flow_id: str, answer: Answer) -> CommandStep:
        self._expire()
        pending = self._pending.pop(flow_id, None)
        if pending is None:
            raise UnknownFlow(
                f"no command is waiting for an answer under id {flow_id!r} (it may have expired)"
            )
        return await self._advance(flow_id, pending.flow, answer, first=False)

    async def _advance(self, flow_id: str, flow: Flow, answer: Answer, *, first: bool) -> CommandStep:
        try:
            shown = await (flow.__anext__() if first else flow.asend(answer))
        except StopAsyncIteration:
            return CommandStep(kind="done")
        if shown.kind == "done":
            await flow.aclose()
            return shown
        self._pending[flow_id] = _Pending(flow, time.monotonic() + FLOW_TTL_S)
        return shown.model_copy(update={"flow_id": flow_id})

    def _expire(self) -> None:
        now = time.monotonic()
        for flow_id in [k for k, p in self._pending.items() if p.expires < now]:
            del self._pending[flow_id]


def done(message: str, level: str = "info", *, reload: bool = False) -> CommandStep:
    """The flow's last step; `reload` when Pi must reload to see what the command changed."""
    return CommandStep.model_validate({"kind": "done", "message": message, "level": level, "reload": reload})


def step(
    kind: str, title: str, message: str = "", options: Sequence[str] = (), placeholder: str = ""
) -> CommandStep:
    """A dialog for the shim to show: confirm, select (from `options`) or input."""
    return CommandStep.model_validate(
        {
            "kind": kind,
            "title": title,
            "message": message,
            "options": list(options),
            "placeholder": placeholder,
        }
    )
