"""Real Pi + the shim + the sidecar on the memorycore backend, against a MemoryCore server.

Runs when a server is configured (the same variables as test_e2e_memorycore.py) and the official
SDK is installed; skips with the reason otherwise. A turn said in one Pi session is delivered to
MemoryCore L0 through the outbox and recalled inside the untrusted block in a brand-new session.
"""

from __future__ import annotations

import os
import uuid

import pytest

from bridge import SHIM, use_bridge
from harness import FakeModel, PiEnv, TextReply

URL = os.environ.get("PI_MEMORY_BRIDGE_E2E_MEMORYCORE_URL", "").strip()
KEY = os.environ.get("PI_MEMORY_BRIDGE_E2E_MEMORYCORE_KEY", "").strip()

if not URL or not KEY:
    pytestmark = pytest.mark.skip(
        reason="no MemoryCore server: set PI_MEMORY_BRIDGE_E2E_MEMORYCORE_URL and "
        "PI_MEMORY_BRIDGE_E2E_MEMORYCORE_KEY (see deploy/README.md)"
    )
else:
    pytest.importorskip("tencentdb_agent_memory.v3", reason="the official MemoryCore SDK is not installed")


def _memorycore_config() -> dict[str, object]:
    run = uuid.uuid4().hex[:8]
    ids = {
        kind: os.environ.get(f"PI_MEMORY_BRIDGE_E2E_MEMORYCORE_{kind.upper()}_ID", "").strip()
        or f"{kind}-pi-{run}"
        for kind in ("team", "agent")
    }
    # L0 and L1 are per user: a user of its own keeps earlier runs' turns (on a server reused
    # across runs) from outranking this run's in a recall of only the first few hits.
    ids["user"] = f"user-pi-{run}"
    return {
        "backend": "memorycore",
        "memorycore": {
            "endpoint": URL,
            "serviceId": os.environ.get("PI_MEMORY_BRIDGE_E2E_MEMORYCORE_SERVICE_ID", "default") or "default",
            "teamId": ids["team"],
            "agentId": ids["agent"],
            "userId": ids["user"],
        },
    }


def test_a_pi_turn_reaches_memorycore_and_is_recalled_in_a_new_session(
    pi_env: PiEnv, fake_model: FakeModel
) -> None:
    use_bridge(pi_env, config=_memorycore_config())
    pi_env.extra_env["TDAI_MEMORY_GATEWAY_API_KEY"] = KEY
    marker = f"quartz-{uuid.uuid4().hex[:6]}"
    fake_model.script(TextReply(f"Noted: the release train is called {marker}."))
    first = pi_env.run_print(
        [f"Our release train is called {marker}, it leaves every Tuesday."], extensions=[SHIM]
    )
    assert first.returncode == 0, first.stderr
    second = pi_env.run_print([f"When does the {marker} release train leave?"], extensions=[SHIM])
    assert second.returncode == 0, second.stderr
    system = fake_model.last_request().recalled_block
    block = system[system.find("<recalled_memory") :] if "<recalled_memory" in system else ""
    assert f"Our release train is called {marker}" in block, system[-2000:]


def test_l2_and_l3_are_recalled_when_present(pi_env: PiEnv, fake_model: FakeModel) -> None:
    """L2 scenes and the L3 persona are written by the server's own pipeline (per team+agent), so
    this runs against a provisioned agent that already has them, and skips otherwise."""
    config = _memorycore_config()
    section = config["memorycore"]
    assert isinstance(section, dict)
    probe = _server_layers(section)
    if not probe:
        pytest.skip("the configured agent has no L2 scene or L3 persona yet (the server writes them later)")
    use_bridge(pi_env, config=config)
    pi_env.extra_env["TDAI_MEMORY_GATEWAY_API_KEY"] = KEY
    scene_path, persona_line = probe
    stem = scene_path.rsplit("/", 1)[-1].removesuffix(".md").replace("-", " ")
    assert pi_env.run_print([f"What are our {stem} rules?"], extensions=[SHIM]).returncode == 0
    system = fake_model.last_request().recalled_block
    block = system[system.find("<recalled_memory") :] if "<recalled_memory" in system else ""
    assert "[Scenario notes (L2)]" in block and scene_path in block, block[:3000]
    assert "[Profile (L3)]" in block and persona_line in block


def _server_layers(section: dict[str, object]) -> tuple[str, str] | None:
    import asyncio

    from pydantic import SecretStr

    from pi_memory_bridge.backends.memorycore import (
        MemoryCoreBackend,
        MemoryCoreCredentials,
        MemoryCoreTarget,
    )

    target = MemoryCoreTarget(
        URL,
        str(section["serviceId"]),
        str(section["teamId"]),
        str(section["agentId"]),
        str(section["userId"]),
        timeout_s=10,
    )
    backend = MemoryCoreBackend(target, MemoryCoreCredentials(SecretStr(KEY), None), cache_ttl_s=0)

    async def probe() -> tuple[str, str] | None:
        try:
            scenes = await backend.notes.list_scenarios()
            profile = await backend.notes.read_profile()
        finally:
            await backend.close()
        lines = [
            line for line in (profile.content.splitlines() if profile else []) if line.strip("# ").strip()
        ]
        if not scenes or len(lines) < 2:
            return None
        return scenes[0].path, lines[1].strip()

    return asyncio.run(probe())
