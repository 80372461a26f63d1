"""The MemoryCore backend against a real MemoryCore server, through the official SDK.

Runs only when a server is named; otherwise every test skips with the reason:

    PI_MEMORY_BRIDGE_E2E_MEMORYCORE_URL          e.g. http://127.0.0.1:8420 (https for remote)
    PI_MEMORY_BRIDGE_E2E_MEMORYCORE_KEY          the gateway Bearer (server.apiKey)
    PI_MEMORY_BRIDGE_E2E_MEMORYCORE_SERVICE_ID   optional, default "default"
    PI_MEMORY_BRIDGE_E2E_MEMORYCORE_TEAM_ID      optional; by default a fresh team/agent/user per
    PI_MEMORY_BRIDGE_E2E_MEMORYCORE_AGENT_ID     run, so counts are exact and nothing is shared
    PI_MEMORY_BRIDGE_E2E_MEMORYCORE_USER_ID
    PI_MEMORY_BRIDGE_E2E_MEMORYCORE_L1_WAIT_S    how long to wait for L1 extraction (default 60)
    PI_MEMORY_BRIDGE_E2E_MEMORYCORE_USER_KEY     optional: status must then find it valid

The skill test needs a provisioned team and agent (skills must belong to a known agent), so it
runs only when the TEAM/AGENT ids are given.

L1 needs the server's extraction LLM (see deploy/README.md); the L1 test fails, with a hint,
when nothing is extracted within the wait. The SDK must be installed (the `memorycore` extra).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import struct
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import pytest
from pydantic import SecretStr

from pi_memory_bridge.backends.base import BackendUnavailable, ConversationTurn, SkillHit
from pi_memory_bridge.backends.memorycore import (
    MemoryCoreBackend,
    MemoryCoreCredentials,
    MemoryCoreTarget,
    load_sdk,
)
from pi_memory_bridge.backends.memorycore._chunking import turn_messages

URL = os.environ.get("PI_MEMORY_BRIDGE_E2E_MEMORYCORE_URL", "").strip()
KEY = os.environ.get("PI_MEMORY_BRIDGE_E2E_MEMORYCORE_KEY", "").strip()
SERVICE_ID = os.environ.get("PI_MEMORY_BRIDGE_E2E_MEMORYCORE_SERVICE_ID", "default").strip() or "default"
L1_WAIT_S = float(os.environ.get("PI_MEMORY_BRIDGE_E2E_MEMORYCORE_L1_WAIT_S", "60"))
RUN = uuid.uuid4().hex[:8]
T = TypeVar("T")

if not URL or not KEY:
    pytestmark = pytest.mark.skip(
        reason="no MemoryCore server: set PI_MEMORY_BRIDGE_E2E_MEMORYCORE_URL and "
        "PI_MEMORY_BRIDGE_E2E_MEMORYCORE_KEY (see deploy/README.md)"
    )
else:
    pytest.importorskip(
        "tencentdb_agent_memory.v3",
        reason="the official MemoryCore SDK is not installed (pi-memory-bridge install-sdk installs it)",
    )


def _id(kind: str) -> str:
    return (
        os.environ.get(f"PI_MEMORY_BRIDGE_E2E_MEMORYCORE_{kind.upper()}_ID", "").strip()
        or f"{kind}-e2e-{RUN}"
    )


def target(endpoint: str = URL, *, timeout_s: float = 15.0) -> MemoryCoreTarget:
    return MemoryCoreTarget(endpoint, SERVICE_ID, _id("team"), _id("agent"), _id("user"), timeout_s=timeout_s)


USER_KEY = os.environ.get("PI_MEMORY_BRIDGE_E2E_MEMORYCORE_USER_KEY", "").strip()
PROVISIONED = bool(
    os.environ.get("PI_MEMORY_BRIDGE_E2E_MEMORYCORE_TEAM_ID")
    and os.environ.get("PI_MEMORY_BRIDGE_E2E_MEMORYCORE_AGENT_ID")
)


def make(endpoint: str = URL) -> MemoryCoreBackend:
    credentials = MemoryCoreCredentials(SecretStr(KEY), SecretStr(USER_KEY) if USER_KEY else None)
    return MemoryCoreBackend(target(endpoint), credentials, sdk=load_sdk(), cache_ttl_s=0)


@pytest.fixture
async def backend() -> AsyncIterator[MemoryCoreBackend]:
    b = make()
    try:
        yield b
    finally:
        await b.close()


def session() -> str:
    return f"e2e-{RUN}-{uuid.uuid4().hex[:8]}"


def turn(sid: str, i: int, user: str, assistant: str, base: datetime | None = None) -> ConversationTurn:
    at = (base or datetime(2026, 11, 1, 12, 0, tzinfo=UTC)) + timedelta(seconds=30 * i)
    return ConversationTurn(f"{sid}-t{i}", sid, user, assistant, at)


async def session_rows(b: MemoryCoreBackend, sid: str) -> int:
    data = await b._call("conversation/count", lambda: b._clients.memory.count_conversation(session_id=sid))
    return int(data["total"])


async def poll(what: str, probe: Callable[[], Awaitable[T | None]], wait_s: float) -> T:
    deadline = time.monotonic() + wait_s
    while True:
        value = await probe()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not appear within {wait_s:.0f} s", pytrace=False)
        await asyncio.sleep(0.5)


async def test_the_server_is_reachable_and_the_keys_work(backend: MemoryCoreBackend) -> None:
    status = await backend.status()
    assert status.ok, status.problems  # with a user key, this includes meta/auth/verify
    assert set(status.counts) >= {"turns", "atomic", "scenarios", "profile"}


@pytest.mark.skipif(
    not PROVISIONED, reason="skills need a provisioned team and agent (set the TEAM/AGENT ids)"
)
async def test_skill_search_finds_a_skill_of_this_agent(backend: MemoryCoreBackend) -> None:
    ids = {"team_id": _id("team"), "agent_id": _id("agent"), "user_id": _id("user")}
    skills: Any = load_sdk().skill_client(URL, KEY, SERVICE_ID, **ids, timeout=15, verify=True)
    name = f"e2e-go-constants-{RUN}"
    content = f"---\nname: {name}\ndescription: Replace magic numbers with named Go constants\n---\n# Go\n"
    created = await skills.create(name=name, content=content)
    try:

        async def matching() -> list[SkillHit]:
            found = await backend.search_skills("magic numbers named Go constants", 10)
            return [h for h in found if h.name == name]

        hits = await poll("the new skill in skill/search", matching, 20)
        assert hits[0].id == created["skill_id"]
        assert "<mark>" not in hits[0].snippet
    finally:
        await skills.delete(created["skill_id"], expected_version=created["version"])
        await skills.close()


async def test_added_turns_are_found_by_l0_search(backend: MemoryCoreBackend) -> None:
    sid = session()
    marker = f"zq{RUN}"
    await backend.conversation.add(
        [
            turn(
                sid,
                0,
                f"我负责后端，用 Go，最讨厌魔法数字 {marker}",
                f"记住了：后端用 Go，避免魔法数字 {marker}",
            )
        ]
    )
    assert await session_rows(backend, sid) == 2
    hits = await backend.conversation.search(f"魔法数字 {marker}", 4)
    mine = [h for h in hits if marker in h.user_text or marker in h.assistant_text]
    assert mine, f"L0 search did not find the turn: {hits}"
    assert mine[0].created_at == datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


async def test_l1_is_extracted_and_forget_deletes_l0_and_l1(backend: MemoryCoreBackend) -> None:
    sid = session()
    marker = f"kv{RUN}"
    await backend.conversation.add(
        [turn(sid, 0, f"I always use tabs, never spaces, in project {marker}", "Understood: tabs only.")]
    )

    async def extracted() -> list[str]:
        found = await backend.memories.search(marker, 6)
        return [m.id for m in found if marker in m.content]

    atomic_ids = await poll(
        "an L1 memory (is the server's extraction LLM configured? see deploy/README.md)", extracted, L1_WAIT_S
    )
    hits = [h for h in await backend.conversation.search(marker, 4) if marker in h.user_text]
    assert hits
    l0 = await backend.conversation.delete([h.turn_id for h in hits])
    l1 = await backend.memories.delete(atomic_ids)
    assert (l0.failed, l1.failed) == ((), ())
    assert [h for h in await backend.conversation.search(marker, 4) if marker in h.user_text] == []
    assert [m for m in await backend.memories.search(marker, 6) if m.id in atomic_ids] == []


class DroppingProxy:
    """A loopback HTTP proxy that can forward a request and then lose its response.

    Requests pass through to the server unchanged; while `drop_next` names a path, the next
    request to it reaches the server, and the client sees its connection reset instead of the
    answer: exactly the ambiguous failure the redelivery check exists for.
    """

    def __init__(self, upstream: str) -> None:
        host_port = upstream.split("://", 1)[1].rstrip("/")
        host, _, port = host_port.partition(":")
        self.upstream = (host, int(port or 80))
        self.drop_next: str | None = None
        self.dropped = 0
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> str:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._server.wait_closed(), 2)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                request = await _read_message(reader, request=True)
                if request is None:
                    return
                path = request.split(b" ", 2)[1].decode()
                up_reader, up_writer = await asyncio.open_connection(*self.upstream)
                up_writer.write(request)
                await up_writer.drain()
                response = await _read_message(up_reader, request=False)
                up_writer.close()
                if response is None or (self.drop_next is not None and path == self.drop_next):
                    self.drop_next = None
                    self.dropped += 1
                    sock = writer.get_extra_info("socket")
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    writer.transport.abort()
                    return
                writer.write(response)
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            writer.transport.abort()


async def _read_message(reader: asyncio.StreamReader, *, request: bool) -> bytes | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    length = 0
    chunked = False
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
        if name.strip().lower() == b"transfer-encoding" and b"chunked" in value.lower():
            chunked = True
    if chunked:
        body = b""
        while True:
            size_line = await reader.readuntil(b"\r\n")
            size = int(size_line.strip(), 16)
            chunk = await reader.readexactly(size + 2)
            body += size_line + chunk
            if size == 0:
                break
        return head + body
    return head + (await reader.readexactly(length) if length else b"")


async def test_a_lost_response_redelivery_does_not_duplicate_l0_rows(backend: MemoryCoreBackend) -> None:
    sid = session()
    turns = [turn(sid, i, f"step {i} of the deploy {RUN}", f"done with step {i}") for i in range(3)]
    proxy = DroppingProxy(URL)
    async with proxy as proxied_url:
        through_proxy = make(proxied_url)
        try:
            proxy.drop_next = "/v3/conversation/add"
            with pytest.raises(BackendUnavailable):
                await through_proxy.conversation.add(turns)
        finally:
            await through_proxy.close()
    assert proxy.dropped == 1
    assert await session_rows(backend, sid) == 6  # the server did store them
    # a different backend instance (as after a restart) checks and resends
    assert await backend.conversation.stored_ids([t.turn_id for t in turns]) == set()
    assert await backend.conversation.stored(turns) == {t.turn_id for t in turns}
    await backend.conversation.add(turns)
    await backend.conversation.add(turns)
    assert await session_rows(backend, sid) == 6


async def test_server_limits_hold_for_long_many_and_wide_turns(backend: MemoryCoreBackend) -> None:
    sid = session()
    log = "".join(f"line {i}: build output 😀 {RUN}\n" for i in range(900))  # ~30k UTF-16 units
    many = [turn(sid, i, f"question {i}", f"answer {i}") for i in range(1, 131)]
    wide = [turn(sid, 200 + i, "讨" * 8000, "😀" * 4000) for i in range(20)]  # ~2.9 MB as UTF-8
    turns = [turn(sid, 0, "show me the build log", log), *many, *wide]
    expected = sum(len(turn_messages(t)) for t in turns)
    assert expected > 1 + 1 + 260 + 40  # the log was split into parts
    await backend.conversation.add(turns)
    assert await session_rows(backend, sid) == expected
    await backend.conversation.add(turns)
    assert await session_rows(backend, sid) == expected
