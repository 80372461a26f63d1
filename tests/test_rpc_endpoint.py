"""The endpoint answers every kind of bad input with the right JSON-RPC error and keeps serving."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

from pi_memory_bridge.rpc import RpcEndpoint


class EchoParams(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")
    text: str
    times: int = 1


class ChunkReader:
    def __init__(self, chunks: list[bytes]) -> None:
        self._chunks = list(chunks)

    async def read(self, n: int) -> bytes:
        await asyncio.sleep(0)
        return self._chunks.pop(0) if self._chunks else b""


class Collector:
    def __init__(self) -> None:
        self.data = bytearray()

    def write(self, data: bytes) -> None:
        self.data += data

    async def drain(self) -> None:
        return None

    def messages(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.data.decode().splitlines()]


def make_endpoint(max_line: int = 10_000) -> RpcEndpoint:
    rpc = RpcEndpoint(max_line_bytes=max_line)

    @rpc.route("init", EchoParams, before_init=True)
    async def init(p: EchoParams) -> dict[str, Any]:
        rpc.initialized = True
        return {"ok": True}

    @rpc.route("echo", EchoParams)
    async def echo(p: EchoParams) -> dict[str, Any]:
        return {"text": p.text * p.times}

    @rpc.route("boom", EchoParams)
    async def boom(p: EchoParams) -> dict[str, Any]:
        raise RuntimeError("kaboom")

    return rpc


async def run(lines: list[bytes], max_line: int = 10_000) -> list[dict[str, Any]]:
    out = Collector()
    await make_endpoint(max_line).serve(ChunkReader(lines), out)
    return out.messages()


def req(id_: Any, method: str, params: Any = None) -> bytes:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": id_, "method": method}
    if params is not None:
        msg["params"] = params
    return json.dumps(msg).encode() + b"\n"


def by_id(messages: list[dict[str, Any]]) -> dict[Any, dict[str, Any]]:
    return {m.get("id"): m for m in messages}


async def test_method_before_initialize_is_refused_then_served() -> None:
    msgs = by_id(
        await run(
            [req(1, "echo", {"text": "a"}), req(2, "init", {"text": "x"}), req(3, "echo", {"text": "b"})]
        )
    )
    assert msgs[1]["error"]["code"] == -32002
    assert msgs[3]["result"] == {"text": "b"}


@pytest.mark.parametrize(
    ("line", "code"),
    [
        (b"{not json\n", -32700),
        (b"[1,2]\n", -32600),
        (b'{"jsonrpc":"1.0","id":9,"method":"echo"}\n', -32600),
        (b'{"jsonrpc":"2.0","id":9}\n', -32600),
        (b'{"jsonrpc":"2.0","id":9,"method":"echo","params":[1]}\n', -32600),
        (b'{"jsonrpc":"2.0","id":9,"method":"nope","params":{}}\n', -32601),
        (b'{"jsonrpc":"2.0","id":9,"method":"echo","params":{"text":5}}\n', -32602),
        (b'{"jsonrpc":"2.0","id":9,"method":"echo","params":{"text":"a","times":"2"}}\n', -32602),
        (b'{"jsonrpc":"2.0","id":9,"method":"echo","params":{"text":"a","extra":1}}\n', -32602),
        (b'{"jsonrpc":"2.0","id":9,"method":"boom","params":{"text":"a"}}\n', -32603),
    ],
)
async def test_bad_input_gets_the_right_error_and_the_next_request_is_answered(
    line: bytes, code: int
) -> None:
    msgs = await run([req(0, "init", {"text": "x"}), line, req(10, "echo", {"text": "ok"})])
    errors = [m for m in msgs if "error" in m]
    assert [e["error"]["code"] for e in errors] == [code]
    assert by_id(msgs)[10]["result"] == {"text": "ok"}


async def test_invalid_params_name_the_field() -> None:
    msgs = by_id(await run([req(0, "init", {"text": "x"}), req(5, "echo", {"text": 5})]))
    err = msgs[5]["error"]
    assert "text" in err["message"]
    assert err["data"][0]["field"] == "text"


async def test_oversized_line_is_an_error_and_the_stream_recovers() -> None:
    huge = req(7, "echo", {"text": "z" * 5000})
    msgs = await run([req(0, "init", {"text": "x"}), huge, req(8, "echo", {"text": "after"})], max_line=1000)
    assert any(m.get("error", {}).get("code") == -32600 and "exceeds" in m["error"]["message"] for m in msgs)
    assert by_id(msgs)[8]["result"] == {"text": "after"}


async def test_notifications_get_no_response_even_when_they_fail() -> None:
    note = json.dumps({"jsonrpc": "2.0", "method": "echo", "params": {"text": 1}}).encode() + b"\n"
    msgs = await run([req(0, "init", {"text": "x"}), note, req(1, "echo", {"text": "y"})])
    assert [m.get("id") for m in msgs] == [0, 1]


async def test_output_is_one_ascii_line_per_message_even_with_line_separators() -> None:
    out = Collector()
    await make_endpoint().serve(
        ChunkReader([req(0, "init", {"text": "x"}), req(1, "echo", {"text": "a\u2028b\nc"})]), out
    )
    lines = out.data.split(b"\n")
    assert lines[-1] == b"" and len(lines) == 3
    assert all(line.isascii() for line in lines)
    assert json.loads(lines[1])["result"]["text"] == "a\u2028b\nc"


async def test_requests_are_served_concurrently() -> None:
    rpc = RpcEndpoint()
    order: list[str] = []
    fast_done = asyncio.Event()

    @rpc.route("slow", EchoParams, before_init=True)
    async def slow(p: EchoParams) -> str:
        # served one at a time, the first request would wait here for ever (the guard fails it)
        await asyncio.wait_for(fast_done.wait(), timeout=10)
        order.append("slow")
        return "slow"

    @rpc.route("fast", EchoParams, before_init=True)
    async def fast(p: EchoParams) -> str:
        order.append("fast")
        fast_done.set()
        return "fast"

    out = Collector()
    await rpc.serve(ChunkReader([req(1, "slow", {"text": ""}), req(2, "fast", {"text": ""})]), out)
    assert order == ["fast", "slow"]
    assert {m["id"] for m in out.messages()} == {1, 2}


class QueueReader:
    """Bytes arrive when the test puts them (the peer answering our requests)."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[bytes] = asyncio.Queue()

    async def read(self, n: int) -> bytes:
        return await self.queue.get()


