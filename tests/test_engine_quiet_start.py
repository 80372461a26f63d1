"""What the first recall does not need stays off its path (engine.core), in a fresh process.

A module imported before the first recall is answered takes the GIL from it on a loaded 2-core
machine: the commands, the status report, catch-up's service and learning's ledger wait until
it is answered (then catch-up and learning start), or until a request needs them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = textwrap.dedent(
    """
    import asyncio, json, os, sys
    from pathlib import Path
    from pi_memory_bridge.config import load_config
    from pi_memory_bridge.engine.core import Engine
    from pi_memory_bridge.wire import RecallParams, SessionParams, TurnSettledParams

    HELD_BACK = (
        "pi_memory_bridge.engine.commands",
        "pi_memory_bridge.engine.status",
        "pi_memory_bridge.engine.catch_up_service",
        "pi_memory_bridge.backends.local.learning.memories",
    )
    STARTED_AFTER = (
        "pi_memory_bridge.engine.catch_up_service",
        "pi_memory_bridge.backends.local.learning.memories",
    )

    def loaded_now(names):
        return [m for m in names if m in sys.modules]

    async def main():
        agent, cwd, mode = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
        env = dict(os.environ)
        loaded = load_config(agent_dir=agent, cwd=cwd, project_trusted=False, env=env)
        engine = await Engine.open(loaded, agent, cwd, env=env)
        await engine.session_changed(SessionParams(pi_session_id="s"))
        out = {"opened": loaded_now(HELD_BACK)}
        if mode == "recall":
            await engine.recall(RecallParams(pi_session_id="s", prompt="how do we deploy billing?"))
        else:  # another request that needs learning attached comes first
            await engine.turn_settled(TurnSettledParams(pi_session_id="s", runs=[]))
            out["attached_at_once"] = engine.learning.memories is not None
        out["answered"] = loaded_now(("pi_memory_bridge.engine.commands", "pi_memory_bridge.engine.status"))
        for _ in range(400):  # the held-back start-up work follows (well before QUIET_START_S)
            if len(loaded_now(STARTED_AFTER)) == len(STARTED_AFTER) and engine.learning.memories is not None:
                break
            await asyncio.sleep(0.01)
        out["later"] = loaded_now(STARTED_AFTER)
        out["attached"] = engine.learning.memories is not None
        await engine.status_report()
        out["status"] = loaded_now(("pi_memory_bridge.engine.status",))
        await engine.shutdown()
        print(json.dumps(out))

    asyncio.run(main())
    """
)


def _run(tmp_path: Path, mode: str) -> dict[str, object]:
    agent, cwd = tmp_path / "agent", tmp_path / "project"
    cwd.mkdir()
    env = {
        **os.environ,
        "PI_CODING_AGENT_DIR": str(agent),
        "HOME": str(tmp_path),
        "PI_MEMORY_BRIDGE_EMBEDDINGS": "off",  # the model is not what this is about
    }
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(agent), str(cwd), mode],
        capture_output=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    result: dict[str, object] = json.loads(done.stdout.decode().splitlines()[-1])
    return result


def test_the_first_recall_is_answered_before_commands_status_catch_up_and_learning_load(
    tmp_path: Path,
) -> None:
    out = _run(tmp_path, "recall")
    assert out["opened"] == []
    assert out["answered"] == []
    assert out["later"] == [
        "pi_memory_bridge.engine.catch_up_service",
        "pi_memory_bridge.backends.local.learning.memories",
    ]
    assert out["attached"] is True
    assert out["status"] == ["pi_memory_bridge.engine.status"]


def test_a_turn_settled_before_any_recall_finds_learning_attached(tmp_path: Path) -> None:
    out = _run(tmp_path, "turn")
    assert out["opened"] == []
    assert out["attached_at_once"] is True
    assert out["later"] == [
        "pi_memory_bridge.engine.catch_up_service",
        "pi_memory_bridge.backends.local.learning.memories",
    ]
