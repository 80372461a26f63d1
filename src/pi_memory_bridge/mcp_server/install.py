"""`pi-memory-bridge mcp install CLIENT [--print] [--project DIR]`: this server in a client's config.

Each client keeps its MCP servers in its own file (JSON `mcpServers` for Claude Code, Cursor,
Gemini CLI and Pi; a TOML table `[mcp_servers.<name>]` for Codex). The entry is named
`pi-memory` and starts this install's own `pi-memory-bridge mcp --agent CLIENT`, so memories
saved through it say which agent saved them. Writing is idempotent (an equal entry is left as it
is) and touches nothing else in the file; `--print` shows the change as a diff and writes nothing.
A file that does not parse is never rewritten.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import sys
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pi_memory_bridge.config import default_agent_dir

ENTRY_NAME = "pi-memory"
Client = Literal["claude", "codex", "cursor", "gemini", "pi"]
CLIENT_NAMES: dict[str, str] = {
    "claude": "claude-code",
    "codex": "codex",
    "cursor": "cursor",
    "gemini": "gemini-cli",
    "pi": "pi",
}


class InstallError(Exception):
    """The config file cannot be changed safely (it does not parse, or holds something else)."""


@dataclass(frozen=True, slots=True)
class Plan:
    path: Path
    before: str | None  # None: the file does not exist yet
    after: str

    @property
    def changed(self) -> bool:
        return self.before != self.after

    def diff(self) -> str:
        old = (self.before or "").splitlines(keepends=True)
        new = self.after.splitlines(keepends=True)
        label = str(self.path)
        return "".join(
            difflib.unified_diff(
                old, new, f"{label} (now)" if self.before is not None else "/dev/null", label
            )
        )


def server_command() -> list[str]:
    """This install's own `pi-memory-bridge`, by absolute path (clients start it with no venv)."""
    script = Path(sys.executable).parent / "pi-memory-bridge"
    if script.is_file():
        return [str(script)]
    return [sys.executable, "-m", "pi_memory_bridge.cli"]


def entry(client: Client, env: dict[str, str]) -> dict[str, object]:
    command, *prefix = server_command()
    out: dict[str, object] = {"command": command, "args": [*prefix, "mcp", "--agent", CLIENT_NAMES[client]]}
    if env.get("PI_CODING_AGENT_DIR"):
        # the same store as the Pi that runs with this environment, whatever the client's own env
        out["env"] = {"PI_CODING_AGENT_DIR": env["PI_CODING_AGENT_DIR"]}
    if client == "pi":
        out["exposure"] = "direct"  # six small tools: declared to the model like built-in ones
    return out


def config_path(client: Client, env: dict[str, str], project: Path | None) -> Path:
    home = Path(env.get("HOME") or Path.home())
    if project is not None:
        return (
            project
            / {
                "claude": ".mcp.json",
                "codex": ".codex/config.toml",
                "cursor": ".cursor/mcp.json",
                "gemini": ".gemini/settings.json",
                "pi": ".pi/mcp.json",
            }[client]
        )
    if client == "claude":
        return home / ".claude.json"
    if client == "codex":
        return Path(env.get("CODEX_HOME") or home / ".codex") / "config.toml"
    if client == "cursor":
        return home / ".cursor" / "mcp.json"
    if client == "gemini":
        return home / ".gemini" / "settings.json"
    return default_agent_dir(env) / "mcp.json"


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise InstallError(f"cannot read {path}: {exc}") from None


def plan_json(path: Path, before: str | None, value: dict[str, object]) -> Plan:
    data: object = {}
    if before is not None and before.strip():
        try:
            data = json.loads(before)
        except ValueError as exc:
            raise InstallError(
                f"{path} is not valid JSON ({exc}); fix it first, nothing was changed"
            ) from None
    if not isinstance(data, dict):
        raise InstallError(f"{path} does not hold a JSON object; nothing was changed")
    servers = data.get("mcpServers", {})
    if not isinstance(servers, dict):
        raise InstallError(f"{path}: mcpServers is not an object; nothing was changed")
    if servers.get(ENTRY_NAME) == value and before is not None:
        return Plan(path, before, before)
    data["mcpServers"] = {**servers, ENTRY_NAME: value}
    return Plan(path, before, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def _toml_value(value: object) -> str:
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # a TOML basic string is JSON's string syntax
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(value)


def _toml_block(value: dict[str, object]) -> str:
    lines = [f"[mcp_servers.{ENTRY_NAME}]"]
    lines += [f"{k} = {_toml_value(v)}" for k, v in value.items() if not isinstance(v, dict)]
    for key, sub in value.items():
        if isinstance(sub, dict):
            lines += ["", f"[mcp_servers.{ENTRY_NAME}.{key}]"]
            lines += [f"{k} = {_toml_value(v)}" for k, v in sub.items()]
    return "\n".join(lines) + "\n"


_HEADER = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")


def plan_toml(path: Path, before: str | None, value: dict[str, object]) -> Plan:
    text = before or ""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InstallError(f"{path} is not valid TOML ({exc}); fix it first, nothing was changed") from None
    servers = data.get("mcp_servers", {})
    if isinstance(servers, dict) and servers.get(ENTRY_NAME) == value and before is not None:
        return Plan(path, before, before)
    # drop our own tables (`[mcp_servers.pi-memory]` and its sub-tables), keep every other line
    kept: list[str] = []
    ours = False
    for line in text.splitlines(keepends=True):
        header = _HEADER.match(line)
        if header:
            name = header.group(1).replace('"', "").replace(" ", "")
            ours = name == f"mcp_servers.{ENTRY_NAME}" or name.startswith(f"mcp_servers.{ENTRY_NAME}.")
        if not ours:
            kept.append(line)
    head = "".join(kept).rstrip("\n")
    after = (head + "\n\n" if head else "") + _toml_block(value)
    try:
        check = tomllib.loads(after)
    except tomllib.TOMLDecodeError as exc:  # e.g. the entry was written inline elsewhere
        raise InstallError(f"{path}: cannot place the entry safely ({exc}); nothing was changed") from None
    if check.get("mcp_servers", {}).get(ENTRY_NAME) != value:
        raise InstallError(f"{path}: the entry is defined in a form this installer does not edit")
    return Plan(path, before, after)


def plan(client: Client, env: dict[str, str], project: Path | None) -> Plan:
    path = config_path(client, env, project)
    before = _read(path)
    value = entry(client, env)
    return plan_toml(path, before, value) if client == "codex" else plan_json(path, before, value)


def write(p: Plan) -> None:
    """Atomically: a temp file beside it, then a rename; an existing file keeps its mode."""
    p.path.parent.mkdir(parents=True, exist_ok=True)
    mode = p.path.stat().st_mode & 0o777 if p.path.exists() else 0o600
    fd, tmp = tempfile.mkstemp(prefix=f".{p.path.name}.", dir=p.path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(p.after)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, p.path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def install(client: Client, *, print_only: bool, project: Path | None) -> int:
    try:
        p = plan(client, dict(os.environ), project)
    except InstallError as exc:
        print(f"pi-memory-bridge: {exc}", file=sys.stderr)
        return 1
    if not p.changed:
        print(f"{p.path} already has the {ENTRY_NAME} entry; nothing to change.")
        return 0
    if print_only:
        sys.stdout.write(p.diff())
        print(f"(dry run: {p.path} was not changed)")
        return 0
    write(p)
    print(f"wrote the {ENTRY_NAME} entry to {p.path}")
    return 0
