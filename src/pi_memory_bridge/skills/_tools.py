"""The model's read-only skill tools: `tdai_skill_search` and `tdai_skill_read`.

Search results carry the skill id, so the model can pass it to `tdai_skill_read` (the reference
adapter's search hid it, which left read unusable). Everything returned is server data: redacted,
escaped and wrapped as untrusted, and capped in size.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field, field_validator

from pi_memory_bridge.backends.base import BackendError, Capability, MemoryBackend
from pi_memory_bridge.recall.boundary import escape_field, escape_label
from pi_memory_bridge.redact import redact_text
from pi_memory_bridge.skills._bundle import SKILL_FILE, resource_path_problem
from pi_memory_bridge.skills._source import SkillSource
from pi_memory_bridge.tools.memory import MAX_TOOL_TEXT, ToolArgs, ToolFailure, parse_args, wrap_untrusted

SKILL_SEARCH_TOOL = "tdai_skill_search"
SKILL_READ_TOOL = "tdai_skill_read"
SNIPPET_CHARS = 300
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_SKILL_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


class SkillSearchArgs(ToolArgs):
    query: str = Field(min_length=1, max_length=2000, description="What the skill should help with.")
    top_k: int = Field(default=5, ge=1, le=20, description="How many results (default 5).")


class SkillReadArgs(ToolArgs):
    skill_id: str = Field(min_length=1, max_length=256, description="The skill_id from tdai_skill_search.")
    path: str | None = Field(
        default=None, max_length=512, description="A file inside the skill (default SKILL.md)."
    )

    @field_validator("skill_id")
    @classmethod
    def _plain_id(cls, value: str) -> str:
        value = _CONTROL.sub("", value).strip()
        if not _SKILL_ID.match(value):
            raise ValueError("a skill id as shown by tdai_skill_search (e.g. skl-1a2b3c)")
        return value

    @field_validator("path")
    @classmethod
    def _plain_path(cls, value: str | None) -> str | None:
        if value is None:
            return None
        value = _CONTROL.sub("", value).strip()
        if value in ("", SKILL_FILE):
            return None
        problem = resource_path_problem(value)
        if problem is not None:
            raise ValueError(f"path {problem}")
        return value


def _clean(text: str) -> str:
    return escape_field(redact_text(text.strip()).text)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _no_skills(backend_name: str) -> ToolFailure:
    return ToolFailure(
        f"skills are not available with the {backend_name} memory backend (they need a MemoryCore "
        "server); continue without skills"
    )


async def skill_search(backend: MemoryBackend, arguments: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    args: SkillSearchArgs = parse_args(SkillSearchArgs, arguments)
    if Capability.SKILLS not in backend.capabilities:
        raise _no_skills(backend.name)
    try:
        hits = await backend.search_skills(args.query, args.top_k)
    except BackendError as exc:
        raise ToolFailure(f"skill search failed: {redact_text(str(exc)).text}") from None
    if not hits:
        return "No matching skills found.", {"count": 0}
    lines = [f"Pass a skill_id to {SKILL_READ_TOOL} to read the skill (optionally with a path for a file)."]
    for hit in hits:
        version = f", v{hit.version}" if hit.version is not None else ""
        head = f"- {escape_label(hit.name) or 'unnamed'} (skill_id: {escape_label(hit.id)}{version})"
        if hit.description.strip():
            head += f": {escape_label(redact_text(hit.description).text)}"
        lines.append(head)
        if hit.snippet.strip():
            lines.append("    " + _clip(_clean(hit.snippet), SNIPPET_CHARS).replace("\n", "\n    "))
    ids = [hit.id for hit in hits]
    return wrap_untrusted(lines), {"count": len(hits), "skill_ids": ids}


async def skill_read(
    backend: MemoryBackend, source: SkillSource | None, arguments: dict[str, Any]
) -> tuple[str, dict[str, Any]]:
    args: SkillReadArgs = parse_args(SkillReadArgs, arguments)
    if source is None or Capability.SKILLS not in backend.capabilities:
        raise _no_skills(backend.name)
    details: dict[str, Any] = {"skill_id": args.skill_id, "path": args.path or SKILL_FILE}
    try:
        if args.path is None:
            skill = await source.get_skill(args.skill_id)
            content = skill.content or ""
            title = f"{SKILL_FILE} of skill {escape_label(skill.name)} ({args.skill_id}, v{skill.version})"
            files = [escape_label(m.path) for m in skill.manifest]
            if files:
                title += f"; files: {', '.join(files[:50])}"
        else:
            remote = await source.read_file(args.skill_id, args.path, "utf-8")
            if remote.encoding != "utf-8":
                note = f"{escape_label(args.path)} is a binary file; it cannot be shown as text."
                return wrap_untrusted([note]), details
            content = remote.content
            title = f"{escape_label(args.path)} of skill {args.skill_id}"
    except BackendError as exc:
        raise ToolFailure(f"skill read failed: {redact_text(str(exc)).text}") from None
    if not content.strip():
        return "No content found.", details
    body = _clean(content)
    room = MAX_TOOL_TEXT - len(title) - 64
    if len(body) > room:
        details["truncated"] = True
        body = body[: room - 1] + "…"
    return wrap_untrusted([title, body]), details
