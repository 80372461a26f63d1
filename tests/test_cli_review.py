"""`pi-memory-bridge proposals` as a user runs it: a real store, the real executable."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from learning_helpers import ScriptedModel, active_texts, decide, extract, run, turn
from pi_memory_bridge.backends.local import LocalBackend
from pi_memory_bridge.cli.json_shapes import SHAPES

REPO = Path(__file__).resolve().parents[1]
EXE = REPO / ".venv" / "bin" / "pi-memory-bridge"
OLD = "The project uses MySQL."
NEW = "The project moved from MySQL to PostgreSQL."


def _cli(agent: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PI_CODING_AGENT_DIR": str(agent), "HOME": str(agent.parent)}
    return subprocess.run(
        [str(EXE), *args], input=stdin, capture_output=True, text=True, env=env, cwd=agent.parent,
        timeout=60, check=False, stdin=None if stdin is not None else subprocess.DEVNULL,
    )  # fmt: skip


async def _seed(agent: Path) -> None:
    backend = LocalBackend(agent / "memory-bridge")
    try:
        await backend.memories.save(OLD, "fact", "user")
        await backend.conversation.add([turn(1, "We moved to PostgreSQL.")])
        model = ScriptedModel(
            extract(("decision", NEW, ["t1"])),
            decide({"new": "n1", "action": "supersede", "targets": ["m1"]}),
        )
        outcome = await run(backend, model)
        assert outcome.summary is not None and outcome.summary.proposed == 1
    finally:
        await backend.close()


def _active(agent: Path) -> list[str]:
    backend = LocalBackend(agent / "memory-bridge")
    try:
        return active_texts(backend)
    finally:
        backend.store.close()


async def test_list_shows_the_proposal_in_words_and_in_its_documented_json(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    await _seed(agent)
    listed = _cli(agent, "proposals")
    assert listed.returncode == 0, listed.stderr
    assert NEW in listed.stdout and f"instead of your saved memory: {OLD}" in listed.stdout
    as_json = _cli(agent, "proposals", "--json")
    assert as_json.returncode == 0, as_json.stderr
    SHAPES["proposals"].model_validate_json(as_json.stdout, by_alias=True)
    [item] = json.loads(as_json.stdout)["proposals"]
    assert item["text"] == NEW and [r["text"] for r in item["replaces"]] == [OLD]


async def test_accept_asks_no_by_default_and_yes_replaces_the_saved_memory(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    await _seed(agent)
    [item] = json.loads(_cli(agent, "proposals", "--json").stdout)["proposals"]
    ref = str(item["id"])
    declined = _cli(agent, "proposals", "accept", ref, stdin="\n")
    assert declined.returncode == 1 and "nothing changed" in declined.stdout
    assert _active(agent) == [OLD]
    eof = _cli(agent, "proposals", "accept", ref, stdin="")
    assert eof.returncode == 1 and "Traceback" not in eof.stderr and _active(agent) == [OLD]
    accepted = _cli(agent, "proposals", "accept", ref, stdin="y\n")
    assert accepted.returncode == 0, accepted.stderr
    assert "accepted" in accepted.stdout and "undo" in accepted.stdout
    assert _active(agent) == [NEW]
    assert json.loads(_cli(agent, "proposals", "--json").stdout) == {"proposals": []}
    again = _cli(agent, "proposals", "accept", ref, "--yes")
    assert again.returncode == 1 and "no pending proposal" in again.stderr


async def test_dismiss_with_yes_keeps_the_saved_memory(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    await _seed(agent)
    [item] = json.loads(_cli(agent, "proposals", "--json").stdout)["proposals"]
    dismissed = _cli(agent, "proposals", "dismiss", str(item["id"]), "--yes")
    assert dismissed.returncode == 0, dismissed.stderr
    assert _active(agent) == [OLD]
    empty = _cli(agent, "proposals")
    assert empty.returncode == 0 and "no proposals waiting" in empty.stdout


def test_bad_usage_says_how_and_changes_nothing(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    agent.mkdir()
    for args in (("proposals", "accept"), ("proposals", "frobnicate", "1"), ("proposals", "list", "1")):
        bad = _cli(agent, *args)
        assert bad.returncode == 2 and "usage: pi-memory-bridge proposals" in bad.stderr, args
