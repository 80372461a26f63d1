"""`pi-memory-bridge serve`: the sidecar the Pi extension spawns (protocol in `protocol`)."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from typing import Any

from pi_memory_bridge.app import Sidecar
from pi_memory_bridge.config import data_dir, default_agent_dir
from pi_memory_bridge.logs import setup_logging
from pi_memory_bridge.protocol import (
    CommandAnswerParams,
    CommandRunParams,
    CommandStep,
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
from pi_memory_bridge.rpc import RpcEndpoint, open_stdio
from pi_memory_bridge.rpc.framing import DEFAULT_MAX_LINE_BYTES

log = logging.getLogger(__name__)


def build_endpoint(
    sidecar: Sidecar, stop: asyncio.Event, *, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
) -> RpcEndpoint:
    rpc = RpcEndpoint(max_line_bytes=max_line_bytes)

    async def notify_status(text: str) -> None:
        await rpc.notify("status/changed", StatusChanged(text=text))

    sidecar.set_notify(notify_status)

    @rpc.route("initialize", InitializeParams, before_init=True)
    async def initialize(p: InitializeParams) -> InitializeResult:
        result = await sidecar.initialize(p)
        rpc.initialized = True
        return result

    @rpc.route("session/start", SessionParams)
    async def session_start(p: SessionParams) -> SessionResult:
        return await sidecar.session_changed(p)

    @rpc.route("session/tree", SessionParams)
    async def session_tree(p: SessionParams) -> SessionResult:
        return await sidecar.session_changed(p)

    @rpc.route("recall", RecallParams)
    async def recall(p: RecallParams) -> RecallResult:
        return await sidecar.recall(p)

    @rpc.route("turn/settled", TurnSettledParams)
    async def turn_settled(p: TurnSettledParams) -> TurnSettledResult:
        return await sidecar.turn_settled(p)

    @rpc.route("tool/call", ToolCallParams)
    async def tool_call(p: ToolCallParams) -> ToolCallResult:
        return await sidecar.tool_call(p)

    @rpc.route("command/run", CommandRunParams)
    async def command_run(p: CommandRunParams) -> CommandStep:
        return await sidecar.command_run(p)

    @rpc.route("command/answer", CommandAnswerParams)
    async def command_answer(p: CommandAnswerParams) -> CommandStep:
        return await sidecar.command_answer(p)

    @rpc.route("status", StatusParams)
    async def status(_p: StatusParams) -> dict[str, Any]:
        return (await sidecar.status_report()).to_dict()

    @rpc.route("shutdown", ShutdownParams, before_init=True)
    async def shutdown(_p: ShutdownParams) -> ShutdownResult:
        stop.set()
        return ShutdownResult(drained=True)

    return rpc


async def serve_stdio() -> int:
    env = dict(os.environ)
    log_dir = data_dir(default_agent_dir(env)) / "logs"
    sidecar = Sidecar(env=env)
    sidecar.log_file = setup_logging(log_dir, env.get("PI_MEMORY_BRIDGE_LOG_LEVEL", "info"))
    stop = asyncio.Event()
    rpc = build_endpoint(sidecar, stop)
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
    await sidecar.shutdown()
    log.info("sidecar exiting")
    return 0


def run() -> int:
    return asyncio.run(serve_stdio())
