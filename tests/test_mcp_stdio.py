"""`pi-memory-bridge mcp` as a real process on stdio, fed raw lines: every bad request gets a clear
answer (a JSON-RPC error or an error result), the server keeps serving, and nothing is written."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]


class RawClient:
    def __init__(self, agent_dir: Path, cwd: Path) -> None:
        env = {
            **os.environ,
            "PI_CODING_AGENT_DIR": str(agent_dir),
            "HOME": str(agent_dir.parent),
            "PI_MEMORY_BRIDGE_EMBEDDINGS": "off",
        }
        self.stderr = (agent_dir.parent / "mcp-stderr.txt").open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "pi_memory_bridge.cli", "mcp", "--agent", "test"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            env=env,
            cwd=cwd,
        )
        self.next_id = 0

    def send_line(self, line: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + b"\n")
        self.proc.stdin.flush()

    def read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, "the server closed its stdout"
        answer: dict[str, Any] = json.loads(line)
        return answer

    def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self.next_id += 1
        body: dict[str, Any] = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            body["params"] = params
        self.send_line(json.dumps(body).encode())
        answer = self.read()
        assert answer["id"] == self.next_id
        return answer

    def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return self.request("tools/call", {"name": name, "arguments": arguments})

    def close(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        code = self.proc.wait(timeout=30)
        self.stderr.close()
        return code


@pytest.fixture
def client(tmp_path: Path) -> Iterator[RawClient]:
    agent_dir = tmp_path / "home" / ".pi" / "agent"
    agent_dir.mkdir(parents=True)
    work = tmp_path / "work"
    work.mkdir()
    raw = RawClient(agent_dir, work)
    init = raw.request(
        "initialize",
        {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
    )
    assert init["result"]["serverInfo"]["name"] == "pi-memory-bridge"
    raw.send_line(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode())
    yield raw
    if raw.proc.poll() is None:
        raw.proc.kill()
        raw.proc.wait()


def _stored(tmp_path: Path) -> int:
    db = tmp_path / "home" / ".pi" / "agent" / "memory-bridge" / "memory.sqlite3"
    if not db.exists():
        return 0
    con = sqlite3.connect(db)
    try:
        return int(
            con.execute("SELECT (SELECT count(*) FROM atomic) + (SELECT count(*) FROM turns)").fetchone()[0]
        )
    finally:
        con.close()


def test_bad_input_gets_clear_errors_and_the_server_keeps_serving(client: RawClient, tmp_path: Path) -> None:
    unknown = client.call("memory_delete_everything", {})
    assert unknown["error"]["code"] == -32602 and "unknown tool" in unknown["error"]["message"]

    wrong_type = client.call("memory_search", {"query": ["not", "text"], "limit": "ten"})["result"]
    assert wrong_type["isError"] is True
    text = wrong_type["content"][0]["text"]
    assert "query: Input should be a valid string" in text and "limit:" in text

    huge = client.call("memory_remember", {"text": "x" * 10_000_000})["result"]
    assert huge["isError"] is True and "at most 2000 characters" in huge["content"][0]["text"]
    assert len(huge["content"][0]["text"]) < 500  # the input is not echoed back

    client.next_id += 1
    bad_utf8 = (
        b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"memory_remember",'
        b'"arguments":{"text":"caf\xc3 \xff au lait"}}}' % client.next_id
    )
    client.send_line(bad_utf8)
    answer = client.read()
    assert answer["id"] == client.next_id and answer["error"]["code"] == -32700
    assert "not valid UTF-8" in answer["error"]["message"]

    client.next_id += 1
    surrogate = (
        b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"memory_remember",'
        b'"arguments":{"text":"half a smiley \\ud83d here"}}}' % client.next_id
    )
    client.send_line(surrogate)
    answer = client.read()
    assert answer["id"] == client.next_id and answer["error"]["code"] == -32602
    assert "lone UTF-16 surrogate" in answer["error"]["message"]

    client.send_line(b"this is not json")
    assert client.read()["error"]["code"] == -32700

    forget = client.call("memory_forget", {"ids": ["L1:at-000000000000000000000000", "L0:t1"]})["result"]
    assert forget["isError"] is True and "nothing was deleted" in forget["content"][0]["text"]

    # still serving, and a valid pair still works
    tools = client.request("tools/list")["result"]["tools"]
    assert {t["name"] for t in tools} >= {"memory_search", "memory_remember", "memory_forget"}
    assert client.call("memory_list", {})["result"]["isError"] is False  # the store is open (created)
    assert _stored(tmp_path) == 0
    ok = client.call("memory_remember", {"text": "a smiley 😀 is fine"})["result"]
    assert ok["isError"] is False and _stored(tmp_path) == 1
    assert client.close() == 0


async def test_the_project_is_the_clients_first_root(tmp_path: Path) -> None:
    """A client working in a paused repository (its root) is told "paused", though the server was
    started elsewhere; the same server started there without roots is paused too."""
    import mcp_types as types
    from mcp import ClientSession, StdioServerParameters, stdio_client

    from pi_memory_bridge.operations.pause import set_paused
    from pi_memory_bridge.project import project_of as project_key

    agent_dir = tmp_path / "home" / ".pi" / "agent"
    agent_dir.mkdir(parents=True)
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "pkg").mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert set_paused(agent_dir, project_key(repo), True).ok

    async def roots(_context: object) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri=(repo / "pkg").as_uri(), name="pkg")])

    env = {"PI_CODING_AGENT_DIR": str(agent_dir), "PI_MEMORY_BRIDGE_EMBEDDINGS": "off"}

    async def paused(cwd: Path, with_roots: bool) -> bool:
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "pi_memory_bridge.cli", "mcp"], env=env, cwd=str(cwd)
        )
        callback = roots if with_roots else None
        async with (
            stdio_client(params) as (read, write),
            ClientSession(
                read,
                write,
                list_roots_callback=callback,  # type: ignore[arg-type]
            ) as session,
        ):
            await session.initialize()
            result = await session.call_tool("memory_search", {"query": "anything"})
            return bool((result.structured_content or {}).get("paused"))

    assert await paused(elsewhere, with_roots=True)
    assert await paused(repo / "pkg", with_roots=False)
    assert not await paused(elsewhere, with_roots=False)


async def test_forget_asks_the_user_through_a_client_that_can_ask(tmp_path: Path) -> None:
    """With elicitation the client's user confirms the delete: declined, nothing goes; accepted,
    exactly the chosen item goes, and the question listed it."""
    import mcp_types as types
    from mcp import ClientSession, StdioServerParameters, stdio_client

    agent_dir = tmp_path / "home" / ".pi" / "agent"
    agent_dir.mkdir(parents=True)
    answers = [False, True]
    asked: list[str] = []

    async def elicit(_context: object, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(getattr(params, "message", ""))
        return types.ElicitResult(action="accept", content={"delete": answers.pop(0)})

    env = {"PI_CODING_AGENT_DIR": str(agent_dir), "PI_MEMORY_BRIDGE_EMBEDDINGS": "off"}
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "pi_memory_bridge.cli", "mcp"], env=env
    )
    async with (
        stdio_client(params) as (read, write),
        ClientSession(
            read,
            write,
            elicitation_callback=elicit,  # type: ignore[arg-type]
        ) as session,
    ):
        await session.initialize()
        await session.call_tool("memory_remember", {"text": "the office plant is called Gerald"})
        await session.call_tool("memory_remember", {"text": "the office cat is called Tom"})
        preview = await session.call_tool("memory_forget_preview", {"query": "Gerald plant"})
        ids = [c["id"] for c in (preview.structured_content or {})["candidates"]]
        assert len(ids) == 1
        declined = await session.call_tool("memory_forget", {"ids": ids})
        assert "nothing was deleted" in declined.content[0].text  # type: ignore[union-attr]
        assert _stored(tmp_path) == 2
        accepted = await session.call_tool("memory_forget", {"ids": ids})
        assert accepted.is_error is False and _stored(tmp_path) == 1
    assert len(asked) == 2 and "Gerald" in asked[0] and "Tom" not in asked[0]
