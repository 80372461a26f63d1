"""The same memory over MCP: the SDK's own client in separate processes beside a capturing Pi
session, and Pi 1.6.0's built-in MCP client (`pi mcp list`; `exposure: direct` with the
extension not loaded, the scripted model calling memory_search)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sqlite3
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from bridge import SHIM, SIDECAR, data_dir, stored_turns, use_bridge
from harness import FakeModel, PiEnv, PiInstall, ScriptedDialogs, TextReply, ToolCall, ToolCallsReply, text_of

FACT = "The staging database is called heron-7 and lives in eu-west"
PI_TOOL = "mcp__pi_memory__memory_search"  # `mcp__<server>__<tool>`, `-` made `_` (Pi's docs/mcp.md)


@asynccontextmanager
async def mcp_client(env: PiEnv, agent: str) -> AsyncIterator[ClientSession]:
    """`pi-memory-bridge mcp --agent AGENT` in its own process, on Pi's agent dir and work dir."""
    params = StdioServerParameters(
        command=str(SIDECAR), args=["mcp", "--agent", agent], env=env.environ(), cwd=str(env.work_dir)
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def call(session: ClientSession, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await asyncio.wait_for(session.call_tool(name, arguments), 60)
    data: dict[str, Any] = dict(result.structured_content or {})
    data["_text"] = "".join(getattr(c, "text", "") for c in result.content)
    data["_error"] = bool(result.is_error)
    return data


def _db(env: PiEnv, sql: str, args: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    con = sqlite3.connect(f"file:{data_dir(env) / 'memory.sqlite3'}?mode=ro", uri=True)
    try:
        return con.execute(sql, args).fetchall()
    finally:
        con.close()


def _wait(cond: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:.0f} s: {what}")
        time.sleep(0.1)


@pytest.fixture
def runtime_dir() -> Iterator[Path]:
    # the background sidecar's socket folder (a socket path holds ~100 bytes: tmp_path may be longer)
    path = Path(tempfile.mkdtemp(prefix="pmb-mcp-", dir="/tmp"))
    path.chmod(0o700)
    yield path
    shutil.rmtree(path, ignore_errors=True)


async def test_sdk_clients_share_the_store_with_a_capturing_pi_session(
    pi_env: PiEnv, fake_model: FakeModel, runtime_dir: Path
) -> None:
    # Pi's memory in the shared background sidecar, as users run it, on the same agent dir
    use_bridge(pi_env, config={"learning": {"enabled": False}})
    pi_env.extra_env.update({"PI_MEMORY_BRIDGE_DAEMON": "1", "XDG_RUNTIME_DIR": str(runtime_dir)})
    rpc = pi_env.start_rpc(extensions=[SHIM], dialogs=ScriptedDialogs())
    fake_model.script(TextReply("noted, release train leaves on thursdays", delay_s=3.0))
    # Pi's turn is in flight (the model answers after 3 s) while two MCP processes write and read
    turn = asyncio.create_task(asyncio.to_thread(rpc.prompt_and_settle, "our release train leaves thursdays"))
    async with mcp_client(pi_env, "claude") as claude:
        saved = await call(claude, "memory_remember", {"text": FACT, "kind": "fact"})
        assert saved["created"] is True and not saved["_error"]
    async with mcp_client(pi_env, "codex") as codex:
        found = await call(codex, "memory_search", {"query": "staging database name"})
        assert [r["ref"] for r in found["results"]][:1] == [saved["ref"]]
        assert found["results"][0]["text"] == FACT and found["results"][0]["date"]
        assert found["_text"].startswith('<recalled_memory trust="untrusted"')
        listed = await call(codex, "memory_list", {"kind": "fact"})
        assert listed["items"][0]["savedBy"] == "Claude Code"
    shown = await asyncio.to_thread(
        subprocess.run,
        [str(SIDECAR), "list", "memories"],
        env=pi_env.environ(),
        capture_output=True,
        text=True,
    )
    assert f"[fact {time.strftime('%Y-%m-%d', time.gmtime())} via Claude Code] {FACT}" in shown.stdout
    result = await turn
    assert result.ran
    # Pi captured meanwhile (its delivery runs after the turn settles)
    _wait(lambda: any("release train" in t["user_text"] for t in stored_turns(pi_env)), 30, "Pi's capture")
    assert list((runtime_dir / f"pi-memory-bridge-{os.getuid()}").glob("*.sock"))  # through the daemon
    assert rpc.close() == 0

    # the memory reached the vectors (a sidecar or the MCP server embedded it), then forget
    row_id = _db(pi_env, "SELECT id FROM atomic WHERE memory_id = ?", (saved["id"],))[0][0]
    async with mcp_client(pi_env, "cursor") as cursor:
        _wait(lambda: _db(pi_env, "SELECT 1 FROM atomic_vectors WHERE row_id = ?", (row_id,)), 60, "vector")
        assert _db(pi_env, "SELECT rowid FROM atomic_fts WHERE atomic_fts MATCH 'heron'")
        preview = await call(cursor, "memory_forget_preview", {"query": "heron-7"})
        ids = [c["id"] for c in preview["candidates"]]
        assert f"L1:{saved['id']}" in ids
        gone = await call(cursor, "memory_forget", {"ids": [f"L1:{saved['id']}"]})
        assert not gone["_error"] and gone["_text"].startswith("deleted")
        assert not (await call(cursor, "memory_search", {"query": "heron-7 staging"}))["results"]
    assert not _db(pi_env, "SELECT 1 FROM atomic WHERE memory_id = ?", (saved["id"],))
    assert not _db(pi_env, "SELECT 1 FROM atomic_vectors WHERE row_id = ?", (row_id,))
    assert not _db(pi_env, "SELECT rowid FROM atomic_fts WHERE atomic_fts MATCH 'heron'")

    # a paused project answers "paused" (and stores nothing)
    pause = await asyncio.to_thread(
        subprocess.run,
        [str(SIDECAR), "pause"],
        cwd=pi_env.work_dir,
        env=pi_env.environ(),
        capture_output=True,
        text=True,
    )
    assert pause.returncode == 0, pause.stderr
    async with mcp_client(pi_env, "gemini") as gemini:
        for name, args in (("memory_search", {"query": "release"}), ("memory_remember", {"text": FACT})):
            answer = await call(gemini, name, args)
            assert answer["paused"] is True and "paused" in answer["_text"]
    assert not _db(pi_env, "SELECT 1 FROM atomic")


def _require_pi_mcp(install: PiInstall) -> None:
    if install.version_tuple < (1, 6):
        pytest.skip(f"Pi {install.version} has no built-in MCP client (1.6.0 does)")


def test_pi_builtin_mcp_client_lists_and_calls_memory_search(pi_env: PiEnv, fake_model: FakeModel) -> None:
    _require_pi_mcp(pi_env.install)
    use_bridge(pi_env)
    # session 1, with the extension: the fact is said and captured
    fake_model.script(TextReply("Noted."))
    first = pi_env.run_print([f"remember this: {FACT}"], extensions=[SHIM])
    assert first.returncode == 0, first.stderr
    assert any("heron-7" in t["user_text"] for t in stored_turns(pi_env))

    # the entry as a user gets it: `pi-memory-bridge mcp install pi`
    installed = subprocess.run(
        [str(SIDECAR), "mcp", "install", "pi"], env=pi_env.environ(), capture_output=True, text=True
    )
    assert installed.returncode == 0, installed.stderr
    config = json.loads((pi_env.agent_dir / "mcp.json").read_text(encoding="utf-8"))["mcpServers"][
        "pi-memory"
    ]
    assert config["exposure"] == "direct"

    listed = subprocess.run(
        [str(pi_env.install.node), str(pi_env.install.cli), "mcp", "list"],  # a subcommand: first
        cwd=pi_env.work_dir,
        env=pi_env.environ(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert "pi-memory: connected" in listed.stdout and "memory_search" in listed.stdout

    # session 2, without the extension: the model calls the MCP tool and gets the fact back
    fake_model.script(
        ToolCallsReply((ToolCall(PI_TOOL, {"query": "staging database name"}),)), TextReply("It is heron-7.")
    )
    second = pi_env.run_print(
        ["what is our staging database called?"], timeout=120, env={"PI_MEMORY_BRIDGE_CMD": None}
    )
    assert second.returncode == 0, second.stderr
    asked = fake_model.chat_requests[-2]
    declared = [str(t.get("function", {}).get("name")) for t in asked.body.get("tools", [])]
    assert PI_TOOL in declared and not any(n.startswith("tdai_") for n in declared)  # extension not loaded
    tool_results = [
        text_of(m.get("content")) for m in fake_model.chat_requests[-1].messages if m.get("role") == "tool"
    ]
    assert tool_results and "heron-7" in tool_results[-1] and "untrusted" in tool_results[-1]
    assert "It is heron-7." in second.stdout
