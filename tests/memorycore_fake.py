"""A fake MemoryCore server, and a fake of its Python SDK, for tests that cannot reach a real one.

`FakeMemoryCore` behaves like the server as documented in `reference/memorycore-sdk.md` (§1.4,
§3), for the routes the backend uses:

* auth: `Authorization: Bearer <key>` and a non-empty `x-tdai-service-id`, else a 401 envelope;
* envelopes `{code, message, request_id, data}`; data-plane errors carry HTTP status = code;
  skill errors arrive as HTTP 200 with a non-zero code; unknown routes get a non-envelope 404;
* limits: 1-100 messages per add, 1-8192 characters per message (UTF-16 units, as JavaScript
  counts), roles user/assistant, ISO timestamps with `Z`; a body over 1 MiB is answered by a
  connection reset, not a 413;
* `conversation/add` is not idempotent (fresh `msg-` ids every time); query filters on the
  message `timestamp`, newest first, and reports `recorded_at` as `timestamp`; search is scoped
  by team/agent/user and not by session; L2/L3 are per team+agent; a missing scenario or core
  reads as `content: null` with code 0.

`serve(fake)` runs it on 127.0.0.1 (stdlib `ThreadingHTTPServer`, keep-alive) so the real SDK can
talk to it over HTTP. `fake_sdk_bindings()` gives `SdkBindings` whose clients mimic the SDK's
`v3.AsyncMemoryClient`/`AsyncSkillClient`/`AsyncMetadataClient` signatures and exceptions and
talk to the same server over loopback HTTP with the stdlib, for CI, where the SDK is absent.

Faults for the next requests are queued with `fake.inject(Fault(...))`; `cost_ms` (per route) and
`cost_per_message_ms` give requests a simulated server time, served one request at a time like
MemoryCore's single Node thread (for benches).
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import itertools
import json
import re
import socket
import struct
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal
from urllib.parse import urlsplit

from pi_memory_bridge.backends.memorycore import SdkBindings

FAKE_API_KEY = "fake-gateway-key-for-tests"
FAKE_USER_KEY = "sk-mem-FAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKE"
MAX_BODY_BYTES = 1_048_576
_ISO_Z = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$")
_WORD = re.compile(r"[a-z0-9_]+")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

JsonDict = dict[str, Any]

# ---- server state --------------------------------------------------------------------------


@dataclass
class L0Row:
    id: str
    session_id: str
    team_id: str
    agent_id: str
    user_id: str
    role: str
    content: str
    timestamp_ms: int
    recorded_at: str
    terms: frozenset[str] = frozenset()


@dataclass
class AtomicRow:
    id: str
    team_id: str
    agent_id: str
    user_id: str
    type: str
    content: str
    background: str
    created_at: str


@dataclass
class ScenarioFile:
    content: str
    summary: str
    version: int
    updated_at: str


@dataclass
class Skill:
    skill_id: str
    team_id: str
    agent_id: str
    name: str
    description: str
    content: str
    version: int = 1


@dataclass(frozen=True)
class Fault:
    """What to do instead of (or after) serving the next request whose path starts with `path`.

    kind: "envelope" (an error envelope with `status`/`code`/`message`), "garbage" (`body` as is,
    with `status`), "reset" (connection reset before processing), "drop" (process the request,
    then reset: a lost response), "delay" (sleep `delay_s`, then serve normally).
    """

    path: str
    kind: Literal["envelope", "garbage", "reset", "drop", "delay"]
    status: int = 500
    code: int | None = None
    message: str = "fault injected by the test"
    body: bytes = b""
    delay_s: float = 0.0


@dataclass(frozen=True)
class Reply:
    status: int
    body: bytes


@dataclass(frozen=True)
class Reset:
    """Close the connection with a TCP reset; `after` is a reply that was processed and lost."""

    after: Reply | None = None


@dataclass
class RequestRecord:
    path: str
    body_bytes: int
    status: int | None  # None: reset


class _Problem(Exception):
    def __init__(self, status: int, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = status if code is None else code
        self.message = message


def _now_iso() -> str:
    moment = datetime.now(tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _iso_of_ms(ms: int) -> str:
    moment = _EPOCH + timedelta(milliseconds=ms)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def _ms_of_iso(text: str) -> int:
    return (datetime.fromisoformat(text) - _EPOCH) // timedelta(milliseconds=1)


def _js_len(text: str) -> int:
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


def _terms(text: str) -> frozenset[str]:
    lowered = text.lower()
    cjk = [ch for ch in lowered if "\u4e00" <= ch <= "\u9fff"]
    return frozenset(_WORD.findall(lowered)) | {a + b for a, b in itertools.pairwise(cjk)}


def _score(wanted: frozenset[str], text: str | frozenset[str]) -> float:
    if not wanted:
        return 0.0
    have = text if isinstance(text, frozenset) else _terms(text)
    # RRF-like small numbers, as the real hybrid search returns
    return round(len(wanted & have) / len(wanted) * 0.033, 6)


class FakeMemoryCore:
    """The server's behaviour, without HTTP (see `serve`)."""

    def __init__(self, api_key: str = FAKE_API_KEY, *, user_keys: tuple[str, ...] = (FAKE_USER_KEY,)) -> None:
        self.api_key = api_key
        self.user_keys = set(user_keys)
        self.max_body_bytes = MAX_BODY_BYTES
        self.l0: list[L0Row] = []
        self.l1: list[AtomicRow] = []
        self.scenarios: dict[tuple[str, str], dict[str, ScenarioFile]] = {}
        self.cores: dict[tuple[str, str], str] = {}
        self.skills: list[Skill] = []
        self.requests: list[RequestRecord] = []
        self.cost_ms: dict[str, float] = {}
        self.cost_per_message_ms = 0.0  # added to a request's cost per message it carries
        # ... and this much more per message for every L0 row already stored: MemoryCore's FTS5
        # delete by an UNINDEXED column scans the whole table for each message it adds
        self.cost_per_message_per_row_ms = 0.0
        self._faults: deque[Fault] = deque()
        self._state = threading.Lock()
        self._cpu = threading.Lock()  # one request at a time, like the single Node thread

    # -- test helpers ------------------------------------------------------------------------

    def inject(self, *faults: Fault) -> None:
        self._faults.extend(faults)

    def calls(self, path: str) -> int:
        return sum(1 for r in self.requests if r.path == path)

    def rows(self, session_id: str | None = None) -> list[L0Row]:
        with self._state:
            return [r for r in self.l0 if session_id is None or r.session_id == session_id]

    def add_atomic(self, ids: tuple[str, str, str], content: str, type: str = "work_fact") -> str:
        team, agent, user = ids
        row = AtomicRow(f"m_{uuid.uuid4().hex[:12]}", team, agent, user, type, content, "scene", _now_iso())
        with self._state:
            self.l1.append(row)
        return row.id

    def put_scenario(self, team: str, agent: str, path: str, content: str, summary: str = "") -> None:
        with self._state:
            files = self.scenarios.setdefault((team, agent), {})
            version = files[path].version + 1 if path in files else 1
            files[path] = ScenarioFile(content, summary, version, _now_iso())

    def put_core(self, team: str, agent: str, content: str) -> None:
        with self._state:
            self.cores[(team, agent)] = content

    def put_skill(self, team: str, agent: str, name: str, description: str, content: str = "") -> str:
        skill = Skill(f"skl-{uuid.uuid4().hex[:10]}", team, agent, name, description, content or description)
        with self._state:
            self.skills.append(skill)
        return skill.skill_id

    # -- request handling --------------------------------------------------------------------

    def handle(self, path: str, headers: dict[str, str], body: bytes) -> Reply | Reset:
        """One POST; `headers` keys are lower-case."""
        fault = self._take_fault(path)
        if fault is not None and fault.kind == "reset":
            self.requests.append(RequestRecord(path, len(body), None))
            return Reset()
        if fault is not None and fault.kind == "delay":
            time.sleep(fault.delay_s)
        reply = self._reply_for(path, headers, body, fault)
        self.requests.append(
            RequestRecord(path, len(body), None if fault and fault.kind == "drop" else reply.status)
        )
        if fault is not None and fault.kind == "drop":
            return Reset(after=reply)
        return reply

    def _take_fault(self, path: str) -> Fault | None:
        with self._state:
            for i, fault in enumerate(self._faults):
                if path.startswith(fault.path):
                    del self._faults[i]
                    return fault
        return None

    def _reply_for(self, path: str, headers: dict[str, str], body: bytes, fault: Fault | None) -> Reply:
        request_id = f"req-{uuid.uuid4().hex[:16]}"
        if fault is not None and fault.kind == "garbage":
            return Reply(fault.status, fault.body)
        if fault is not None and fault.kind == "envelope":
            code = fault.status if fault.code is None else fault.code
            return _envelope(fault.status, {"code": code, "message": fault.message, "request_id": request_id})
        route = _ROUTES.get(path)
        if route is None:
            return Reply(404, json.dumps({"error": f"Not found: {path}"}).encode())
        auth = headers.get("authorization", "")
        if not auth.startswith("Bearer ") or not auth[7:].strip():
            return _error(401, "Unauthorized: missing Bearer token", request_id)
        if self.api_key and auth[7:].strip() != self.api_key:
            return _error(401, "Unauthorized: invalid token", request_id)
        if not headers.get("x-tdai-service-id", "").strip():
            return _error(401, "Missing x-tdai-service-id header", request_id)
        try:
            payload = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            return _error(400, "Invalid JSON body", request_id)
        if not isinstance(payload, dict):
            return _error(400, "Invalid JSON body", request_id)
        cost = self.cost_ms.get(path, 0.0)
        if isinstance(payload.get("messages"), list):
            per_message = self.cost_per_message_ms + self.cost_per_message_per_row_ms * len(self.l0)
            cost += per_message * len(payload["messages"])
        with self._cpu:
            if cost:
                time.sleep(cost / 1000)
            try:
                with self._state:
                    data = route(self, payload, headers)
            except _Problem as problem:
                status = 200 if problem.code >= 600 else problem.status
                return _envelope(
                    status, {"code": problem.code, "message": problem.message, "request_id": request_id}
                )
        return _envelope(200, {"code": 0, "message": "ok", "request_id": request_id, "data": data})

    # -- routes (called with the state lock held) ----------------------------------------------

    def _iso(self, p: JsonDict) -> tuple[str, str, str]:
        return (
            str(p.get("team_id") or ""),
            str(p.get("agent_id") or "default"),
            str(p.get("user_id") or "default"),
        )

    def _scoped_l0(self, p: JsonDict) -> list[L0Row]:
        team, agent, user = self._iso(p)
        return [r for r in self.l0 if (r.team_id, r.agent_id, r.user_id) == (team, agent, user)]

    def conversation_add(self, p: JsonDict, _h: dict[str, str]) -> JsonDict:
        session_id = p.get("session_id", "default")
        if not isinstance(session_id, str) or not session_id:
            raise _Problem(400, "session_id: Too small: expected string to have >=1 characters")
        messages = p.get("messages")
        if not isinstance(messages, list) or not messages:
            raise _Problem(400, "messages: Too small: expected array to have >=1 items")
        if len(messages) > 100:
            raise _Problem(400, "messages: Too big: expected array to have <=100 items")
        for i, m in enumerate(messages):
            if not isinstance(m, dict) or m.get("role") not in ("user", "assistant"):
                raise _Problem(400, f'messages.{i}.role: Invalid option: expected one of "user"|"assistant"')
            content = m.get("content")
            if not isinstance(content, str) or not content:
                raise _Problem(
                    400, f"messages.{i}.content: Too small: expected string to have >=1 characters"
                )
            if _js_len(content) > 8192:
                raise _Problem(
                    400, f"messages.{i}.content: Too big: expected string to have <=8192 characters"
                )
            for key in ("timestamp", "recorded_at"):
                if key in m and (not isinstance(m[key], str) or not _ISO_Z.match(m[key])):
                    raise _Problem(400, f"messages.{i}.{key}: Invalid ISO datetime")
        team, agent, user = self._iso(p)
        base = int(time.time() * 1000)
        ids = []
        for i, m in enumerate(messages):
            recorded_ms = _ms_of_iso(m["recorded_at"]) if "recorded_at" in m else base + i
            row = L0Row(
                id=f"msg-{uuid.uuid4().hex[:12]}",
                session_id=session_id,
                team_id=team,
                agent_id=agent,
                user_id=user,
                role=m["role"],
                content=m["content"],
                timestamp_ms=_ms_of_iso(m["timestamp"]) if "timestamp" in m else recorded_ms,
                recorded_at=_iso_of_ms(recorded_ms),
                terms=_terms(m["content"]),
            )
            self.l0.append(row)
            ids.append(row.id)
        return {"accepted_ids": ids, "accepted_versions": ["v1"] * len(ids), "total_count": len(ids)}

    def _limit(self, p: JsonDict, default: int, top: int = 100, key: str = "limit") -> int:
        limit = p.get(key, default)
        if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= top:
            raise _Problem(400, f"{key}: expected an integer between 1 and {top}")
        return limit

    def _time_filtered(self, rows: list[L0Row], p: JsonDict) -> list[L0Row]:
        if p.get("time_start"):
            start = _ms_of_iso(p["time_start"])
            rows = [r for r in rows if r.timestamp_ms >= start]
        if p.get("time_end"):
            end = _ms_of_iso(p["time_end"])
            rows = [r for r in rows if r.timestamp_ms <= end]
        return rows

    def conversation_query(self, p: JsonDict, _h: dict[str, str]) -> JsonDict:
        limit = self._limit(p, 20)
        offset = p.get("offset", 0)
        rows = self._scoped_l0(p)
        if p.get("session_id"):
            rows = [r for r in rows if r.session_id == p["session_id"]]
        rows = sorted(self._time_filtered(rows, p), key=lambda r: r.timestamp_ms, reverse=True)
        page = rows[offset : offset + limit]
        return {
            "messages": [
                {
                    "id": r.id,
                    "session_id": r.session_id,
                    "team_id": r.team_id,
                    "user_id": r.user_id,
                    "agent_id": r.agent_id,
                    "task_id": "",
                    "role": r.role,
                    "content": r.content,
                    "timestamp": r.recorded_at,
                }
                for r in page
            ],
            "total": len(rows),
        }

    def _query_text(self, p: JsonDict) -> str:
        query = p.get("query")
        if not isinstance(query, str) or not 1 <= _js_len(query) <= 2048:
            raise _Problem(400, "query: expected a string of 1-2048 characters")
        return query

    def conversation_search(self, p: JsonDict, _h: dict[str, str]) -> JsonDict:
        wanted = _terms(self._query_text(p))
        limit = self._limit(p, 5)
        rows = self._scoped_l0(p)
        if p.get("session_id"):
            rows = [r for r in rows if r.session_id == p["session_id"]]
        scored = sorted(
            ((s, r) for r in rows if (s := _score(wanted, r.terms)) > 0),
            key=lambda x: (-x[0], -x[1].timestamp_ms),
        )
        return {
            "messages": [
                {"id": r.id, "role": r.role, "content": r.content, "timestamp": r.recorded_at, "score": s}
                for s, r in scored[:limit]
            ]
        }

    def conversation_delete(self, p: JsonDict, _h: dict[str, str]) -> JsonDict:
        ids = p.get("message_ids") or []
        sessions = p.get("session_ids") or []
        if not ids and not sessions:
            raise _Problem(400, "message_ids: at least one of message_ids or session_ids is required")
        if len(ids) > 5000 or len(sessions) > 100:
            raise _Problem(400, "message_ids: too many ids")
        scoped = {id(r) for r in self._scoped_l0(p)}
        doomed = [r for r in self.l0 if id(r) in scoped and (r.id in ids or r.session_id in sessions)]
        self.l0 = [r for r in self.l0 if r not in doomed]
        return {"deleted_count": len(doomed)}

    def conversation_count(self, p: JsonDict, _h: dict[str, str]) -> JsonDict:
        rows = self._scoped_l0(p)
        if p.get("session_id"):
            rows = [r for r in rows if r.session_id == p["session_id"]]
        return {"total": len(self._time_filtered(rows, p))}

    def _scoped_l1(self, p: JsonDict) -> list[AtomicRow]:
        team, agent, user = self._iso(p)
        return [r for r in self.l1 if (r.team_id, r.agent_id, r.user_id) == (team, agent, user)]

    def atomic_search(self, p: JsonDict, _h: dict[str, str]) -> JsonDict:
        wanted = _terms(self._query_text(p))
        limit = self._limit(p, 5)
        rows = [r for r in self._scoped_l1(p) if not p.get("type") or r.type == p["type"]]
        scored = sorted(((s, r) for r in rows if (s := _score(wanted, r.content)) > 0), key=lambda x: -x[0])
        return {
            "items": [
                {
                    "id": r.id,
                    "type": r.type,
                    "content": r.content,
                    "background": r.background,
                    "version": 0,
                    "team_id": r.team_id,
                    "user_id": r.user_id,
                    "agent_id": r.agent_id,
                    "task_id": "",
                    "created_at": r.created_at,
                    "updated_at": r.created_at,
                    "score": s,
                }
                for s, r in scored[:limit]
            ]
        }

    def atomic_query(self, p: JsonDict, _h: dict[str, str]) -> JsonDict:
        limit = self._limit(p, 20)
        offset = int(p.get("offset") or 0)
        rows = [r for r in self._scoped_l1(p) if not p.get("type") or r.type == p["type"]]
        rows.sort(key=lambda r: r.created_at, reverse=True)
        items = [
            {"id": r.id, "type": r.type, "content": r.content, "background": r.background, "version": 0,
             "created_at": r.created_at, "updated_at": r.created_at}
            for r in rows[offset : offset + limit]
        ]  # fmt: skip
        return {"items": items, "total": len(rows)}

    def atomic_delete(self, p: JsonDict, _h: dict[str, str]) -> JsonDict:
        ids = p.get("ids")
        if not isinstance(ids, list) or not 1 <= len(ids) <= 5000:
            raise _Problem(400, "ids: expected 1-5000 ids")
        scoped = {id(r) for r in self._scoped_l1(p)}
        doomed = [r for r in self.l1 if id(r) in scoped and r.id in ids]
        self.l1 = [r for r in self.l1 if r not in doomed]
        return {"deleted_count": len(doomed)}

    def atomic_count(self, p: JsonDict, _h: dict[str, str]) -> JsonDict:
        return {"total": len(self._scoped_l1(p))}

    def _profile_scope(self, p: JsonDict) -> tuple[str, str]:
        team, agent, user = self._iso(p)
        return (team or user, agent)

    def scenario_ls(self, p: JsonDict, _h: dict[str, str]) -> JsonDict:
        files = self.scenarios.get(self._profile_scope(p), {})
        entries: list[JsonDict] = []
        dirs = sorted({path.rsplit("/", 1)[0] + "/" for path in files if "/" in path})
        entries.extend(
            {"path": d, "version": 0, "created_at": _now_iso(), "updated_at": _now_iso()} for d in dirs
        )
        for path, f in sorted(files.items()):
            entries.append(
                {
                    "path": path,
                    "summary": f.summary or None,
                    "version": f.version,
                    "created_at": f.updated_at,
                    "updated_at": f.updated_at,
                }
            )
        return {
            "entries": [{k: v for k, v in e.items() if v is not None} for e in entries],
            "total": len(entries),
        }

    def scenario_read(self, p: JsonDict, _h: dict[str, str]) -> JsonDict:
        path = p.get("path")
        if not isinstance(path, str) or not path or path.startswith("/") or ".." in path.split("/"):
            raise _Problem(400, "path: invalid path")
        f = self.scenarios.get(self._profile_scope(p), {}).get(path)
        if f is None:
            return {"path": path, "content": None, "created_at": None, "updated_at": None}
        return {"path": path, "content": f.content, "version": f.version, "updated_at": f.updated_at}

    def core_read(self, p: JsonDict, _h: dict[str, str]) -> JsonDict:
        content = self.cores.get(self._profile_scope(p))
        if content is None:
            return {"content": None, "created_at": None, "updated_at": None}
        return {"content": content, "version": 1, "created_at": _now_iso(), "updated_at": _now_iso()}

    def skill_search(self, p: JsonDict, _h: dict[str, str]) -> JsonDict:
        query = p.get("query")
        if not isinstance(query, str) or not 1 <= _js_len(query) <= 2048:
            raise _Problem(200, "query: Too small: expected string to have >=1 characters", code=40001)
        top_k = p.get("top_k", 10)
        if not isinstance(top_k, int) or not 1 <= top_k <= 50:
            raise _Problem(200, "top_k: Too big: expected number to be <=50", code=40001)
        if p.get("agent_id") and not p.get("team_id"):
            raise _Problem(200, "agent_id requires team_id", code=40001)
        wanted = _terms(query)
        team, agent = p.get("team_id"), p.get("agent_id")
        pool = [
            s for s in self.skills if (not team or s.team_id == team) and (not agent or s.agent_id == agent)
        ]
        scored = sorted(
            ((s, k) for k in pool if (s := _score(wanted, f"{k.name} {k.description} {k.content}")) > 0),
            key=lambda x: -x[0],
        )
        return {
            "items": [
                {
                    "skill_id": k.skill_id,
                    "name": k.name,
                    "description": k.description,
                    "version": k.version,
                    "is_head": True,
                    "status": "active",
                    "team_id": k.team_id,
                    "owner_agent_id": k.agent_id,
                    "score": s,
                    "snippet": f"<mark>{k.name}</mark> {k.description}",
                }
                for s, k in scored[:top_k]
            ]
        }

    def verify_auth(self, p: JsonDict, _h: dict[str, str]) -> JsonDict:
        key = p.get("user_key")
        if key in self.user_keys:
            return {"valid": True, "user": {"user_id": "usr-fake", "user_type": "normal", "username": "fake"}}
        return {"valid": False, "user": None}


