"""The stdio transport: one JSON-RPC message per line, as the SDK's own, plus clear errors.

The SDK's `stdio_server` drops a line it cannot parse without answering, so a client whose
request held invalid UTF-8 or a lone UTF-16 surrogate (`"\\ud800"`, which strict JSON parsers
refuse) waits for its timeout. Here such a request is answered at once with a JSON-RPC error
naming the problem (its id read leniently), and the line goes no further: nothing of it can be
stored. Like the SDK's transport, fd 0 and 1 are moved aside while serving, so a stray print or a
child process cannot write into (or read from) the protocol.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator
from typing import Any, BinaryIO

import anyio
import anyio.to_thread
import mcp_types as types
from mcp.shared._context_streams import create_context_streams  # pinned SDK (==2.3.0)
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from pi_memory_bridge.surrogates import may_hold_surrogates

Streams = tuple[Any, Any]


def _error_line(request_id: object, code: int, message: str) -> bytes:
    valid_id = request_id if isinstance(request_id, str | int) and not isinstance(request_id, bool) else None
    body = {"jsonrpc": "2.0", "id": valid_id, "error": {"code": code, "message": message}}
    return json.dumps(body, ensure_ascii=True).encode() + b"\n"


def _lenient_id(text: str) -> object:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value.get("id") if isinstance(value, dict) else None


def refusal(line: bytes) -> bytes | None:
    """The error line answering `line` if it must not reach the server, else None."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        where = f"byte {exc.start}"
        request_id = _lenient_id(line.decode("utf-8", "replace"))
        return _error_line(
            request_id, types.PARSE_ERROR, f"the message is not valid UTF-8 ({where}); nothing was done"
        )
    if may_hold_surrogates(line):
        try:
            value = json.loads(text)
        except ValueError:
            return None  # not JSON at all: the SDK's parse error path
        if _has_lone_surrogate(value):
            return _error_line(
                value.get("id") if isinstance(value, dict) else None,
                types.INVALID_PARAMS,
                "the message holds a lone UTF-16 surrogate (half of a character), not text; nothing was done",
            )
    return None


def _has_lone_surrogate(value: object) -> bool:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(value, dict):
        return any(_has_lone_surrogate(k) or _has_lone_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_lone_surrogate(v) for v in value)
    return False


def _write_line(out: BinaryIO, data: bytes) -> None:
    out.write(data)
    out.flush()


def _claim(fd: int, flags: int) -> tuple[BinaryIO, int]:
    """A private duplicate of `fd` for the protocol; `fd` itself then points elsewhere."""
    private = os.dup(fd)
    os.set_inheritable(private, False)
    diversion = os.open(os.devnull, flags) if fd == 0 else os.dup(2)
    os.dup2(diversion, fd)
    os.close(diversion)
    # buffered both ways: an unbuffered readline takes a system call per byte, and an unbuffered
    # write to a pipe may write part of a line; `put` flushes each line
    return os.fdopen(private, "rb" if fd == 0 else "wb"), private


@contextlib.asynccontextmanager
async def stdio_transport() -> AsyncIterator[Streams]:
    sys.stdout.flush()
    wire_in, saved_in = _claim(0, os.O_RDONLY)
    wire_out, saved_out = _claim(1, os.O_WRONLY)
    write_lock = anyio.Lock()
    read_writer, read_stream = create_context_streams[SessionMessage | Exception](0)
    write_stream, write_reader = create_context_streams[SessionMessage](0)

    async def put(data: bytes) -> None:
        async with write_lock:
            await anyio.to_thread.run_sync(_write_line, wire_out, data)

    async def reader() -> None:
        async with read_writer:
            while True:
                line = await anyio.to_thread.run_sync(wire_in.readline, abandon_on_cancel=True)
                if not line:
                    return
                if not line.strip():
                    continue
                refused = refusal(line)
                if refused is not None:
                    await put(refused)
                    continue
                try:
                    message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                except ValidationError as exc:
                    await put(_error_line(_lenient_id(line.decode()), types.PARSE_ERROR, _parse_problem(exc)))
                    continue
                await read_writer.send(SessionMessage(message))

    async def writer() -> None:
        async with write_reader:
            async for session_message in write_reader:
                data = session_message.message.model_dump_json(by_alias=True, exclude_unset=True)
                await put(data.encode() + b"\n")

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(reader)
            tg.start_soon(writer)
            yield read_stream, write_stream
            tg.cancel_scope.cancel()
    finally:
        with contextlib.suppress(OSError):
            os.dup2(saved_in, 0)
            os.dup2(saved_out, 1)


def _parse_problem(exc: ValidationError) -> str:
    first = exc.errors()[0] if exc.errors() else {"msg": "invalid"}
    return f"not a JSON-RPC 2.0 message: {str(first.get('msg', 'invalid'))[:200]}"
