"""JSON-RPC 2.0 endpoint over a byte stream: envelope checks, dispatch, notifications.

The domain never sees JSON: handlers are registered with a pydantic params model and return a
pydantic model (or a JSON-able value). Every failure becomes the matching `JsonRpcError` on the
wire and the endpoint keeps serving.

The endpoint can also ask the peer (`request`): its ids are strings ("s1", "s2", ...) so they can
never be mistaken for the ids of the peer's own requests, and the answers are matched back to
the waiting caller; an answer after the caller's timeout is dropped.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, StrictInt, StrictStr, ValidationError

from pi_memory_bridge import surrogates
from pi_memory_bridge.rpc.errors import (
    InternalError,
    InvalidParams,
    InvalidRequest,
    JsonRpcError,
    MethodNotFound,
    ParseError,
    ServerNotInitialized,
)
from pi_memory_bridge.rpc.framing import DEFAULT_MAX_LINE_BYTES, Line, LineFramer

log = logging.getLogger(__name__)

RequestId = StrictInt | StrictStr


class _Envelope(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")
    jsonrpc: StrictStr
    method: StrictStr
    id: RequestId | None = None
    params: dict[str, Any] | None = None


class PeerError(Exception):
    """The peer answered one of our requests with a JSON-RPC error."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


class PeerGone(Exception):
    """The stream closed (or was never open) before the peer answered."""


class ByteReader(Protocol):
    async def read(self, n: int) -> bytes: ...


class ByteWriter(Protocol):
    def write(self, data: bytes) -> None: ...

    async def drain(self) -> None: ...