Route = Callable[[FakeMemoryCore, JsonDict, dict[str, str]], JsonDict]
_ROUTES: dict[str, Route] = {
    "/v3/conversation/add": FakeMemoryCore.conversation_add,
    "/v3/conversation/query": FakeMemoryCore.conversation_query,
    "/v3/conversation/search": FakeMemoryCore.conversation_search,
    "/v3/conversation/delete": FakeMemoryCore.conversation_delete,
    "/v3/conversation/count": FakeMemoryCore.conversation_count,
    "/v3/atomic/search": FakeMemoryCore.atomic_search,
    "/v3/atomic/delete": FakeMemoryCore.atomic_delete,
    "/v3/atomic/query": FakeMemoryCore.atomic_query,
    "/v3/atomic/count": FakeMemoryCore.atomic_count,
    "/v3/scenario/ls": FakeMemoryCore.scenario_ls,
    "/v3/scenario/read": FakeMemoryCore.scenario_read,
    "/v3/core/read": FakeMemoryCore.core_read,
    "/v3/skill/search": FakeMemoryCore.skill_search,
    "/v3/meta/auth/verify": FakeMemoryCore.verify_auth,
}


def _envelope(status: int, envelope: JsonDict) -> Reply:
    return Reply(status, json.dumps(envelope, ensure_ascii=False).encode("utf-8"))


