"""What E2E tests of pi-memory-bridge need on top of the harness: the shim, the sidecar, the store."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

from harness import REPO_ROOT, FakeModel, PiEnv, ScriptedDialogs
from harness.procs import parent_pid

SHIM = REPO_ROOT / "extension-shim"
SIDECAR = REPO_ROOT / ".venv" / "bin" / "pi-memory-bridge"


def sidecar_cmd(*argv: str) -> str:
    return json.dumps(list(argv) or [str(SIDECAR), "serve"])


def use_bridge(env: PiEnv, *, cmd: str | None = None, config: dict[str, Any] | None = None) -> None:
    """Point the shim at the real sidecar (or `cmd`) and write the bridge's global config."""
    env.extra_env["PI_MEMORY_BRIDGE_CMD"] = cmd or sidecar_cmd()
    if config is not None:
        write_config(env, config)


def use_memorycore(env: PiEnv, url: str, key: str, team: str, agent: str, user: str, *, skills: bool) -> None:
    """The real sidecar on the memorycore backend, with the gateway key from the environment."""
    config: dict[str, Any] = {
        "backend": "memorycore",
        "memorycore": {"endpoint": url, "teamId": team, "agentId": agent, "userId": user},
    }
    if skills:
        config["skills"] = {"enabled": True}
    use_bridge(env, config=config)
    env.extra_env["TDAI_MEMORY_GATEWAY_API_KEY"] = key


def data_dir(env: PiEnv) -> Path:
    return env.agent_dir / "memory-bridge"


def write_config(env: PiEnv, config: dict[str, Any]) -> None:
    path = data_dir(env) / "config.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"schemaVersion": 1, **config}, indent=2) + "\n", encoding="utf-8")
    path.chmod(0o600)  # as a careful user keeps it (and our own writer does): doctor checks this


def detached_sidecars(env: PiEnv) -> list[int]:
    """This env's processes whose Pi has exited: sidecars finishing up on their own.

    Pi itself is a child of this (test) process; what Pi spawned has Pi as its parent until Pi
    exits, then PID 1 (or a subreaper)."""
    marked = set(env.marked_pids())
    return [p for p in marked if parent_pid(p) not in marked and parent_pid(p) != os.getpid()]


def wait_for_detached_sidecars(env: PiEnv, timeout: float = 15.0) -> None:
    """Pi does not wait for its sidecar to exit: after a `pi -p`, wait until every sidecar it left
    has finished (delivered what it queued, closed the store) before reading the store."""
    deadline = time.monotonic() + timeout
    while detached_sidecars(env):
        if time.monotonic() > deadline:
            left = detached_sidecars(env)
            raise AssertionError(f"sidecars still running {timeout:.0f} s after their Pi exited: {left}")
        time.sleep(0.02)


def stored_turns(env: PiEnv) -> list[dict[str, Any]]:
    """L0 rows straight from the SQLite store (not through our own code), once sidecars left
    behind by finished Pis are done."""
    wait_for_detached_sidecars(env)
    db = data_dir(env) / "memory.sqlite3"
    if not db.exists():
        return []
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    con.row_factory = sqlite3.Row
    try:
        table = next(
            (
                name
                for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type='table'")
                if name.lower() in ("turns", "l0_turns", "conversation_turns")
            ),
            None,
        )
        if table is None:
            return []  # a sidecar is creating the store right now: nothing is stored yet
        return [dict(r) for r in con.execute(f"SELECT * FROM {table}")]
    finally:
        con.close()


# The one margin every E2E deadline check allows: scheduling and pipe slack on a loaded 2-core
# machine, on top of the deadline and of what Pi itself costs for the same turn (measured in the
# same test with `pi_turn_costs`, so a slow machine slows both sides alike). With load average 9
# Pi's own first turn took up to ~5 s, and memory's share stayed within the deadline plus 1 s.
DEADLINE_MARGIN_S = 1.5


def pi_turn_costs(env: PiEnv, fake_model: FakeModel, turns: int = 2) -> list[float]:
    """How long Pi takes from a prompt to its model request without memory, turn by turn."""
    rpc = env.start_rpc(extensions=[], dialogs=ScriptedDialogs())
    costs = []
    for i in range(turns):
        sent = time.time()
        assert rpc.prompt_and_settle(f"baseline question {i}").ran
        costs.append(fake_model.chat_requests[-1].t - sent)
    assert rpc.close() == 0
    return costs


def memory_wait_bound(deadline_ms: int, pi_cost_s: float) -> float:
    """The most a turn may take with memory: Pi's own cost + the recall deadline + the margin."""
    return pi_cost_s + deadline_ms / 1000 + DEADLINE_MARGIN_S
