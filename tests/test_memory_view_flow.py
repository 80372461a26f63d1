"""`/tdai-memory` as a dialog flow over a real local store, and pausing memory per project."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from flow_driver import Step, start
from pi_memory_bridge import footer
from pi_memory_bridge.backends.local import LocalBackend
from pi_memory_bridge.commands.memory_flow import BACK, CLOSE, EDIT, FORGET, SEARCH, TITLE, memory_flow
from pi_memory_bridge.config import global_config_path, load_config
from pi_memory_bridge.engine.core import Engine
from pi_memory_bridge.operations.forget import ForgetDeps
from pi_memory_bridge.operations.pause import ProjectPause, set_paused
from pi_memory_bridge.project import project_of
from pi_memory_bridge.vocabulary.dialog import Flow
from pi_memory_bridge.vocabulary.status import render_status
from pi_memory_bridge.wire import Footer, RecallParams, ToolCallParams, TurnSettledParams

SECRET = "sk-proj-" + "Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0FeDcBa98"


@pytest.fixture
async def backend(tmp_path: Path) -> AsyncIterator[LocalBackend]:
    store = LocalBackend(tmp_path / "memory-bridge")
    yield store
    await store.close()


class Driver:
    """Walks a flow, answering each step with the next scripted answer (or a picker)."""

    def __init__(self, flow: Flow) -> None:
        self.flow = flow
        self.steps: list[Step] = []

    async def run(self, *answers: bool | str | None) -> Step:
        running = await start(self.flow)
        step = running.step
        self.steps.append(step)
        for answer in answers:
            if step.kind == "done":
                break
            if isinstance(answer, str) and answer.startswith("~") and step.kind == "select":
                answer = next(o for o in step.options if answer[1:] in o)  # pick by a part of the label
            step = await running.answer(answer)
            self.steps.append(step)
        return step


async def _headless(flow: Flow) -> Step:
    return (await start(flow, has_ui=False)).step


async def test_browse_by_kind_edit_and_forget(backend: LocalBackend) -> None:
    kept = await backend.memories.save("prefers tabs over spaces", "preference", "user")
    doomed = await backend.memories.save("the staging db is called blue", "fact", "model")
    backend.notes.write_profile("Backend developer.")
    deps = ForgetDeps(backend, "")
    d = Driver(lambda dialog: memory_flow(deps, "", dialog))
    end = await d.run(
        "~Preferences (1)", "~prefers tabs", EDIT, f"prefers spaces, key {SECRET}", BACK, BACK,
        "~Facts (1)", "~staging db", FORGET, True, BACK, CLOSE,
    )  # fmt: skip
    menu = d.steps[0]
    assert menu.title == TITLE and "2 memories" in menu.message and "a profile" in menu.message
    assert menu.options[0] == "Profile" and SEARCH in menu.options
    editor = next(s for s in d.steps if s.kind == "editor")
    assert editor.raw.prefill == "prefers tabs over spaces"
    after_edit = d.steps[d.steps.index(editor) + 1]
    assert after_edit.message.startswith("edited") and "1 secret redacted" in after_edit.message
    stored = (await backend.memories.list(5, ids=[kept.id]))[0]
    assert stored.content.startswith("prefers spaces") and SECRET not in stored.content
    confirm = next(s for s in d.steps if s.kind == "confirm")
    assert "cannot be undone" in confirm.title and "staging db" in confirm.message
    assert await backend.memories.list(5, ids=[doomed.id]) == []
    assert end.kind == "done" and "2 changes" in end.message


async def test_not_confirmed_forgets_nothing_and_search_lists_recent_on_empty(backend: LocalBackend) -> None:
    saved = await backend.memories.save("uses zsh", "fact", "user")
    d = Driver(lambda dialog: memory_flow(ForgetDeps(backend, ""), "", dialog))
    end = await d.run(SEARCH, "", "~uses zsh", FORGET, False, None, None, None)
    listing = next(s for s in d.steps if s.title.startswith("Most recent"))
    assert any("uses zsh" in o for o in listing.options)
    assert any("Not confirmed" in s.message for s in d.steps)
    assert await backend.memories.list(5, ids=[saved.id]) != []
    assert end.kind == "done" and end.message == ""


async def test_escape_goes_back_one_level_and_closes_only_from_the_menu(backend: LocalBackend) -> None:
    await backend.memories.save("uses zsh", "fact", "user")
    d = Driver(lambda dialog: memory_flow(ForgetDeps(backend, ""), "", dialog))
    end = await d.run("~Facts (1)", "~uses zsh", None, None, None)  # Escape from item, list, menu
    titles = [s.title for s in d.steps]
    assert titles[1].startswith("Facts") and "uses zsh" in titles[2]
    assert titles[3].startswith("Facts")  # Escape on the item: back to its list
    assert titles[4] == TITLE  # Escape on the list: back to the menu
    assert end.kind == "done"  # Escape on the menu closes
    searched = Driver(lambda dialog: memory_flow(ForgetDeps(backend, ""), "zsh", dialog))
    back = await searched.run(None)  # a search started from the command line: Escape opens the menu
    assert back.kind == "select" and back.title == TITLE


async def test_without_a_ui_it_prints_an_overview_and_changes_nothing(backend: LocalBackend) -> None:
    await backend.memories.save("likes go", "preference", "user")
    step = await _headless(lambda dialog: memory_flow(ForgetDeps(backend, ""), "", dialog))
    assert step.kind == "done" and "1 memory" in step.message and "likes go" in step.message
    found = await _headless(lambda dialog: memory_flow(ForgetDeps(backend, ""), "go", dialog))
    assert "Matches for 'go'" in found.message and "likes go" in found.message
    down = (await start(lambda dialog: memory_flow(ForgetDeps(None, "store is damaged"), "", dialog))).step
    assert down.level == "error" and "store is damaged" in down.message


def test_pause_is_written_privately_seen_at_once_and_keeps_other_settings(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    path = global_config_path(agent)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"schemaVersion": 1, "recall": {"l0Limit": 2}}))
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    pause_a, pause_b = ProjectPause(agent, a), ProjectPause(agent, b)
    assert not pause_a.paused()
    assert set_paused(agent, pause_a.project, True).changed
    assert pause_a.paused() and not pause_b.paused()  # another project is not affected
    assert path.stat().st_mode & 0o777 == 0o600
    loaded = load_config(agent_dir=agent, cwd=a, project_trusted=False, env={})
    assert (
        loaded.ok
        and loaded.config.recall.l0_limit == 2
        and loaded.config.paused_projects == [pause_a.project]
    )
    assert not set_paused(agent, pause_a.project, True).changed  # already paused
    assert set_paused(agent, pause_a.project, False).changed and not pause_a.paused()


def test_a_config_file_with_errors_is_not_rewritten(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    path = global_config_path(agent)
    path.parent.mkdir(parents=True)
    path.write_text('{"schemaVersion": 1, "recal": {}}')
    outcome = set_paused(agent, str(tmp_path), True)
    assert not outcome.ok and "has errors" in outcome.message
    assert path.read_text() == '{"schemaVersion": 1, "recal": {}}'


async def test_a_paused_project_gets_no_recall_no_capture_and_no_tools(tmp_path: Path) -> None:
    agent, work = tmp_path / "agent", tmp_path / "work"
    work.mkdir()
    loaded = load_config(agent_dir=agent, cwd=work, project_trusted=False, env={})
    engine = await Engine.open(loaded, agent, work, env={})
    try:
        assert set_paused(agent, project_of(work), True).ok
        recalled = await engine.recall(RecallParams(pi_session_id="s", prompt="what do I like?"))
        assert recalled.outcome == "disabled" and recalled.footer == Footer.of(footer.PAUSED)
        answer = {"role": "assistant", "content": [{"type": "text", "text": "hello"}], "stopReason": "stop"}
        run = [{"role": "user", "content": "hi", "timestamp": 1}, answer]
        settled = await engine.turn_settled(TurnSettledParams(pi_session_id="s", runs=[run]))
        assert settled.captured == 0 and settled.footer == Footer.of(footer.PAUSED)
        tool = await engine.tool_call(
            ToolCallParams(name="tdai_memory_save", arguments={"content": "likes go"})
        )
        assert tool.is_error and "paused" in tool.text
        assert engine.footer() == footer.PAUSED
        report = await engine.status_report()
        assert report.paused_project == project_of(work)
        assert "Memory is paused for this project" in render_status(report)
        assert set_paused(agent, project_of(work), False).ok
        assert engine.footer() == footer.READY
    finally:
        await engine.shutdown()


async def test_a_part_that_cannot_be_read_is_named_and_the_rest_is_shown(
    backend: LocalBackend, tmp_path: Path
) -> None:
    await backend.memories.save("prefers tabs over spaces", "preference", "user")
    (tmp_path / "memory-bridge" / "profile.md").mkdir()  # the profile cannot be read
    deps = ForgetDeps(backend, "")
    d = Driver(lambda dialog: memory_flow(deps, "", dialog))
    end = await d.run("~Preferences (1)", "~prefers tabs", BACK, BACK, CLOSE)
    menu = d.steps[0]
    assert "1 memory" in menu.message and "Profile" not in menu.options
    assert "\n! profile: cannot read the profile " in menu.message, menu.message
    assert any("prefers tabs over spaces" in s.message for s in d.steps[1:]) and end.kind == "done"
