"""Skills on real Pi against a MemoryCore server: search shows the id, read works, sync writes a
Pi-native skill that a new Pi process lists, and a local edit is never overwritten silently.

Runs when a provisioned server is configured and the SDK is installed; skips with the reason
otherwise (CI covers the same rules with fakes in tests/test_skills_*.py).
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from bridge import SHIM, use_memorycore
from harness import Cancelled, Confirmed, DialogRequest, FakeModel, PiEnv, Value
from pi_memory_bridge.skills._flow import ALL, SKIP

URL = os.environ.get("PI_MEMORY_BRIDGE_E2E_MEMORYCORE_URL", "").strip()
KEY = os.environ.get("PI_MEMORY_BRIDGE_E2E_MEMORYCORE_KEY", "").strip()
TEAM = os.environ.get("PI_MEMORY_BRIDGE_E2E_MEMORYCORE_TEAM_ID", "").strip()
AGENT = os.environ.get("PI_MEMORY_BRIDGE_E2E_MEMORYCORE_AGENT_ID", "").strip()
USER = os.environ.get("PI_MEMORY_BRIDGE_E2E_MEMORYCORE_USER_ID", "").strip()

pytestmark = pytest.mark.skipif(
    not (URL and KEY and TEAM and AGENT and USER),
    reason="no provisioned MemoryCore server configured (see deploy/README.md)",
)


@pytest.fixture
def server_skill() -> Iterator[tuple[str, str, object]]:
    v3 = pytest.importorskip(
        "tencentdb_agent_memory.v3", reason="the official MemoryCore SDK is not installed"
    )
    client = v3.SkillClient(URL, KEY, "default", team_id=TEAM, agent_id=AGENT, user_id=USER)
    token = uuid.uuid4().hex[:6]
    name = f"node-build-oom-triage-{token}"
    body = (
        f"---\nname: {name}\ndescription: Triage Node build out-of-memory crashes (run {token}).\n---\n"
        "# Node build OOM triage\n1. Raise the heap: NODE_OPTIONS=--max-old-space-size=4096\n"
        "2. Find the step that leaks with --heap-prof.\n"
    )
    created = client.create(name=name, content=body)
    skill_id = str(created.get("skill_id") or created.get("data", {}).get("skill_id"))
    yield name, skill_id, client
    # Leave the server as found: a later run's search must not rank this run's twin first.
    with contextlib.suppress(Exception):
        current = client.get(skill_id)
        version = (current.get("data") or current).get("version")
        client.delete(skill_id, expected_version=int(version))


def _configure(env: PiEnv) -> None:
    use_memorycore(env, URL, KEY, TEAM, AGENT, USER, skills=True)


def _policy(conflict_answer: str) -> object:
    def answer(req: DialogRequest) -> Confirmed | Value | Cancelled:
        if req.method == "select":
            for wanted in (ALL, conflict_answer, "Yes"):  # a yes/no is a choice with "No" first
                if wanted in req.options:
                    return Value(wanted)
            return Cancelled()
        return Confirmed(True)

    return answer


def _tool_text(result: object) -> str:
    """The text of the tool result Pi recorded (the fake model's echo of it is truncated)."""
    for message in result.agent_end_messages:  # type: ignore[attr-defined]
        if message.get("role") == "toolResult":
            return "".join(b.get("text", "") for b in message["content"] if isinstance(b, dict))
    raise AssertionError("no tool result")


def _skill_file(env: PiEnv, name: str) -> Path:
    return env.agent_dir / "skills" / name / "SKILL.md"


def test_search_read_sync_and_a_local_edit(pi_env: PiEnv, fake_model: FakeModel, server_skill) -> None:  # type: ignore[no-untyped-def]
    name, skill_id, client = server_skill
    _configure(pi_env)

    rpc = pi_env.start_rpc(extensions=[SHIM])
    found = _tool_text(
        rpc.prompt_and_settle(
            f'CALL_TOOL tdai_skill_search {{"query": "node build out of memory {name.rsplit("-", 1)[1]}"}}'
        )
    )
    assert f"skill_id: {skill_id}" in found  # the id the read tool needs
    read = _tool_text(rpc.prompt_and_settle(f'CALL_TOOL tdai_skill_read {{"skill_id": "{skill_id}"}}'))
    assert "max-old-space-size" in read and read.startswith("<recalled_memory")
    rpc.close()

    rpc = pi_env.start_rpc(extensions=[SHIM], dialogs=_policy(SKIP))  # type: ignore[arg-type]
    rpc.prompt_and_settle("/tdai-memory-sync-skills", timeout=60)
    rpc.wait_until(lambda: _skill_file(pi_env, name).exists(), timeout=30)
    rpc.close()
    text = _skill_file(pi_env, name).read_text(encoding="utf-8")
    assert text.startswith(f'---\nname: "{name}"\ndescription: "Triage Node build')

    fresh = pi_env.start_rpc(extensions=[SHIM])
    assert f"skill:{name}" in {c["name"] for c in fresh.get_commands()}
    fresh.close()

    # the user edits the synced skill; the server publishes a new version; a sync must not clobber it
    edited = text + "\n3. My own note: our CI runners have 7 GB.\n"
    _skill_file(pi_env, name).write_text(edited, encoding="utf-8")
    client.update(skill_id, expected_version=1, content=text.replace("4096", "6144"))
    rpc = pi_env.start_rpc(extensions=[SHIM], dialogs=_policy(SKIP))  # type: ignore[arg-type]
    rpc.prompt_and_settle("/tdai-memory-sync-skills", timeout=60)
    rpc.wait_until(lambda: any("sync" in n.message.lower() for n in rpc.ui.notifications), timeout=30)
    rpc.close()
    assert _skill_file(pi_env, name).read_text(encoding="utf-8") == edited
