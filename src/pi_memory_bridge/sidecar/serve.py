"""`pi-memory-bridge serve`: the sidecar the Pi extension spawns (protocol in `protocol`).

The handshake is answered from the configuration alone (`handshake`); the memory engine
(`engine.core.Engine`: store, outbox, recall, capture) is imported and opened right after, in the
background, and every other method waits for it within its caller's deadline.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
import signal
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pi_memory_bridge.config import data_dir, default_agent_dir
from pi_memory_bridge.footer import FooterState
from pi_memory_bridge.rpc import InternalError, RpcEndpoint, open_stdio
from pi_memory_bridge.rpc.framing import DEFAULT_MAX_LINE_BYTES
from pi_memory_bridge.sidecar.handshake import Handshake, handshake
from pi_memory_bridge.sidecar.logs import setup_logging
from pi_memory_bridge.sidecar.protocol import (
    CommandAnswerParams,
    CommandRunParams,
    CommandStep,
    Footer,
    InitializeParams,
    InitializeResult,
    RecallParams,
    RecallResult,
    SessionParams,
    SessionResult,
    ShutdownParams,
    ShutdownResult,
    StatusChanged,
    StatusParams,
    ToolCallParams,
    ToolCallResult,
    TurnSettledParams,
    TurnSettledResult,
)

if TYPE_CHECKING:
    from pi_memory_bridge.engine.core import Engine
    from pi_memory_bridge.engine.notifier import Notify

log = logging.getLogger(__name__)
SHUTDOWN_ANSWER_DRAIN_S = 0.8  # the shim waits 1 s for the answer to `shutdown`


class LazyEngine:
    """The memory engine behind the endpoint, imported and opened after the handshake."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = env
        self.notify: Notify | None = None
        self.log_file: Path | None = None
        self._task: asyncio.Task[Engine] | None = None

    def start(self, hs: Handshake) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._start(hs))

    async def _start(self, hs: Handshake) -> Engine:
        # importing the engine costs ~100 ms: do it off the event loop, after the handshake reply
        module = await asyncio.to_thread(importlib.import_module, "pi_memory_bridge.engine.core")
        engine: Engine = await module.Engine.open(
            hs.loaded, hs.agent_dir, hs.cwd, env=self.env, notify=self.notify, log_file=self.log_file
        )
        if self.notify is not None:
            await self.notify(engine.footer())
        return engine

    async def get(self) -> Engine:
        if self._task is None:
            raise InternalError("the engine was not started (initialize first)")
        return await asyncio.shield(self._task)

    async def stop(self) -> None:
        if self._task is not None and self._task.done() and not self._task.exception():
            await self._task.result().shutdown()


def build_endpoint(
    engine: LazyEngine, stop: asyncio.Event, *, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
) -> RpcEndpoint:
    rpc = RpcEndpoint(max_line_bytes=max_line_bytes)

    async def notify_status(state: FooterState) -> None:
        await rpc.notify("status/changed", StatusChanged(footer=Footer.of(state)))

    engine.notify = notify_status

    @rpc.route("initialize", InitializeParams, before_init=True)
    async def initialize(p: InitializeParams) -> InitializeResult:
        hs = handshake(p, engine.env)
        rpc.initialized = True
        engine.start(hs)
        return hs.result

    @rpc.route("session/start", SessionParams)
    async def session_start(p: SessionParams) -> SessionResult:
        return await (await engine.get()).session_changed(p)

    @rpc.route("session/tree", SessionParams)
    async def session_tree(p: SessionParams) -> SessionResult:
        return await (await engine.get()).session_changed(p)

    @rpc.route("recall", RecallParams)
    async def recall(p: RecallParams) -> RecallResult:
        return await (await engine.get()).recall(p)

    @rpc.route("turn/settled", TurnSettledParams)
    async def turn_settled(p: TurnSettledParams) -> TurnSettledResult:
        return await (await engine.get()).turn_settled(p)

    @rpc.route("tool/call", ToolCallParams)
    async def tool_call(p: ToolCallParams) -> ToolCallResult:
        return await (await engine.get()).tool_call(p)

    @rpc.route("command/run", CommandRunParams)
    async def command_run(p: CommandRunParams) -> CommandStep:
        return await (await engine.get()).command_run(p)

    @rpc.route("command/answer", CommandAnswerParams)
    async def command_answer(p: CommandAnswerParams) -> CommandStep:
        return await (await engine.get()).command_answer(p)

    @rpc.route("status", StatusParams)
    async def status(_p: StatusParams) -> dict[str, Any]:
        return (await (await engine.get()).status_report()).to_dict()

    @rpc.route("shutdown", ShutdownParams, before_init=True)
    async def shutdown(_p: ShutdownParams) -> ShutdownResult:
        # the answer says whether the requests in flight finished; it claims no drain it did not wait for
        drained = await rpc.drain_others(SHUTDOWN_ANSWER_DRAIN_S)
        stop.set()
        return ShutdownResult(drained=drained)

    return rpc


async def serve_stdio() -> int:
    env = dict(os.environ)
    engine = LazyEngine(env)
    engine.log_file = setup_logging(
        data_dir(default_agent_dir(env)) / "logs", env.get("PI_MEMORY_BRIDGE_LOG_LEVEL", "info")
    )
    stop = asyncio.Event()
    rpc = build_endpoint(engine, stop)
    reader, writer = await open_stdio()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    serving = asyncio.create_task(rpc.serve(reader, writer))
    stopping = asyncio.create_task(stop.wait())
    await asyncio.wait({serving, stopping}, return_when=asyncio.FIRST_COMPLETED)
    if not serving.done():
        # `shutdown` or a signal: finish what is in flight (bounded), then leave
        try:
            await asyncio.wait_for(rpc.drain_tasks(), timeout=2.0)
        except TimeoutError:
            log.warning("exiting with requests still in flight")
        serving.cancel()
    stopping.cancel()
    await engine.stop()
    log.info("sidecar exiting")
    return 0


def run() -> int:
    return asyncio.run(serve_stdio())
