"""The setup wizard rendered as terminal prompts (`terminal.run_flow`), as `pi-memory-bridge setup`
runs it: numbered choices, y/N confirmations, and an empty answer as a cancel."""

from __future__ import annotations

import functools
import json
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from memorycore_fake import FAKE_API_KEY, FAKE_USER_KEY
from pi_memory_bridge.cli.terminal import run_flow
from pi_memory_bridge.commands.setup import CANCELLED, setup_flow
from test_setup_wizard import World, make_world


@pytest.fixture
def w(tmp_path: Path) -> Iterator[World]:
    yield from make_world(tmp_path, FAKE_API_KEY)


def scripted(replies: list[str]) -> tuple[list[str], Callable[[str], str]]:
    prompts: list[str] = []

    def ask(prompt: str) -> str:
        prompts.append(prompt)
        assert replies, f"the wizard asked more than the script holds: {prompt!r}"
        return replies.pop(0)

    return prompts, ask


async def test_a_terminal_run_writes_the_config(w: World, capsys: pytest.CaptureFixture[str]) -> None:
    # gateway choice 2 = key file; team 1 = Core; agent 2 = Mine (1 is "create")
    replies = [w.url, "default", "keys/user-key", "2", "keys/gateway-key", "1", "2", "y"]
    prompts, ask = scripted(replies)
    step = await run_flow(lambda dialog: setup_flow(w.deps, dialog), ask)
    assert step.level == "info" and not replies
    assert prompts[-1].endswith("[y/N] ") and prompts[3].startswith("Gateway API key (number")
    out = capsys.readouterr().out
    assert '+  "backend": "memorycore"' in out and "Memory setup saved" in out
    assert FAKE_USER_KEY not in out and FAKE_API_KEY not in out
    assert stat.S_IMODE(os.stat(w.config_path).st_mode) == 0o600
    assert json.loads(w.config_path.read_text())["memorycore"]["agentId"] == "agt-mine"


async def test_anything_but_yes_at_the_end_writes_nothing(w: World) -> None:
    _, ask = scripted([w.url, "default", "keys/user-key", "2", "keys/gateway-key", "1", "2", ""])
    step = await run_flow(lambda dialog: setup_flow(w.deps, dialog), ask)
    assert step.message == CANCELLED and not w.config_path.exists()


@pytest.mark.parametrize("at", range(7))
async def test_an_empty_answer_cancels(w: World, at: int) -> None:
    full = [w.url, "default", "keys/user-key", "2", "keys/gateway-key", "1", "2"]
    _, ask = scripted([*full[:at], ""])
    step = await run_flow(lambda dialog: setup_flow(w.deps, dialog), ask)
    assert step.message == CANCELLED and not w.config_path.exists()


async def test_a_bad_path_and_a_shared_agent_are_explained(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for w in make_world(tmp_path, FAKE_USER_KEY):  # the user key is also the gateway Bearer
        # gateway choice 1 = none; agent 3 = Everyone (team-visible): confirm, then write
        _, ask = scripted([w.url, "default", "keys/nope", "keys/user-key", "1", "1", "3", "y", "y"])
        step = await run_flow(functools.partial(setup_flow, w.deps), ask)
        out = capsys.readouterr().out
        assert "keys/nope does not exist" in out and "shared with the whole team" in out
        assert step.level == "info", step.message
        section = json.loads(w.config_path.read_text())["memorycore"]
        assert section["agentId"] == "agt-shared" and "gatewayApiKeyFile" not in section
