"""An in-memory fake of the MemoryCore skill routes the sync needs (list, get, files/read).

`FakeSkillClient` has the signatures of `tencentdb_agent_memory.v3.AsyncSkillClient.list/get/
read_file/search` and raises the fake SDK's `FakeTDAMError` like the real one: skill errors as
envelope codes (40401 ...), data-plane errors as the HTTP status (429, 408, 503 ...). Faults are
queued per method with `fail(method, code)`.
"""

from __future__ import annotations

import base64
import dataclasses
from dataclasses import dataclass, field
from typing import Any

from memorycore_fake import FakeTDAMError, fake_sdk_bindings
from pi_memory_bridge.backends.memorycore import MemoryCoreBackend, MemoryCoreTarget, SdkBindings
from pi_memory_bridge.skills import MemoryCoreSkillSource

JsonDict = dict[str, Any]


@dataclass
class FakeFile:
    data: bytes
    mime_type: str = "text/markdown"
    reported_size: int | None = None  # what the manifest claims (None: the true size)
    raw_base64: str | None = None  # sent instead of encoding `data` (to test bad base64)


@dataclass
class FakeSkill:
    skill_id: str
    name: str
    description: str
    content: str
    version: int = 1
    status: str = "active"
    files: dict[str, FakeFile] = field(default_factory=dict)


def skill_md(name: str, description: str, body: str = "Do the thing.") -> str:
    return f"---\nname: {name}\ndescription: {description}\n---\n\n{body}\n"


class FakeSkillClient:
    def __init__(self) -> None:
        self.skills: list[FakeSkill] = []
        self.calls: list[tuple[str, JsonDict]] = []
        self.faults: dict[str, list[tuple[int, str]]] = {}
        self.total_override: int | None = None  # a server whose `total` lies

    def add(self, name: str, description: str = "", body: str = "Do the thing.", **kw: Any) -> FakeSkill:
        skill_id = kw.pop("skill_id", f"skl-{len(self.skills) + 1:04d}")
        content = kw.pop("content", None) or skill_md(name, description or f"About {name}.", body)
        skill = FakeSkill(skill_id, name, description or f"About {name}.", content, **kw)
        self.skills.append(skill)
        return skill

    def find(self, skill_id: str) -> FakeSkill:
        for skill in self.skills:
            if skill.skill_id == skill_id and skill.status == "active":
                return skill
        raise FakeTDAMError(40401, f"SKILL_NOT_FOUND: {skill_id}", "req-fake")

    def fail(self, method: str, code: int, message: str = "fault injected") -> None:
        self.faults.setdefault(method, []).append((code, message))

    def _enter(self, method: str, body: JsonDict) -> None:
        self.calls.append((method, body))
        queued = self.faults.get(method)
        if queued:
            code, message = queued.pop(0)
            raise FakeTDAMError(code, message, "req-fake")

    @staticmethod
    def _summary(s: FakeSkill) -> JsonDict:
        return {
            "skill_id": s.skill_id,
            "name": s.name,
            "description": s.description,
            "version": s.version,
            "is_head": True,
            "status": s.status,
        }

    async def list(self, *, filters: JsonDict | None = None, pagination: JsonDict | None = None) -> JsonDict:
        self._enter("list", {"filters": filters, "pagination": pagination})
        page = pagination or {}
        limit, offset = int(page.get("limit", 20)), int(page.get("offset", 0))
        if not 1 <= limit <= 1000:
            raise FakeTDAMError(40001, "pagination.limit out of range", "req-fake")
        active = [s for s in self.skills if s.status == "active"]
        total = len(active) if self.total_override is None else self.total_override
        return {"items": [self._summary(s) for s in active[offset : offset + limit]], "total": total}

    async def get(
        self,
        skill_id: str,
        *,
        version: int | None = None,
        include_content: bool | None = None,
        include_manifest: bool | None = None,
    ) -> JsonDict:
        self._enter("get", {"skill_id": skill_id})
        s = self.find(skill_id)
        manifest = [
            {
                "path": p,
                "size_bytes": f.reported_size if f.reported_size is not None else len(f.data),
                "mime_type": f.mime_type,
                "is_executable": False,
            }
            for p, f in s.files.items()
        ]
        return {**self._summary(s), "content": s.content, "manifest": manifest, "content_hash": "x"}

    async def read_file(
        self, skill_id: str, path: str, *, version: int | None = None, encoding: str | None = None
    ) -> JsonDict:
        self._enter("read_file", {"skill_id": skill_id, "path": path, "encoding": encoding})
        s = self.find(skill_id)
        f = s.files.get(path)
        if f is None:
            raise FakeTDAMError(40401, f"RESOURCE_NOT_FOUND: {path}", "req-fake")
        if encoding == "base64" or f.raw_base64 is not None:
            content = f.raw_base64 if f.raw_base64 is not None else base64.b64encode(f.data).decode()
            return {"path": path, "content": content, "encoding": "base64", "size_bytes": len(f.data)}
        try:
            text = f.data.decode("utf-8")
        except UnicodeDecodeError:
            return {
                "path": path,
                "content": base64.b64encode(f.data).decode(),
                "encoding": "base64",
                "size_bytes": len(f.data),
            }
        return {"path": path, "content": text, "encoding": "utf-8", "size_bytes": len(f.data)}

    async def search(self, query: str, *, top_k: int | None = None) -> JsonDict:
        self._enter("search", {"query": query, "top_k": top_k})
        words = set(query.lower().split())
        hits = [s for s in self.skills if words & set(f"{s.name} {s.description}".lower().split())]
        return {
            "items": [{**self._summary(s), "score": 1.0, "snippet": s.description} for s in hits][
                : top_k or 10
            ]
        }

    async def close(self) -> None:
        pass


