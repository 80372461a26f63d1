"""`pi-memory-bridge serve`: the sidecar the Pi extension spawns (protocol in `pi_memory_bridge.wire`).

The handshake is answered from the configuration alone (`handshake`); the memory engine
(`engine.core.Engine`: store, outbox, recall, capture) is imported and opened right after, in the
background, and every other method waits for it within its caller's deadline.

Exit is the sidecar's own business: Pi never waits for it. On stdin EOF (or `shutdown`, or a
signal) requests in flight finish, the engine closes, and a watchdog ends the process after
`EXIT_WATCHDOG_S` whatever still hangs, so no sidecar outlives its Pi for long.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import importlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pi_memory_bridge.config import data_dir, default_agent_dir
from pi_memory_bridge.embeddings.loader import start_early
from pi_memory_bridge.footer import FooterState
from pi_memory_bridge.rpc import InternalError, InvalidRequest, RpcEndpoint, open_stdio
from pi_memory_bridge.rpc.framing import DEFAULT_MAX_LINE_BYTES
from pi_memory_bridge.rpc.server import ByteReader
from pi_memory_bridge.sidecar.handshake import Handshake, handshake
from pi_memory_bridge.sidecar.logs import setup_logging
from pi_memory_bridge.sidecar.quick_start import Prelude, agent_dir_of, canonical, store_answer
from pi_memory_bridge.wire import (
    CommandAnswerParams,
    CommandRunParams,
    CommandStep,
    Footer,
    InitializeParams,
    InitializeResult,
    LearningTriggerParams,
    LearningTriggerResult,
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
    from pi_memory_bridge.engine.learning import Peer
    from pi_memory_bridge.engine.notifier import Notify

log = logging.getLogger(__name__)
EXIT_WATCHDOG_S = 5.0
SHUTDOWN_ANSWER_DRAIN_S = 0.8  # the shim waits 1 s for the answer to `shutdown`


class _EofWatch:
    """A reader that calls `on_eof` when its stream ends (before the endpoint finishes up)."""

    def __init__(self, reader: ByteReader, on_eof: Callable[[], None]) -> None:
        self._reader = reader
        self._on_eof = on_eof

    async def read(self, n: int) -> bytes:
        chunk = await self._reader.read(n)
        if not chunk:
            self._on_eof()
        return chunk


class ExitWatchdog:
    """Once armed, ends the process after `seconds` even if the loop is stuck (a daemon thread)."""

    def __init__(self, seconds: float) -> None:
        self._seconds = seconds
        self._timer: threading.Timer | None = None

    def arm(self) -> None:
        if self._timer is None:
            self._timer = threading.Timer(self._seconds, self._fire)
            self._timer.daemon = True
            self._timer.start()

    def _fire(self) -> None:
        log.warning("still running %.0f s after being told to stop: exiting now", self._seconds)
        os._exit(0)


class LazyEngine:
    """The memory engine behind the endpoint, imported and opened after the handshake."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = env
        self.notify: Notify | None = None
        self.peer: Peer | None = None
        self.log_file: Path | None = None
        self._task: asyncio.Task[Engine] | None = None

    def start(self, hs: Handshake) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._start(hs))

    async def _start(self, hs: Handshake) -> Engine:
        try:
            # importing the engine costs ~100 ms: do it off the event loop, after the handshake reply
            module = await asyncio.to_thread(importlib.import_module, "pi_memory_bridge.engine.core")
            engine: Engine = await module.Engine.open(
                hs.loaded,
                hs.agent_dir,
                hs.cwd,
                env=self.env,
                notify=self.notify,
                log_file=self.log_file,
                peer=self.peer,
                has_ui=hs.has_ui,
            )
        finally:
            # `cli` starts without collections (start-up allocates a lot and frees little): what
            # was loaded stays for good, so freeze it out of every later collection
            gc.freeze()
            gc.enable()
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

    async def close(self) -> None:
        """`stop`, once an engine still opening has opened: a process that lives on (the background
        sidecar) must not leave an engine behind that nobody closes."""
        if self._task is not None:
            with contextlib.suppress(Exception):
                await asyncio.shield(self._task)
        await self.stop()


class Prefixed:
    """A reader that first returns what was read before the endpoint existed (`quick_start`)."""

    def __init__(self, reader: ByteReader, first: bytes) -> None:
        self._reader = reader
        self._first = first

    async def read(self, n: int) -> bytes:
        if self._first:
            chunk, self._first = self._first[:n], self._first[n:]
            return chunk
        return await self._reader.read(n)


