"""The contract between the shim's tables and the sidecar: the tools and commands Pi registers are
the ones the sidecar defines and runs, with the same argument schemas."""

from __future__ import annotations

from pathlib import Path
from typing import get_args

import pytest

from pi_memory_bridge.backends.base import AtomicType
from pi_memory_bridge.commands.table import COMMANDS
from pi_memory_bridge.engine.core import Engine
from pi_memory_bridge.engine.tool_table import tool_table
from pi_memory_bridge.sidecar import tables
from pi_memory_bridge.sidecar.handshake import handshake
from pi_memory_bridge.wire import InitializeParams, ToolName

SHIM_FILE = Path(__file__).resolve().parents[1] / tables.SHIM_TABLES


def test_the_committed_shim_table_is_what_python_renders() -> None:
    assert SHIM_FILE.read_text(encoding="utf-8") == tables.render(), (
        "run: python -m pi_memory_bridge.sidecar.tables --write"
    )


def test_check_mode_fails_on_a_stale_file(tmp_path: Path) -> None:
    stale = tmp_path / "tables.ts"
    stale.write_text(tables.render().replace("tdai_memory_save", "tdai_memory_keep"), encoding="utf-8")
    assert tables.main(["--check", "--out", str(stale)]) == 1
    assert tables.main(["--write", "--out", str(stale)]) == 0
    assert tables.main(["--check", "--out", str(stale)]) == 0


def test_the_wire_accepts_exactly_the_tools_in_the_table() -> None:
    assert {t.name for t in tool_table()} == set(get_args(ToolName))


def test_the_save_tool_offers_every_type_the_sidecar_accepts() -> None:
    save = next(t for t in tool_table() if t.name == "tdai_memory_save")
    offered = save.parameters()["properties"]
    assert isinstance(offered, dict)
    assert offered["type"]["enum"] == [t.value for t in AtomicType]
    assert save.parameters()["required"] == ["content"]


def test_schemas_are_plain_json_schema() -> None:
    """Pi 0.84 validates with TypeBox, 1.x with its JSON Schema validator: no refs, no titles."""
    for tool in tool_table():
        text = repr(tool.parameters())
        assert "$ref" not in text and "$defs" not in text and "'title'" not in text, tool.name
        assert tool.parameters()["type"] == "object"


@pytest.fixture
def engine(tmp_path: Path) -> Engine:
    env = {"HOME": str(tmp_path), "PI_CODING_AGENT_DIR": str(tmp_path / "agent")}
    params = {"protocolVersion": "1.0", "client": {"name": "t", "version": "0"}, "cwd": str(tmp_path)}
    hs = handshake(InitializeParams.model_validate(params), env)
    return Engine(hs.loaded, hs.agent_dir, hs.cwd, env=env)


def test_the_engine_runs_every_command_in_the_table(engine: Engine) -> None:
    assert engine.commands.names == {c.name for c in COMMANDS}
    assert len({c.pi_name for c in COMMANDS}) == len(COMMANDS)
    assert all(c.pi_name.startswith("tdai-memory") for c in COMMANDS)
