"""Which tools a configuration has no use for: the handshake tells the shim, which takes them out
of Pi's active tools. A module of its own, without the tool table's imports, because the
handshake must answer within tens of milliseconds of the sidecar's start."""

from __future__ import annotations

SKILL_TOOLS = ("tdai_skill_search", "tdai_skill_read")


def hidden_tools(*, skills_enabled: bool) -> list[str]:
    return [] if skills_enabled else list(SKILL_TOOLS)
