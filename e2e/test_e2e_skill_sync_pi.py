"""Synced skills as real Pi sees them, without a MemoryCore server: the sync engine writes from a
fake skill server into a throw-away agent dir, including the edited-skill conflict, and real Pi
(both versions) then lists the synced skills as its own."""

from __future__ import annotations

import sys
from pathlib import Path

from harness import PiEnv, ScriptedDialogs

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from flow_driver import Step, drive
from pi_memory_bridge.skills import SyncDeps, sync_skills_flow
from pi_memory_bridge.skills._flow import ALL, KEEP_BOTH
from skill_fake import FakeSkillClient, skill_md, source_with


async def _sync(client: FakeSkillClient, skills_dir: Path, answers: list[object]) -> Step:
    deps = SyncDeps(source_with(client), "", skills_dir)
    steps = await drive(lambda dialog: sync_skills_flow(deps, "", dialog), answers)
    return steps[-1]


def _skill_names(env: PiEnv) -> set[str]:
    rpc = env.start_rpc(dialogs=ScriptedDialogs())
    names = {c["name"] for c in rpc.get_commands() if str(c["name"]).startswith("skill:")}
    rpc.close()
    return names


async def test_synced_skills_load_in_pi_and_a_local_edit_is_kept(pi_env: PiEnv) -> None:
    client = FakeSkillClient()
    client.add("node-build-oom-triage", "Triage Node build out-of-memory crashes.", "Raise the heap first.")
    skills_dir = pi_env.agent_dir / "skills"
    done = await _sync(client, skills_dir, [ALL, True])
    assert "node-build-oom-triage" in done.message
    assert "skill:node-build-oom-triage" in _skill_names(pi_env)

    # the user edits the skill in Pi's skill dir; the server then publishes a new version
    path = skills_dir / "node-build-oom-triage" / "SKILL.md"
    edited = path.read_text(encoding="utf-8") + "\nOur CI runners have 7 GB.\n"
    path.write_text(edited, encoding="utf-8")
    client.skills[0].version = 2
    client.skills[0].content = skill_md(
        "node-build-oom-triage", "Triage Node build OOM crashes.", "Version two."
    )
    done = await _sync(client, skills_dir, [ALL, KEEP_BOTH, True])
    assert "kept both" in done.message
    assert path.read_text(encoding="utf-8") == edited  # never overwritten silently
    assert "Version two." in (skills_dir / "node-build-oom-triage-2" / "SKILL.md").read_text(encoding="utf-8")
    assert {"skill:node-build-oom-triage", "skill:node-build-oom-triage-2"} <= _skill_names(pi_env)
