"""The skill-learning loop on real Pi against a MemoryCore server that mines skills.

A tool-heavy Pi task (11 scripted bash calls) is captured by the sidecar and sent to the skill
conversation-add endpoint; the server archives the buffer (>= 10 tool calls) and its Skill Review
Agent mines a skill from it; a later related prompt recalls that skill in the system prompt; the
sync command writes it into Pi's skill dir; a new Pi process lists it as `skill:<name>`.

Needs a server with `skill.extraction.enabled: true` and an LLM that answers the review (the lab
uses a scripted one whose `skill_create` lists the commands from the transcript) and a provisioned
team/agent/user (skill creation refuses unknown agents). Skips with the reason otherwise.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bridge import SHIM, data_dir, use_memorycore
from harness import (
    Cancelled,
    Confirmed,
    DialogRequest,
    FakeModel,
    PiEnv,
    TextReply,
    ToolCall,
    ToolCallsReply,
    Value,
)
from pi_memory_bridge.skills._flow import ALL, SKIP
from waiting import wait_until

_ENV = "PI_MEMORY_BRIDGE_E2E_MINING_"
URL = os.environ.get(f"{_ENV}URL", "").strip()
KEY = os.environ.get(f"{_ENV}KEY", "").strip()
TEAM = os.environ.get(f"{_ENV}TEAM_ID", "").strip()
AGENT = os.environ.get(f"{_ENV}AGENT_ID", "").strip()
USER = os.environ.get(f"{_ENV}USER_ID", "").strip()

pytestmark = pytest.mark.skipif(
    not (URL and KEY and TEAM and AGENT and USER),
    reason=f"no skill-mining MemoryCore server: set {_ENV}URL, {_ENV}KEY, {_ENV}TEAM_ID, "
    f"{_ENV}AGENT_ID and {_ENV}USER_ID (a server with skill.extraction.enabled, see deploy/README.md)",
)

MINING_TIMEOUT_S = 90.0  # archive -> worker pick-up (brpop) -> review LLM round trips
CAPTURE_TIMEOUT_S = 30.0
# Each scripted reply is one assistant message; Pi runs its calls in parallel.
TRIAGE_BATCHES: tuple[tuple[str, ...], ...] = (
    ("pwd", "echo 'git log --oneline -5'", "ls -a"),
    ("echo 'pytest -x tests/test_cache.py -p no:randomly'", "echo 'pytest tests/test_cache.py --count 20'"),
    (
        "echo 'pytest -p randomly -p no:cacheprovider --randomly-seed 1234'",
        "echo 'grep -n tmp_path tests/conftest.py'",
    ),
    ("echo 'isolate the shared cache fixture per test'", "echo 'pytest tests/test_cache.py --count 50'"),
    ("echo 'git diff --stat'", "echo 'all 50 runs green'"),
)


@pytest.fixture
def skill_client() -> Any:
    v3 = pytest.importorskip(
        "tencentdb_agent_memory.v3", reason="the official MemoryCore SDK is not installed"
    )
    return v3.SkillClient(URL, KEY, "default", team_id=TEAM, agent_id=AGENT, user_id=USER)


@pytest.fixture
def project() -> str:
    """A fresh project name per run, so the mined skill can be told apart from earlier runs'."""
    return f"orbit-{uuid.uuid4().hex[:6]}"


def _configure(env: PiEnv) -> None:
    use_memorycore(env, URL, KEY, TEAM, AGENT, USER, skills=True)


def _sync_answers(req: DialogRequest) -> Confirmed | Value | Cancelled:
    """Sync every server skill; a name clash with an earlier run's local copy is skipped."""
    if req.method == "select":
        for wanted in (ALL, SKIP, "Yes"):  # a yes/no is a choice with "No" first
            if wanted in req.options:
                return Value(wanted)
        return Cancelled()
    return Confirmed(True)


def _poll(what: str, probe: Callable[[], Any], timeout: float, interval: float = 0.5) -> Any:
    return wait_until(probe, timeout, what, interval=interval)


def _mined_skill(client: Any, project: str, since_ms: int) -> dict[str, Any] | None:
    """The skill the server's review agent created for `project` since the test began."""
    page = client.list(pagination={"limit": 100, "offset": 0})
    for item in page.get("items") or []:
        text = f"{item.get('name', '')}\n{item.get('description', '')}"
        if project in text and int(item.get("created_at_ms") or 0) >= since_ms and item.get("task_id"):
            return dict(item)
    return None


def _skill_file(env: PiEnv, name: str) -> Path:
    return env.agent_dir / "skills" / name / "SKILL.md"


def test_a_tool_heavy_task_is_mined_recalled_synced_and_listed(
    pi_env: PiEnv, fake_model: FakeModel, skill_client: Any, project: str
) -> None:
    _configure(pi_env)
    started_ms = int(time.time() * 1000)
    fake_model.script(
        *(ToolCallsReply(tuple(ToolCall("bash", {"command": c}) for c in batch)) for batch in TRIAGE_BATCHES),
        TextReply(f"The {project} cache tests were order-dependent; the fixture is now per test."),
    )
    calls = sum(len(batch) for batch in TRIAGE_BATCHES)
    assert calls >= 10  # the server archives (and mines) a buffer at 10 tool calls

    rpc = pi_env.start_rpc(extensions=[SHIM])
    task = rpc.prompt_and_settle(
        f"The test suite of project {project} is flaky: test_cache fails about one run in five. "
        "Find out why and fix it.",
        timeout=120,
    )
    ran = [m for m in task.agent_end_messages if m.get("role") == "toolResult"]
    assert len(ran) == calls and not any(m.get("isError") for m in ran), rpc.stderr
    ledger = data_dir(pi_env) / "skill-capture"
    _poll(
        "the sidecar to send the turn to skill capture",
        lambda: list(ledger.glob("*.sent")),
        CAPTURE_TIMEOUT_S,
    )
    rpc.close()
    assert not list(ledger.glob("*.dead")) and not list(ledger.glob("*.uncertain"))

    skill = _poll(
        "the server to mine a skill from the captured turn",
        lambda: _mined_skill(skill_client, project, started_ms),
        MINING_TIMEOUT_S,
    )
    name = str(skill["name"])

    # a later, related prompt recalls the learned skill inside the untrusted block
    fake_model.script(TextReply("Use the triage skill."))
    recall = pi_env.run_print(
        [f"Tests in {project} are flaky again, test_cache fails sometimes. How do we triage it?"],
        extensions=[SHIM],
    )
    assert recall.returncode == 0, recall.stderr
    system = fake_model.last_request().recalled_block
    block = system[system.find("<recalled_memory") :] if "<recalled_memory" in system else ""
    skills_part = block[block.find("[Learned skills]") :] if "[Learned skills]" in block else ""
    assert f"{name} id={skill['skill_id']}" in skills_part, system[-3000:]

    rpc = pi_env.start_rpc(extensions=[SHIM], dialogs=_sync_answers)
    rpc.prompt_and_settle("/tdai-memory-sync-skills", timeout=60)
    rpc.wait_until(lambda: _skill_file(pi_env, name).exists(), timeout=30)
    rpc.close()
    text = _skill_file(pi_env, name).read_text(encoding="utf-8")
    assert text.startswith(f'---\nname: "{name}"\n'), text[:300]
    # mined from what Pi actually did, not invented
    assert "--count 20" in text and "git log --oneline -5" in text, text

    fresh = pi_env.start_rpc(extensions=[SHIM])
    assert f"skill:{name}" in {c["name"] for c in fresh.get_commands()}
    fresh.close()
