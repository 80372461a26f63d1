"""Flows in Pi (`engine.dialogs`): each question becomes a step, a yes/no starts on No, a
dismissed dialog cancels, an abandoned flow is cancelled with its clean-up, an error is not lost."""

from __future__ import annotations

import asyncio

import pytest

from pi_memory_bridge.engine import dialogs
from pi_memory_bridge.engine.dialogs import NO, YES, FlowRegistry, UnknownFlow
from pi_memory_bridge.vocabulary.dialog import Cancelled, Dialog, Outcome


async def ask_all(dialog: Dialog) -> Outcome:
    sure = await dialog.confirm("Delete it?", "This cannot be undone.")
    picked = await dialog.select("Which?", ["a", "b"], "pick one")
    typed = await dialog.input("Name", "", "placeholder")
    return Outcome(f"{sure} {picked} {typed}", reload=sure)


async def test_a_confirm_is_a_choice_with_no_first_and_the_answers_come_back() -> None:
    flows = FlowRegistry()
    step = await flows.start(ask_all, has_ui=True)
    assert step.kind == "select" and step.options == [NO, YES]
    assert step.title == "Delete it?\nThis cannot be undone." and step.message == ""
    step = await flows.answer(step.flow_id or "", YES)
    assert (step.kind, step.options, step.message) == ("select", ["a", "b"], "pick one")
    step = await flows.answer(step.flow_id or "", "b")
    assert (step.kind, step.placeholder) == ("input", "placeholder")
    step = await flows.answer(step.flow_id or "", "  Ada ")
    assert (step.kind, step.message, step.reload) == ("done", "True b Ada", True)


async def test_a_dismissed_confirm_is_no_and_a_dismissed_choice_cancels() -> None:
    flows = FlowRegistry()
    step = await flows.start(ask_all, has_ui=True)
    step = await flows.answer(step.flow_id or "", None)  # the confirm, dismissed: No, and on
    assert step.kind == "select"
    step = await flows.answer(step.flow_id or "", "not an option")
    assert step.kind == "done" and step.level == "warning" and "Cancelled" in step.message


async def test_without_a_ui_nothing_is_asked() -> None:
    async def flow(dialog: Dialog) -> Outcome:
        assert not dialog.has_ui
        return Outcome("yes" if await dialog.confirm("Sure?") else "no")

    step = await FlowRegistry().start(flow, has_ui=False)
    assert (step.kind, step.message) == ("done", "no")


async def test_an_error_in_a_flow_reaches_the_caller() -> None:
    async def flow(dialog: Dialog) -> Outcome:
        await dialog.input("x")
        raise ValueError("broken")

    flows = FlowRegistry()
    step = await flows.start(flow, has_ui=True)
    with pytest.raises(ValueError, match="broken"):
        await flows.answer(step.flow_id or "", "x")


async def test_an_abandoned_flow_expires_and_its_clean_up_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    cleaned = asyncio.Event()

    async def flow(dialog: Dialog) -> Outcome:
        try:
            await dialog.input("never answered")
        finally:
            cleaned.set()
        raise Cancelled

    flows = FlowRegistry()
    first = await flows.start(flow, has_ui=True)
    monkeypatch.setattr(dialogs, "FLOW_TTL_S", -1.0)
    other = await flows.start(flow, has_ui=True)  # registered already expired
    with pytest.raises(UnknownFlow):
        await flows.answer("no-such-flow", None)  # any answer sweeps the expired ones
    async with asyncio.timeout(5):
        await cleaned.wait()
    with pytest.raises(UnknownFlow):
        await flows.answer(other.flow_id or "", "x")
    await flows.close()
    assert first.flow_id != other.flow_id