def _error(status: int, message: str, request_id: str) -> Reply:
    return _envelope(status, {"code": status, "message": message, "request_id": request_id})


# ---- HTTP ----------------------------------------------------------------------------------


def _reset(connection: socket.socket) -> None:
    # SO_LINGER 0: close() sends RST, as Node's req.destroy() does to an oversized request
    with contextlib.suppress(OSError):
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        connection.close()


def _handler_for(fake: FakeMemoryCore) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            self._send(Reply(404, json.dumps({"error": f"Not found: {self.path}"}).encode()))

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            if length > fake.max_body_bytes:
                fake.requests.append(RequestRecord(self.path, length, None))
                self.close_connection = True
                _reset(self.connection)
                return
            body = self.rfile.read(length)
            headers = {k.lower(): v for k, v in self.headers.items()}
            outcome = fake.handle(self.path, headers, body)
            if isinstance(outcome, Reset):
                self.close_connection = True
                _reset(self.connection)
                return
            self._send(outcome)

        def _send(self, reply: Reply) -> None:
            self.send_response(reply.status)
            self.send_header("content-type", "application/json; charset=utf-8")
            self.send_header("content-length", str(len(reply.body)))
            self.end_headers()
            self.wfile.write(reply.body)

    return Handler


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that timed out or was reset mid-answer is part of the tests, not an error.
        pass