def bindings_with(client: Any) -> SdkBindings:
    """Bindings whose skill client is `client` (any fake with the SDK methods a test needs)."""
    return dataclasses.replace(fake_sdk_bindings(), skill_client=lambda *a, **k: client)


def backend_with(client: Any) -> MemoryCoreBackend:
    target = MemoryCoreTarget("http://127.0.0.1:9", "default", "team", "agent", "user")
    return MemoryCoreBackend.with_keys(target, gateway_api_key="fake-key", sdk=bindings_with(client))


def source_with(client: FakeSkillClient) -> MemoryCoreSkillSource:
    return MemoryCoreSkillSource.from_backend(backend_with(client))


class FakeCaptureClient:
    """Mimics `AsyncSkillClient.conversation_add`: the server's buffer just accumulates."""

    def __init__(self) -> None:
        self.buffer: list[JsonDict] = []
        self.calls = 0
        self.faults: list[tuple[int, bool]] = []  # (code, buffered before failing)
        self.archive_at = 10
        self.ids: list[tuple[str, str, str, str]] = []  # (session, user, team, agent) per call

    async def conversation_add(
        self, *, session_id: str, user_id: str, team_id: str, agent_id: str, messages: list[JsonDict]
    ) -> JsonDict:
        self.calls += 1
        self.ids.append((session_id, user_id, team_id, agent_id))
        if any("|" in v for v in (session_id, user_id, team_id, agent_id)):
            raise FakeTDAMError(40001, "ids must not contain |", "req-fake")
        if not 1 <= len(messages) <= 500:
            raise FakeTDAMError(40001, "messages: 1..500", "req-fake")
        if any(m["role"] in ("tool_call", "tool_result") and not m.get("tool_call_id") for m in messages):
            raise FakeTDAMError(40001, "tool_call_id required", "req-fake")
        fault = self.faults.pop(0) if self.faults else None
        if fault is None or fault[1]:
            self.buffer.extend(messages)
        if fault is not None:
            raise FakeTDAMError(fault[0], "fault injected", "req-fake")
        if sum(m["role"] == "tool_call" for m in self.buffer) >= self.archive_at:
            self.buffer.clear()
            return {"status": "archived", "archived": {"reason": "tool_calls"}}
        return {"status": "ok"}