async def test_requests_to_the_peer_get_their_answers_by_string_id() -> None:
    from pi_memory_bridge.rpc import PeerError, PeerGone

    rpc = make_endpoint()
    reader, out = QueueReader(), Collector()
    serving = asyncio.create_task(rpc.serve(reader, out))
    await asyncio.sleep(0)
    first = asyncio.create_task(rpc.request("model/complete", EchoParams(text="a"), 5))
    second = asyncio.create_task(rpc.request("model/complete", EchoParams(text="b"), 5))
    await asyncio.sleep(0.01)
    sent = out.messages()
    assert [m["method"] for m in sent] == ["model/complete", "model/complete"]
    assert all(isinstance(m["id"], str) for m in sent) and sent[0]["params"] == {"text": "a", "times": 1}
    answers = [
        {"jsonrpc": "2.0", "id": sent[1]["id"], "error": {"code": -32011, "message": "no auth"}},
        {"jsonrpc": "2.0", "id": sent[0]["id"], "result": {"text": "done"}},
        {"jsonrpc": "2.0", "id": "s999", "result": 1},  # nobody waits: dropped
    ]
    reader.queue.put_nowait(b"".join(json.dumps(a).encode() + b"\n" for a in answers))
    assert await first == {"text": "done"}
    with pytest.raises(PeerError) as err:
        await second
    assert err.value.code == -32011
    with pytest.raises(TimeoutError):
        await rpc.request("model/complete", EchoParams(text="c"), 0.05)
    pending = asyncio.create_task(rpc.request("model/complete", EchoParams(text="d"), 5))
    await asyncio.sleep(0.01)
    reader.queue.put_nowait(b"")  # EOF: whoever still waits is told at once
    with pytest.raises(PeerGone):
        await pending
    await serving
    with pytest.raises(PeerGone):
        await rpc.request("model/complete", EchoParams(text="e"), 5)


async def test_drain_others_waits_for_the_rest_but_not_for_itself() -> None:
    rpc = RpcEndpoint()
    release = asyncio.Event()

    async def slow() -> None:
        await release.wait()

    task = asyncio.create_task(slow())
    rpc._tasks.add(task)  # a request still in flight
    assert await rpc.drain_others(0.05) is False  # it did not finish: no drain is claimed
    release.set()
    assert await rpc.drain_others(1.0) is True
    rpc._tasks.discard(task)
    me = asyncio.current_task()
    assert me is not None
    rpc._tasks.add(me)  # the caller's own request is not waited for
    assert await rpc.drain_others(0.05) is True