@contextlib.contextmanager
def serve(fake: FakeMemoryCore) -> Iterator[str]:
    """Run `fake` on 127.0.0.1 (a free port) and yield its base URL."""
    server = _QuietServer(("127.0.0.1", 0), _handler_for(fake))
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.02}, name="fake-memorycore", daemon=True
    )
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


# ---- the fake SDK ---------------------------------------------------------------------------


class FakeTDAMError(Exception):
    """Mimics `tencentdb_agent_memory.errors.TDAMError`."""

    def __init__(
        self, code: int, message: str, request_id: str = "", details: JsonDict | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.request_id = request_id
        self.details = dict(details) if details else None


class FakeParamError(Exception):
    """Mimics `tencentdb_agent_memory.errors.ParamError`."""


def _strip_none(d: JsonDict) -> JsonDict:
    return {k: v for k, v in d.items() if v is not None}


class _LoopbackTransport:
    """The SDK's v3 transport (headers, envelope decoding), over stdlib HTTP in a worker thread."""

    def __init__(
        self,
        endpoint: str,
        api_key: str,
        service_id: str,
        *,
        timeout: float,
        verify: bool,
        user_key: str | None,
    ) -> None:
        if (
            not endpoint
            or urlsplit(endpoint).scheme not in ("http", "https")
            or not urlsplit(endpoint).hostname
        ):
            raise FakeParamError("endpoint must be a valid HTTP(S) URL")
        if not api_key or not api_key.strip():
            raise FakeParamError("api_key must be provided")
        if not service_id or not service_id.strip():
            raise FakeParamError("service_id must be provided")
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
            raise FakeParamError("timeout must be a positive number")
        if not verify:
            raise AssertionError("the backend must never turn TLS verification off")
        parts = urlsplit(endpoint)
        if parts.scheme != "http":
            raise AssertionError("the fake SDK only speaks plain HTTP to a loopback fake")
        self.host, self.port = parts.hostname or "", parts.port or 80
        self.timeout = timeout
        self.headers = {
            "Authorization": f"Bearer {api_key}",
            "x-tdai-service-id": service_id,
            "Content-Type": "application/json",
        }
        if user_key:
            self.headers["x-tdai-user-key"] = user_key
        self.closed = False

    async def post(self, path: str, body: JsonDict) -> JsonDict:
        # Encoded like httpx >= 0.28 (compact, UTF-8): unpaired surrogates fail here as there.
        raw = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")
        status, text = await asyncio.to_thread(self._roundtrip, path, raw)
        return _decode(status, text)

    def _roundtrip(self, path: str, raw: bytes) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        try:
            conn.request("POST", path, body=raw, headers=self.headers)
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()

    async def close(self) -> None:
        self.closed = True


def _decode(status: int, text: bytes) -> JsonDict:
    try:
        envelope = json.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        message = text.decode("utf-8", "replace") or f"HTTP {status} returned a non-JSON response"
        raise FakeTDAMError(status if status >= 400 else -1, message) from None
    if not isinstance(envelope, dict):
        raise FakeTDAMError(-1, "API response must be a JSON object")
    code = envelope.get("code")
    if status >= 400 or code != 0:
        effective = code if isinstance(code, int) and code != 0 else status
        payload = envelope.get("data")
        raise FakeTDAMError(
            effective,
            str(envelope.get("message") or f"HTTP {status}"),
            str(envelope.get("request_id") or ""),
            payload if isinstance(payload, dict) else None,
        )
    result = envelope.get("data") or {}
    if not isinstance(result, dict):
        raise FakeTDAMError(-1, "API response data must be a JSON object")
    return result


class FakeAsyncMemoryClient:
    """Mimics `tencentdb_agent_memory.v3.AsyncMemoryClient` (the methods the backend uses)."""

    def __init__(
        self,
        endpoint: str = "",
        api_key: str = "",
        service_id: str | None = None,
        *,
        team_id: str = "",
        agent_id: str = "",
        user_id: str = "",
        session_id: str | None = None,
        task_id: str | None = None,
        user_key: str | None = None,
        timeout: float = 30,
        verify: bool = True,
    ) -> None:
        missing = [
            n for n, v in (("team_id", team_id), ("agent_id", agent_id), ("user_id", user_id)) if not v
        ]
        if missing:
            raise FakeParamError(
                f"v3 MemoryClient requires non-empty {', '.join(missing)} at construction time"
            )
        if not service_id:
            raise FakeParamError("service_id must be provided")
        self._stub = _LoopbackTransport(
            endpoint, api_key, service_id, timeout=timeout, verify=verify, user_key=user_key
        )
        self._ids = {"team_id": team_id, "agent_id": agent_id, "user_id": user_id, "task_id": task_id}
        self._session_id = session_id

    def _body(self, **fields: Any) -> JsonDict:
        return _strip_none({**self._ids, **fields})

    async def add_conversation(self, messages: list[JsonDict], *, session_id: str | None = None) -> JsonDict:
        sid = session_id or self._session_id
        if not sid:
            raise ValueError("v3 MemoryClient.add_conversation requires session_id")
        return await self._stub.post("/v3/conversation/add", self._body(session_id=sid, messages=messages))

    async def query_conversation(
        self,
        *,
        session_id: str | None = None,
        limit: int | None = None,
        offset: int | None = None,
        time_start: str | None = None,
        time_end: str | None = None,
    ) -> JsonDict:
        body = self._body(
            session_id=session_id or self._session_id,
            limit=limit,
            offset=offset,
            time_start=time_start,
            time_end=time_end,
        )
        return await self._stub.post("/v3/conversation/query", body)

    async def search_conversation(
        self,
        query: str,
        *,
        limit: int | None = None,
        session_id: str | None = None,
        time_start: str | None = None,
        time_end: str | None = None,
    ) -> JsonDict:
        body = self._body(
            session_id=session_id or self._session_id,
            query=query,
            limit=limit,
            time_start=time_start,
            time_end=time_end,
        )
        return await self._stub.post("/v3/conversation/search", body)

    async def delete_conversation(
        self,
        *,
        message_ids: list[str] | None = None,
        session_ids: list[str] | None = None,
        session_id: str | None = None,
    ) -> JsonDict:
        for name, ids in (("message_ids", message_ids), ("session_ids", session_ids)):
            if ids is not None and any(not isinstance(i, str) or not i.strip() for i in ids):
                raise FakeParamError(f"{name} must contain only non-empty strings")
        if not message_ids and not session_ids and not session_id:
            raise FakeParamError("delete_conversation requires message_ids or session_ids")
        sessions = list(dict.fromkeys([*(session_ids or []), *([session_id] if session_id else [])])) or None
        body = self._body(
            message_ids=list(dict.fromkeys(message_ids)) if message_ids else None, session_ids=sessions
        )
        return await self._stub.post("/v3/conversation/delete", body)

    async def count_conversation(
        self, *, session_id: str | None = None, time_start: str | None = None, time_end: str | None = None
    ) -> JsonDict:
        body = self._body(session_id=session_id or self._session_id, time_start=time_start, time_end=time_end)
        return await self._stub.post("/v3/conversation/count", body)

    async def search_atomic(
        self,
        query: str,
        *,
        limit: int | None = None,
        type: str | None = None,
        time_start: str | None = None,
        time_end: str | None = None,
        session_id: str | None = None,
    ) -> JsonDict:
        body = self._body(
            session_id=session_id or self._session_id,
            query=query,
            limit=limit,
            type=type,
            time_start=time_start,
            time_end=time_end,
        )
        return await self._stub.post("/v3/atomic/search", body)

    async def query_atomic(
        self,
        *,
        type: str | None = None,
        limit: int | None = None,
        offset: int | None = None,
        time_start: str | None = None,
        time_end: str | None = None,
        session_id: str | None = None,
    ) -> JsonDict:
        body = self._body(
            session_id=session_id or self._session_id,
            type=type,
            limit=limit,
            offset=offset,
            time_start=time_start,
            time_end=time_end,
        )
        return await self._stub.post("/v3/atomic/query", body)

    async def delete_atomic(self, ids: list[str], *, session_id: str | None = None) -> JsonDict:
        if not ids or any(not isinstance(i, str) or not i.strip() for i in ids):
            raise FakeParamError("delete_atomic requires a non-empty ids list")
        body = self._body(session_id=session_id or self._session_id, ids=list(dict.fromkeys(ids)))
        return await self._stub.post("/v3/atomic/delete", body)

    async def count_atomic(
        self,
        *,
        type: str | None = None,
        time_start: str | None = None,
        time_end: str | None = None,
        session_id: str | None = None,
    ) -> JsonDict:
        body = self._body(
            session_id=session_id or self._session_id, type=type, time_start=time_start, time_end=time_end
        )
        return await self._stub.post("/v3/atomic/count", body)

    async def list_scenarios(self, *, path_prefix: str | None = None) -> JsonDict:
        return await self._stub.post("/v3/scenario/ls", self._body(path_prefix=path_prefix))

    async def read_scenario(self, path: str) -> JsonDict:
        return await self._stub.post("/v3/scenario/read", self._body(path=path))

    async def read_core(self) -> JsonDict:
        return await self._stub.post("/v3/core/read", self._body())

    async def close(self) -> None:
        await self._stub.close()


class FakeAsyncSkillClient:
    """Mimics `tencentdb_agent_memory.v3.AsyncSkillClient.search`."""

    def __init__(
        self,
        endpoint: str = "",
        api_key: str = "",
        service_id: str | None = None,
        *,
        team_id: str | None = None,
        agent_id: str | None = None,
        user_id: str | None = None,
        task_id: str | None = None,
        timeout: float = 30,
        verify: bool = True,
    ) -> None:
        if not service_id:
            raise FakeParamError("service_id must be provided")
        self._stub = _LoopbackTransport(
            endpoint, api_key, service_id, timeout=timeout, verify=verify, user_key=None
        )
        self._ids = {"team_id": team_id, "agent_id": agent_id, "user_id": user_id, "task_id": task_id}

    async def search(
        self, query: str, *, top_k: int | None = None, mode: str | None = None, scope: str | None = None
    ) -> JsonDict:
        body = _strip_none({**self._ids, "query": query, "top_k": top_k, "mode": mode, "scope": scope})
        return await self._stub.post("/v3/skill/search", body)

    async def close(self) -> None:
        await self._stub.close()


class FakeAsyncMetadataClient:
    """Mimics `tencentdb_agent_memory.v3.AsyncMetadataClient.verify_auth`."""

    def __init__(
        self,
        endpoint: str = "",
        api_key: str = "",
        service_id: str | None = None,
        *,
        user_key: str | None = None,
        timeout: float = 30,
        verify: bool = True,
    ) -> None:
        if not service_id:
            raise FakeParamError("service_id must be provided")
        if not api_key:
            raise FakeParamError("api_key must be provided")
        self._stub = _LoopbackTransport(
            endpoint, api_key, service_id, timeout=timeout, verify=verify, user_key=user_key
        )

    async def verify_auth(self, user_key: str) -> JsonDict:
        return await self._stub.post("/v3/meta/auth/verify", {"user_key": user_key})

    async def close(self) -> None:
        await self._stub.close()


def fake_sdk_bindings() -> SdkBindings:
    """Bindings to the fake SDK; its transport raises stdlib exceptions where httpx raises its own."""
    return SdkBindings(
        memory_client=FakeAsyncMemoryClient,
        skill_client=FakeAsyncSkillClient,
        metadata_client=FakeAsyncMetadataClient,
        api_error=FakeTDAMError,
        param_error=FakeParamError,
        timeout_errors=(TimeoutError,),
        network_errors=(OSError, http.client.HTTPException),
        setup_errors=(http.client.InvalidURL,),
        version="fake",
    )
