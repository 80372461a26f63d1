"""Drive a command flow the way Pi does (`engine.dialogs`), answering each question from a list.

Steps come back as `Step`s: a confirm (which Pi is shown as a choice with No first) reads as kind
"confirm" with its title and message apart again, and is answered with True or False.
"""

from __future__ import annotations

from dataclasses import dataclass

from pi_memory_bridge.engine.dialogs import NO, YES, Answer, FlowRegistry
from pi_memory_bridge.vocabulary.dialog import Flow
from pi_memory_bridge.wire import CommandStep


@dataclass(frozen=True)
class Step:
    kind: str
    title: str
    message: str
    options: list[str]
    level: str
    reload: bool
    flow_id: str | None
    raw: CommandStep


def view(step: CommandStep) -> Step:
    if step.kind == "select" and step.options == [NO, YES]:
        title, _, message = step.title.partition("\n")
        return Step("confirm", title, message, [], step.level, step.reload, step.flow_id, step)
    return Step(step.kind, step.title, step.message, list(step.options), step.level, step.reload,
                step.flow_id, step)  # fmt: skip


def wire_answer(step: Step, answer: object) -> Answer:
    if step.kind == "confirm":
        return YES if answer is True else NO if answer is False else None
    assert answer is None or isinstance(answer, (str, bool, list)), answer
    return answer


class Running:
    """A flow in progress: `step` is the question it waits on (or its done step)."""

    def __init__(self, flows: FlowRegistry, step: Step) -> None:
        self.flows = flows
        self.step = step

    async def answer(self, answer: object) -> Step:
        assert self.step.kind != "done", "the flow has ended"
        sent = wire_answer(self.step, answer)
        self.step = view(await self.flows.answer(self.step.flow_id or "", sent))
        return self.step


async def start(flow: Flow, *, has_ui: bool = True) -> Running:
    flows = FlowRegistry()
    return Running(flows, view(await flows.start(flow, has_ui=has_ui)))


async def drive(flow: Flow, answers: list[object], *, has_ui: bool = True, exact: bool = False) -> list[Step]:
    """Every step shown, the done step last; with `exact`, every answer must be used."""
    running = await start(flow, has_ui=has_ui)
    steps = [running.step]
    while steps[-1].kind != "done":
        assert answers, f"the flow asked more than the test planned: {steps[-1].title}"
        steps.append(await running.answer(answers.pop(0)))
    assert not (exact and answers), f"the flow ended before these answers were used: {answers}"
    return steps
