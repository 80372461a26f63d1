"""Running inspectors are known: `/tdai-memory-ui` reuses one, `serve --stop` stops them and says
so, and a killed one is never listed as running."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from pi_memory_bridge import inspector_registry as registry
from pi_memory_bridge.commands.inspector_launch import (
    InspectorDeps,
    InspectorStartError,
    inspector_flow,
    launch_detached,
)
from waiting import wait_until

CLI = [sys.executable, "-c", "import sys; from pi_memory_bridge.cli import main; sys.exit(main())"]


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PI_")}
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700, exist_ok=True)
    env.update(PI_CODING_AGENT_DIR=str(tmp_path / "agent"), HOME=str(tmp_path), XDG_RUNTIME_DIR=str(runtime))
    return env


def _reap(pid: int) -> bool:
    try:
        os.waitpid(pid, os.WNOHANG)
        os.kill(pid, 0)
    except (ChildProcessError, ProcessLookupError):
        return True
    return False


async def test_the_pi_command_reuses_a_running_inspector_and_serve_stop_stops_it(tmp_path: Path) -> None:
    env = _env(tmp_path)
    deps = InspectorDeps(agent_dir=tmp_path / "agent", cwd=tmp_path, env=env)
    first = await inspector_flow(deps)
    assert "(started)" in first.message
    [running] = registry.running(env, tmp_path / "agent")
    assert running.url in first.message and running.address().startswith("http://127.0.0.1:")
    assert "token" not in running.address()
    again = await inspector_flow(deps)
    assert "(already running)" in again.message and running.url in again.message
    assert len(registry.running(env)) == 1
    assert registry.running(env, tmp_path / "other") == []

    stop = await asyncio.to_thread(
        subprocess.run, [*CLI, "serve", "--stop"], env=env, capture_output=True, text=True, timeout=60
    )
    assert stop.returncode == 0, stop.stderr
    assert stop.stdout.strip() == "stopped 0 background sidecars and 1 memory inspector"
    wait_until(lambda: _reap(running.pid), 15, "the inspector's exit", interval=0.1)
    assert registry.running(env) == []


def test_a_killed_inspector_is_not_listed(tmp_path: Path) -> None:
    env = _env(tmp_path)
    started = launch_detached(InspectorDeps(agent_dir=tmp_path / "agent", cwd=tmp_path, env=env))
    assert [r.pid for r in registry.running(env)] == [started.pid]
    os.kill(started.pid, signal.SIGKILL)  # no chance to unregister
    wait_until(lambda: _reap(started.pid), 15, "the inspector's death", interval=0.1)
    assert registry.running(env) == []
    assert not list((tmp_path / "run").glob("pi-memory-bridge-*/inspector-*"))  # its record is removed


def test_status_lists_a_running_inspector_of_this_agent_dir_by_address_without_its_token(
    tmp_path: Path,
) -> None:
    env = _env(tmp_path)
    url = "http://127.0.0.1:45678/?token=s3cr3t-start-token"
    held = registry.register(env, url, tmp_path / "agent")
    try:
        shown = subprocess.run([*CLI, "status"], env=env, capture_output=True, text=True, timeout=60)
        other = subprocess.run(
            [*CLI, "status"], env={**env, "PI_CODING_AGENT_DIR": str(tmp_path / "other")},
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    finally:
        registry.unregister(env, held)
    [line] = [x for x in shown.stdout.splitlines() if x.startswith("Inspector:")]
    assert "http://127.0.0.1:45678/" in line and "/tdai-memory-ui" in line
    assert "s3cr3t" not in shown.stdout and "?token=" not in shown.stdout
    assert "Inspector:" not in other.stdout  # another agent dir's inspector is not this memory's
    after = subprocess.run([*CLI, "status"], env=env, capture_output=True, text=True, timeout=60)
    assert "Inspector:" not in after.stdout  # gone once it stopped


def _program(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return str(path)


async def test_an_inspector_that_does_not_start_is_a_clear_error_and_leaves_no_process(
    tmp_path: Path,
) -> None:
    env = _env(tmp_path)
    cases = {
        "missing": (str(tmp_path / "no-such-python"), "cannot start the inspector: "),
        "exits": (_program(tmp_path, "exits", "exit 3"), "the inspector did not start (exit code 3)"),
        "not ours": (_program(tmp_path, "elsewhere", "echo http://evil.example/; sleep 30"), "did not start"),
        "silent": (_program(tmp_path, "silent", "exec sleep 30"), "did not start (exit code -9)"),
    }
    for name, (python, said) in cases.items():
        deps = InspectorDeps(agent_dir=tmp_path / "agent", cwd=tmp_path, env=env, python=python)
        with pytest.raises(InspectorStartError, match=re.escape(said)):
            launch_detached(deps, timeout_s=0.5 if name == "silent" else 10)  # silent: killed at the deadline
    outcome = await inspector_flow(InspectorDeps(tmp_path / "agent", tmp_path, env, python=cases["exits"][0]))
    assert (
        outcome.level == "error" and "run `pi-memory-bridge ui` in a terminal to see why" in outcome.message
    )
    assert registry.running(env) == []
