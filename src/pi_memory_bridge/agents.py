"""Which agent saved a memory: the `source` of a memory saved through the MCP server.

A memory saved by another coding agent (Claude Code, Codex, Cursor, Gemini CLI, or Pi's own MCP
client) over `pi-memory-bridge mcp` is stored with the source `agent:<name>`, so every view of
memory (`/tdai-memory`, `pi-memory-bridge list`/`show`, the inspector) can say who put it there.
"""

from __future__ import annotations

import re

AGENT_PREFIX = "agent:"
MAX_NAME_CHARS = 40
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
# the names `mcp install` writes (`--agent`) and the names clients announce in `initialize`
_DISPLAY = {
    "claude": "Claude Code",
    "claude-code": "Claude Code",
    "codex": "Codex",
    "codex-mcp-client": "Codex",
    "cursor": "Cursor",
    "cursor-vscode": "Cursor",
    "gemini": "Gemini CLI",
    "gemini-cli": "Gemini CLI",
    "gemini-cli-mcp-client": "Gemini CLI",
    "pi": "Pi over MCP",
}


def agent_name(raw: str) -> str:
    """A short, printable name for an agent: letters, digits, `.`, `_`, `-` ("unknown" if none)."""
    clean = _UNSAFE.sub("-", raw.strip().lower()).strip("-.")[:MAX_NAME_CHARS]
    return clean or "unknown"


def agent_source(raw: str) -> str:
    """The `source` a memory saved by this agent is stored with."""
    return AGENT_PREFIX + agent_name(raw)


def saved_by_agent(source: str) -> str | None:
    """The agent a memory's `source` names, in words ("Claude Code"), or None if no agent saved it."""
    if not source.startswith(AGENT_PREFIX):
        return None
    name = agent_name(source.removeprefix(AGENT_PREFIX))
    return _DISPLAY.get(name, name)
