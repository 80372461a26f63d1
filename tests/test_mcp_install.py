"""`pi-memory-bridge mcp install CLIENT [--print]`: the entry lands in each client's own file,
once, beside everything else in it; a dry run shows the diff and writes nothing; a file that does
not parse is left as it is."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from pi_memory_bridge.cli import main
from pi_memory_bridge.mcp_server.install import ENTRY_NAME, server_command

FILES = {
    "claude": ".claude.json",
    "codex": ".codex/config.toml",
    "cursor": ".cursor/mcp.json",
    "gemini": ".gemini/settings.json",
    "pi": ".pi/agent/mcp.json",
}


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path))
    for name in ("PI_CODING_AGENT_DIR", "CODEX_HOME"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def _entry(path: Path) -> dict[str, object]:
    text = path.read_text(encoding="utf-8")
    data = tomllib.loads(text)["mcp_servers"] if path.suffix == ".toml" else json.loads(text)["mcpServers"]
    found: dict[str, object] = data[ENTRY_NAME]
    return found


@pytest.mark.parametrize("client", sorted(FILES))
def test_install_writes_once_and_keeps_other_entries(
    client: str, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = home / FILES[client]
    path.parent.mkdir(parents=True, exist_ok=True)
    if client == "codex":
        path.write_text('model = "o4"\n\n[mcp_servers.other]\ncommand = "other-server"\n', encoding="utf-8")
    else:
        path.write_text(
            json.dumps({"theme": "dark", "mcpServers": {"other": {"command": "x"}}}), encoding="utf-8"
        )

    assert main(["mcp", "install", client, "--print"]) == 0
    shown = capsys.readouterr().out
    assert f"+++ {path}" in shown and "--agent" in shown and "was not changed" in shown
    assert ENTRY_NAME not in path.read_text(encoding="utf-8")  # the dry run wrote nothing

    assert main(["mcp", "install", client]) == 0
    entry = _entry(path)
    assert entry["command"] == server_command()[0]
    assert entry["args"][-3:] == [
        "mcp",
        "--agent",
        {"claude": "claude-code", "gemini": "gemini-cli"}.get(client, client),
    ]  # type: ignore[index]
    if client == "pi":
        assert entry["exposure"] == "direct"
    written = path.read_text(encoding="utf-8")
    if client == "codex":
        kept = tomllib.loads(written)
        assert kept["model"] == "o4" and kept["mcp_servers"]["other"] == {"command": "other-server"}
    else:
        kept = json.loads(written)
        assert kept["theme"] == "dark" and kept["mcpServers"]["other"] == {"command": "x"}

    capsys.readouterr()
    assert main(["mcp", "install", client]) == 0  # idempotent
    assert "nothing to change" in capsys.readouterr().out
    assert path.read_text(encoding="utf-8") == written


def test_a_changed_entry_is_replaced_and_the_agent_dir_travels(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["mcp", "install", "codex"]) == 0
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(home / "agent"))
    assert main(["mcp", "install", "codex"]) == 0
    path = home / FILES["codex"]
    assert _entry(path)["env"] == {"PI_CODING_AGENT_DIR": str(home / "agent")}
    assert path.read_text(encoding="utf-8").count(f"[mcp_servers.{ENTRY_NAME}]") == 1
    assert main(["mcp", "install", "pi"]) == 0  # Pi's file follows the agent dir
    assert _entry(home / "agent" / "mcp.json")["env"] == {"PI_CODING_AGENT_DIR": str(home / "agent")}


def test_project_scope_and_files_that_do_not_parse(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    project = home / "repo"
    project.mkdir()
    assert main(["mcp", "install", "claude", "--project", str(project)]) == 0
    assert ENTRY_NAME in json.loads((project / ".mcp.json").read_text(encoding="utf-8"))["mcpServers"]
    for client, broken in (("cursor", "{not json"), ("codex", "[mcp_servers\nx = ")):
        path = home / FILES[client]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(broken, encoding="utf-8")
        assert main(["mcp", "install", client]) == 1
        assert "nothing was changed" in capsys.readouterr().err
        assert path.read_text(encoding="utf-8") == broken


@pytest.mark.parametrize(
    ("client", "content", "why"),
    [
        ("cursor", b'["a list"]', "does not hold a JSON object; nothing was changed"),
        ("gemini", b'{"mcpServers": ["x"]}', "mcpServers is not an object; nothing was changed"),
        ("cursor", b'{"theme": "caf\xe9"}', "cannot read"),
        # our entry written inline: a table of ours would define it twice
        ("codex", b'mcp_servers = { pi-memory = { command = "old" } }\n', "cannot place the entry safely"),
    ],
)
def test_a_client_config_it_cannot_edit_safely_is_left_as_it_was(
    client: str, content: bytes, why: str, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = home / FILES[client]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    assert main(["mcp", "install", client]) == 1
    err = capsys.readouterr().err
    assert why in err and "Traceback" not in err, err
    assert path.read_bytes() == content
