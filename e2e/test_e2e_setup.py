"""`/tdai-memory-setup` over Pi's RPC mode with every dialog answered, against a MemoryCore server.

Runs when a server is configured (PI_MEMORY_BRIDGE_E2E_MEMORYCORE_URL, _KEY, _USER_KEY and the
provisioned _TEAM_ID / _AGENT_ID) and the SDK is installed; otherwise skips with the reason. The
headless refusal runs everywhere.
"""

from __future__ import annotations

import json
import os
import stat

import pytest

from bridge import SHIM, data_dir, use_bridge
from harness import Cancelled, Confirmed, DialogRequest, PiEnv, Value
from pi_memory_bridge.commands.setup import GATEWAY_FILE

URL = os.environ.get("PI_MEMORY_BRIDGE_E2E_MEMORYCORE_URL", "").strip()
KEY = os.environ.get("PI_MEMORY_BRIDGE_E2E_MEMORYCORE_KEY", "").strip()
USER_KEY = os.environ.get("PI_MEMORY_BRIDGE_E2E_MEMORYCORE_USER_KEY", "").strip()
TEAM = os.environ.get("PI_MEMORY_BRIDGE_E2E_MEMORYCORE_TEAM_ID", "").strip()
AGENT = os.environ.get("PI_MEMORY_BRIDGE_E2E_MEMORYCORE_AGENT_ID", "").strip()


def test_setup_refuses_to_write_without_ui(pi_env: PiEnv) -> None:
    use_bridge(pi_env)
    run = pi_env.run_print(["/tdai-memory-setup"], extensions=[SHIM])
    assert run.returncode == 0
    assert "pi-memory-bridge setup" in run.stderr
    assert not (data_dir(pi_env) / "config.json").exists()


@pytest.mark.skipif(
    not (URL and KEY and USER_KEY and TEAM and AGENT),
    reason="no provisioned MemoryCore server configured (see deploy/README.md)",
)
def test_setup_over_rpc_writes_a_working_config(pi_env: PiEnv) -> None:
    pytest.importorskip("tencentdb_agent_memory.v3", reason="the official MemoryCore SDK is not installed")
    use_bridge(pi_env)
    keys = pi_env.home / "keys"
    keys.mkdir()
    for name, value in (("user-key", USER_KEY), ("gateway-key", KEY)):
        (keys / name).write_text(value + "\n", encoding="utf-8")
        (keys / name).chmod(0o600)
    inputs = [URL, "default", str(keys / "user-key"), str(keys / "gateway-key")]

    def answer(req: DialogRequest) -> Confirmed | Value | Cancelled:
        if req.method == "input":
            return Value(inputs.pop(0))
        if req.method == "select":
            for wanted in (GATEWAY_FILE, TEAM, AGENT, "Yes"):  # a yes/no is a choice with "No" first
                match = next((o for o in req.options if wanted in o), None)
                if match is not None:
                    return Value(match)
            return Cancelled()
        return Confirmed(True)

    rpc = pi_env.start_rpc(extensions=[SHIM], dialogs=answer)
    rpc.prompt_and_settle("/tdai-memory-setup", timeout=60)
    rpc.wait_until(lambda: any("Memory setup saved" in n.message for n in rpc.ui.notifications), timeout=60)
    assert rpc.close() == 0
    path = data_dir(pi_env) / "config.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    config = json.loads(path.read_text(encoding="utf-8"))
    assert config["backend"] == "memorycore"
    assert config["memorycore"]["teamId"] == TEAM and config["memorycore"]["agentId"] == AGENT
    text = path.read_text(encoding="utf-8")
    assert USER_KEY not in text and KEY not in text  # key files are referenced, never copied
