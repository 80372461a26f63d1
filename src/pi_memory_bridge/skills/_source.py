"""Where server skills come from: the backend's `SkillServer` (`backends.skills`), listed whole."""

from __future__ import annotations

from pi_memory_bridge.backends.base import BackendUnavailable
from pi_memory_bridge.backends.skills import (
    ManifestEntry,
    RemoteFile,
    RemoteSkill,
    RemoteSkillSummary,
    SkillPage,
    SkillSource,
)

__all__ = [
    "ManifestEntry",
    "RemoteFile",
    "RemoteSkill",
    "RemoteSkillSummary",
    "SkillPage",
    "SkillSource",
    "list_all_skills",
]

PAGE_SIZE = 100  # the server allows up to 1000; 100 keeps each response well under its body limit
MAX_PAGES = 200  # a server that never stops paging must not keep us here forever


async def list_all_skills(source: SkillSource, *, page_size: int = PAGE_SIZE) -> list[RemoteSkillSummary]:
    """Every skill the server lists, all pages, each id once, archived ones left out."""
    seen: dict[str, RemoteSkillSummary] = {}
    offset = 0
    for _ in range(MAX_PAGES):
        page = await source.list_page(offset, page_size)
        for item in page.items:
            if item.status == "active":
                seen.setdefault(item.skill_id, item)
        offset += len(page.items)
        if not page.items or offset >= page.total:
            return list(seen.values())
    raise BackendUnavailable(f"the server kept paging skills past {MAX_PAGES * page_size} entries")