def _remember(prelude: Prelude | None, p: InitializeParams, hs: Handshake) -> None:
    """Store this handshake's answer for the next sidecar, when it answered the first line."""
    if prelude is None or prelude.fingerprint is None or prelude.params is None:
        return
    key, prelude.fingerprint = prelude.fingerprint, None  # one handshake per process
    agent_dir = agent_dir_of(prelude.params)
    if agent_dir is not None and canonical(p.model_dump(by_alias=True, exclude_unset=True)) == canonical(
        prelude.params
    ):
        store_answer(agent_dir, key, hs.result.model_dump(mode="json", by_alias=True))


def build_endpoint(
    engine: LazyEngine,
    stop: asyncio.Event,
    *,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    prelude: Prelude | None = None,
) -> RpcEndpoint:
    """The endpoint of one Pi. With a `prelude` whose `initialize` was already answered
    (`quick_start`), the full handshake runs here, before any other request is read."""
    rpc = RpcEndpoint(max_line_bytes=max_line_bytes)

    async def notify_status(state: FooterState) -> None:
        await rpc.notify("status/changed", StatusChanged(footer=Footer.of(state)))

    engine.notify = notify_status
    engine.peer = rpc  # learning asks the shim for completions (model/complete)

    def begin(hs: Handshake) -> None:
        rpc.initialized = True
        start_early(hs.loaded)  # the embedding model loads beside the engine's start-up
        engine.start(hs)

    @rpc.route("initialize", InitializeParams, before_init=True)
    async def initialize(p: InitializeParams) -> InitializeResult:
        if rpc.initialized:
            # The engine was started from the first handshake's config, agent dir and cwd; a
            # second one would change none of that while claiming to.
            raise InvalidRequest(
                "initialize was already called on this sidecar; the handshake runs once per "
                "process (start a new sidecar for another agent dir, project or protocol)"
            )
        hs = handshake(p, engine.env)
        begin(hs)
        _remember(prelude, p, hs)
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

    @rpc.route("learning/trigger", LearningTriggerParams)
    async def learning_trigger(p: LearningTriggerParams) -> LearningTriggerResult:
        return await (await engine.get()).learning_trigger(p)

    @rpc.route("shutdown", ShutdownParams, before_init=True)
    async def shutdown(_p: ShutdownParams) -> ShutdownResult:
        # the answer says whether the requests in flight finished; it claims no drain it did not wait for
        drained = await rpc.drain_others(SHUTDOWN_ANSWER_DRAIN_S)
        stop.set()
        return ShutdownResult(drained=drained)

    if prelude is not None and prelude.answered:
        _adopt(prelude, engine.env, begin)
    return rpc


def _adopt(prelude: Prelude, env: Mapping[str, str], begin: Callable[[Handshake], None]) -> None:
    """Run the handshake whose answer `quick_start` gave, and start the engine from it."""
    assert prelude.params is not None and prelude.answer is not None and prelude.fingerprint is not None
    agent_dir = agent_dir_of(prelude.params)
    assert agent_dir is not None
    try:
        hs = handshake(InitializeParams.model_validate(prelude.params), env)
    except Exception:
        # cannot happen for params a full handshake accepted before; if it does, every call
        # fails (the shim shows memory unavailable) and the next sidecar asks the long way
        log.exception("the handshake answered from the stored answer fails now")
        store_answer(agent_dir, prelude.fingerprint, None)
        return
    begin(hs)
    real = hs.result.model_dump(mode="json", by_alias=True)
    if real != prelude.answer:
        # an input the fingerprint does not cover changed: the engine runs on the real config,
        # its footer reaches the shim when it opens, and the next sidecar answers the real one
        log.warning("the stored handshake answer was out of date; replaced")
        store_answer(agent_dir, prelude.fingerprint, real)


async def serve_stdio(prelude: Prelude | None = None) -> int:
    env = dict(os.environ)
    engine = LazyEngine(env)
    engine.log_file = setup_logging(
        data_dir(default_agent_dir(env)) / "logs", env.get("PI_MEMORY_BRIDGE_LOG_LEVEL", "info")
    )
    stop = asyncio.Event()
    rpc = build_endpoint(engine, stop, prelude=prelude)
    watchdog = ExitWatchdog(EXIT_WATCHDOG_S)
    stdin, writer = await open_stdio()
    reader = _EofWatch(Prefixed(stdin, prelude.unread if prelude else b""), watchdog.arm)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    serving = asyncio.create_task(rpc.serve(reader, writer))
    stopping = asyncio.create_task(stop.wait())
    await asyncio.wait({serving, stopping}, return_when=asyncio.FIRST_COMPLETED)
    watchdog.arm()
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


def run(prelude: Prelude | None = None) -> int:
    code = asyncio.run(serve_stdio(prelude))
    # The engine is closed and the logs are flushed: skip the interpreter's own teardown, tens of
    # ms of CPU per sidecar that nobody waits for (several exit at once when subagents finish).
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