Handler = Callable[[Any], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class _Route:
    params_model: type[BaseModel]
    handler: Handler
    before_init: bool


def _format_validation_error(exc: ValidationError) -> tuple[str, list[dict[str, Any]]]:
    fields: list[dict[str, Any]] = []
    parts: list[str] = []
    for err in exc.errors(include_url=False, include_input=False):
        loc = ".".join(str(p) for p in err["loc"]) or "(params)"
        fields.append({"field": loc, "message": err["msg"], "type": err["type"]})
        parts.append(f"{loc}: {err['msg']}")
    return "; ".join(parts), fields


class RpcEndpoint:
    def __init__(self, *, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> None:
        self._routes: dict[str, _Route] = {}
        self._max_line = max_line_bytes
        self._writer: ByteWriter | None = None
        self._write_lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()
        self._ids = itertools.count(1)
        self._waiting: dict[str, asyncio.Future[Any]] = {}
        self._closed = False
        self.initialized = False

    def route(
        self, method: str, params_model: type[BaseModel], *, before_init: bool = False
    ) -> Callable[[Handler], Handler]:
        def register(handler: Handler) -> Handler:
            self._routes[method] = _Route(params_model, handler, before_init)
            return handler

        return register

    async def notify(self, method: str, params: BaseModel | dict[str, Any]) -> None:
        """Send a notification to the peer (no response expected)."""
        payload = params.model_dump(mode="json", by_alias=True) if isinstance(params, BaseModel) else params
        await self._send({"jsonrpc": "2.0", "method": method, "params": payload})

    async def request(self, method: str, params: BaseModel, timeout_s: float) -> Any:
        """Ask the peer; its `result` (JSON), or PeerError, PeerGone, or TimeoutError."""
        if self._writer is None or self._closed:
            raise PeerGone("not connected to the peer")
        req_id = f"s{next(self._ids)}"
        answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[req_id] = answer
        try:
            payload = params.model_dump(mode="json", by_alias=True)
            await self._send({"jsonrpc": "2.0", "id": req_id, "method": method, "params": payload})
            return await asyncio.wait_for(answer, timeout_s)
        finally:
            self._waiting.pop(req_id, None)

    def _answered(self, raw: dict[str, Any]) -> None:
        req_id = raw.get("id")
        answer = self._waiting.get(req_id) if isinstance(req_id, str) else None
        if answer is None or answer.done():
            log.warning("ignoring an answer to no request of ours (id %r)", req_id)
            return
        error = raw.get("error")
        if isinstance(error, dict):
            code = error.get("code")
            answer.set_exception(
                PeerError(
                    code if isinstance(code, int) else -32603,
                    str(error.get("message") or "error"),
                    error.get("data"),
                )
            )
        else:
            answer.set_result(raw.get("result"))

    def _fail_waiting(self) -> None:
        self._closed = True
        for answer in self._waiting.values():
            if not answer.done():
                answer.set_exception(PeerGone("the peer closed the stream"))

    async def serve(self, reader: ByteReader, writer: ByteWriter) -> None:
        """Serve until EOF; requests in flight at EOF are finished before returning."""
        self._writer = writer
        framer = LineFramer(self._max_line)
        while True:
            chunk = await reader.read(65536)
            frames = list(framer.feed(chunk)) if chunk else list(framer.finish())
            for frame in frames:
                if isinstance(frame, Line):
                    self._dispatch_line(frame.data)
                else:
                    await self._send_error(
                        None,
                        InvalidRequest(f"line of {frame.size} bytes exceeds the {self._max_line}-byte cap"),
                    )
            if not chunk:
                break
        self._fail_waiting()
        await self.drain_tasks()

    async def drain_tasks(self) -> None:
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def drain_others(self, timeout_s: float) -> bool:
        """Wait up to `timeout_s` for every request in flight but the caller's own; whether all
        of them finished."""
        others = self._tasks - {asyncio.current_task()}
        if not others:
            return True
        _done, pending = await asyncio.wait(others, timeout=timeout_s)
        return not pending

    def _dispatch_line(self, data: bytes) -> None:
        task = asyncio.create_task(self._handle_line(data))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _handle_line(self, data: bytes) -> None:
        try:
            # lone UTF-16 surrogates (half an emoji from a JS slice) become U+FFFD here, once
            raw = surrogates.loads(data)
        except (ValueError, UnicodeDecodeError) as exc:
            await self._send_error(None, ParseError(f"line is not valid JSON: {exc}"))
            return
        if not isinstance(raw, dict):
            await self._send_error(None, InvalidRequest("a request must be a JSON object"))
            return
        raw_id = raw.get("id")
        reply_id = raw_id if isinstance(raw_id, int | str) and not isinstance(raw_id, bool) else None
        if ("result" in raw or "error" in raw) and "method" not in raw:
            self._answered(raw)
            return
        try:
            env = _Envelope.model_validate(raw)
        except ValidationError as exc:
            message, fields = _format_validation_error(exc)
            await self._send_error(reply_id, InvalidRequest(f"not a JSON-RPC 2.0 request: {message}", fields))
            return
        if env.jsonrpc != "2.0":
            await self._send_error(reply_id, InvalidRequest('jsonrpc must be "2.0"'))
            return
        is_notification = "id" not in raw
        try:
            result = await self._call(env)
        except JsonRpcError as exc:
            if not is_notification:
                await self._send_error(env.id, exc)
            return
        except Exception as exc:  # a handler bug must not take the sidecar down
            log.exception("handler for %s raised", env.method)
            if not is_notification:
                await self._send_error(
                    env.id, InternalError(f"{env.method} failed: {type(exc).__name__}: {exc}")
                )
            return
        if not is_notification:
            if isinstance(result, BaseModel):
                result = result.model_dump(mode="json", by_alias=True)
            await self._send({"jsonrpc": "2.0", "id": env.id, "result": result})

    async def _call(self, env: _Envelope) -> Any:
        route = self._routes.get(env.method)
        if route is None:
            raise MethodNotFound(f"unknown method {env.method!r}")
        if not route.before_init and not self.initialized:
            raise ServerNotInitialized(f"{env.method} called before initialize")
        try:
            params = route.params_model.model_validate(env.params or {})
        except ValidationError as exc:
            message, fields = _format_validation_error(exc)
            raise InvalidParams(f"invalid params for {env.method}: {message}", fields) from None
        return await route.handler(params)

    async def _send_error(self, req_id: int | str | None, err: JsonRpcError) -> None:
        await self._send({"jsonrpc": "2.0", "id": req_id, "error": err.to_wire()})

    async def _send(self, message: dict[str, Any]) -> None:
        if self._writer is None:
            return
        # ensure_ascii keeps U+2028/U+2029 escaped, so a naive line splitter on the other side stays safe
        line = json.dumps(message, ensure_ascii=True, separators=(",", ":")).encode() + b"\n"
        async with self._write_lock:
            try:
                self._writer.write(line)
                await self._writer.drain()
            except (ConnectionError, BrokenPipeError):
                log.warning("peer closed the stream; dropping a %d-byte message", len(line))
