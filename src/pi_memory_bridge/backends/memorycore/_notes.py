"""`MemoryCoreNotes`: L2 scenario notes and the L3 profile on a MemoryCore server
(`backend.notes`), each read cached for `cache_ttl_s`.

    list_scenarios   scenario/ls
    read_scenario    scenario/read (keyed by what the listing says about the file)
    read_profile     core/read
"""

from __future__ import annotations

import re
from collections.abc import Callable

from pi_memory_bridge.backends.base import BackendRejected, Profile, ScenarioEntry, ScenarioNote
from pi_memory_bridge.backends.memorycore._cache import TtlCache
from pi_memory_bridge.backends.memorycore._client import MemoryCoreClients
from pi_memory_bridge.backends.memorycore._errors import call_sdk
from pi_memory_bridge.backends.memorycore._responses import (
    CoreFileData,
    ScenarioFileData,
    ScenarioListData,
    ScenarioListEntry,
    parse,
)
from pi_memory_bridge.backends.memorycore._sdk import SdkBindings
from pi_memory_bridge.backends.memorycore._values import instant

_META_BLOCK = re.compile(r"\A-----META-START-----\n.*?\n-----META-END-----\n*", re.DOTALL)
# MemoryCore appends an index of its scene files to the persona, for its own agents' `read` tool;
# Pi has no such tool and recall's L2 layer covers the scenes, so it is cut.
_SCENE_NAVIGATION = "---\n## 🗺️ Scene Navigation"
_LISTING_KEY = "scenario/ls"
_PROFILE_KEY = "core/read"


def _scenario_path_problem(path: str) -> str | None:
    if not path or "\0" in path or "\\" in path or path.startswith("/"):
        return "must be a relative path without backslashes or NUL"
    if any(part == ".." for part in path.split("/")):
        return 'must not contain ".."'
    return None


class MemoryCoreNotes:
    """L2 and L3 (`NoteStore`) for one identity, read-only (MemoryCore writes them itself)."""

    def __init__(
        self, clients: MemoryCoreClients, sdk: SdkBindings, *, cache_ttl_s: float, clock: Callable[[], float]
    ) -> None:
        self._clients = clients
        self._sdk = sdk
        self._listing: TtlCache[list[ScenarioListEntry]] = TtlCache(cache_ttl_s, max_entries=1, clock=clock)
        self._profile: TtlCache[Profile | None] = TtlCache(cache_ttl_s, max_entries=1, clock=clock)
        self._notes: TtlCache[ScenarioNote] = TtlCache(cache_ttl_s, max_entries=64, clock=clock)

    async def list_scenarios(self) -> list[ScenarioEntry]:
        entries = await self.scenario_listing()
        return [
            ScenarioEntry(
                path=e.path,
                summary=e.summary or "",
                updated_at=instant(e.updated_at) if e.updated_at else None,
            )
            for e in entries
        ]

    async def scenario_listing(self) -> list[ScenarioListEntry]:
        """The server's listing of scenario files (directories left out), cached."""

        async def load() -> list[ScenarioListEntry]:
            data = await call_sdk("scenario/ls", self._sdk, self._clients.memory.list_scenarios)
            listed = parse(ScenarioListData, data, "scenario/ls").entries
            return [e for e in listed if e.path and not e.path.endswith("/")]  # directories

        return await self._listing.get(_LISTING_KEY, load)

    async def read_scenario(self, path: str) -> ScenarioNote:
        problem = _scenario_path_problem(path)
        if problem is not None:
            raise BackendRejected(f"scenario path {path!r} {problem}")
        listed = self._listing.peek(_LISTING_KEY) or []
        entry = next((e for e in listed if e.path == path), None)
        # Keyed by what the listing says about the file, so a rewritten file is read afresh.
        key = (path, entry.version, entry.updated_at) if entry else (path, None, None)
        summary = (entry.summary or "") if entry else ""

        async def load() -> ScenarioNote:
            data = await call_sdk(
                "scenario/read", self._sdk, lambda: self._clients.memory.read_scenario(path)
            )
            note = parse(ScenarioFileData, data, "scenario/read")
            if note.content is None:
                raise BackendRejected(f"scenario {path!r} does not exist on the MemoryCore server")
            return ScenarioNote(path=path, summary=summary, content=_META_BLOCK.sub("", note.content))

        return await self._notes.get(key, load)

    async def read_profile(self) -> Profile | None:
        async def load() -> Profile | None:
            data = await call_sdk("core/read", self._sdk, self._clients.memory.read_core)
            content = parse(CoreFileData, data, "core/read").content or ""
            cut = content.find(_SCENE_NAVIGATION)
            content = (content[:cut] if cut >= 0 else content).rstrip()
            return Profile(content=content) if content.strip() else None

        return await self._profile.get(_PROFILE_KEY, load)

    def invalidate(self) -> None:
        """Forget the cached L2 listing, L2 notes and L3 profile (the next read asks the server)."""
        self._listing.invalidate()
        self._profile.invalidate()
        self._notes.invalidate()
