"""`pi-memory-bridge serve` as a background sidecar shared by every Pi of one agent dir.

The shim sets `PI_MEMORY_BRIDGE_SOCKET` to a private unix socket whose name it derived from all
that decides a sidecar's behaviour (command, release, agent dir, the relevant environment), so a
process serving that socket behaves exactly as a sidecar of its own would. Imports and the
embedding model are then paid once per daemon instead of once per `pi -p`.

Each connection is one Pi and gets what a per-process sidecar had: its own endpoint and its own
`Engine`, its session. What belongs to the store (the backend and the embedding of rows without
a vector, the outbox's delivery, catch-up) is the daemon's, one `StoreServices` per store shared
by every connection (`engine.store_pool`): a connection's `shutdown` or EOF (Pi exited or was
killed) ends its engine only, and the store's work goes on.

Exactly one daemon serves a socket: the holder of `<socket>.lock` (flock, released by the kernel
on any death, so a socket left by a SIGKILLed daemon is simply replaced). A daemon that finds the
lock taken waits a little for it (the holder may be on its way out) and otherwise leaves. With no
connection for `PI_MEMORY_BRIDGE_DAEMON_IDLE_S` seconds (default 600) the daemon stops listening,
removes its socket and exits, once the stores' work is done (rows still to embed or to deliver, a
catch-up pass running), waiting for it at most `PI_MEMORY_BRIDGE_DAEMON_BUSY_S` seconds (default
600) beyond the idle time; SIGTERM/SIGINT stop it at once, bounded by the exit watchdog.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pi_memory_bridge.config import data_dir, default_agent_dir
from pi_memory_bridge.daemon_contract import LOCK_SUFFIX, SOCKET_SUFFIX, SOCKET_VAR, read_lock_pid
from pi_memory_bridge.engine.store_pool import StorePool
from pi_memory_bridge.runtime_dir import read_if_held, runtime_dir
from pi_memory_bridge.sidecar.daemon_start import (
    LOCK_WAIT_S,
    SocketUnusable,
    bind_socket,
    check_private_dir,
    take_lock,
)
from pi_memory_bridge.sidecar.daemon_start import serve as serve_socket
from pi_memory_bridge.sidecar.logs import setup_logging
from pi_memory_bridge.sidecar.quick_start import Prelude
from pi_memory_bridge.sidecar.serve import (
    EXIT_WATCHDOG_S,
    ExitWatchdog,
    LazyEngine,
    Prefixed,
    build_endpoint,
)

log = logging.getLogger(__name__)

__all__ = [
    "LOCK_WAIT_S",
    "SOCKET_VAR",
    "SocketUnusable",
    "bind_socket",
    "check_private_dir",
    "run",
    "run_locked",
    "stop_all",
    "take_lock",
]

IDLE_VAR = "PI_MEMORY_BRIDGE_DAEMON_IDLE_S"
_LOCKS = f"*{SOCKET_SUFFIX}{LOCK_SUFFIX}"  # every socket's lock in the runtime dir
DEFAULT_IDLE_S = 600.0
BUSY_VAR = "PI_MEMORY_BRIDGE_DAEMON_BUSY_S"
DEFAULT_BUSY_S = 600.0
BUSY_RECHECK_S = 2.0  # how often an idle daemon with work left looks whether it is done
STORES_CLOSE_S = EXIT_WATCHDOG_S  # the stores' services at exit (a last catch-up pass, the backend)
DRAIN_S = 2.0  # a connection's requests in flight at `shutdown`, as the stdio sidecar gives them
ENGINE_CLOSE_S = EXIT_WATCHDOG_S  # a connection's engine shutdown; the stdio sidecar's watchdog


@dataclass(frozen=True, slots=True)
class DaemonSettings:
    socket_path: Path
    idle_s: float
    busy_s: float = DEFAULT_BUSY_S  # the longest an idle daemon stays for its stores' work

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> DaemonSettings:
        idle = _seconds(env, IDLE_VAR, DEFAULT_IDLE_S)
        busy = _seconds(env, BUSY_VAR, DEFAULT_BUSY_S)
        return cls(Path(env[SOCKET_VAR]), max(0.1, idle), max(0.0, busy))


def _seconds(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name, "").strip()
    try:
        return float(raw) if raw else default
    except ValueError:
        return default


class _Connections:
    """How many Pis are connected; `idle` is set once none was for `idle_s` and `busy()` says the
    stores have nothing left to do (or `busy_s` more passed), `empty` while none is connected."""

    def __init__(
        self, idle_s: float, busy: Callable[[], Awaitable[bool]] | None = None, busy_s: float = 0.0
    ) -> None:
        self._idle_s = idle_s
        self._busy = busy
        self._busy_s = busy_s
        self._count = 0
        self._timer: asyncio.TimerHandle | None = None
        self._checking: asyncio.Task[None] | None = None
        self._idle_at: float | None = None  # when the idle time ran out with work left
        self.idle = asyncio.Event()
        self.empty = asyncio.Event()
        self.empty.set()
        self.served = 0

    def opened(self) -> None:
        self._count += 1
        self.served += 1
        self.empty.clear()
        self._idle_at = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def closed(self) -> None:
        self._count -= 1
        if self._count == 0:
            self.empty.set()
            self.arm()

    def arm(self) -> None:
        if self._timer is None and self._count == 0:
            self._timer = asyncio.get_running_loop().call_later(self._idle_s, self._fire)

    def _fire(self) -> None:
        self._timer = None
        if self._count != 0:
            return
        if self._busy is None:
            self.idle.set()
            return
        loop = asyncio.get_running_loop()
        if self._idle_at is None:
            self._idle_at = loop.time()
        if loop.time() - self._idle_at >= self._busy_s:
            log.warning("exiting with the stores' work unfinished after %.0f s (the next start resumes it)",
                        self._busy_s)  # fmt: skip
            self.idle.set()
            return
        self._checking = loop.create_task(self._check())

    async def _check(self) -> None:
        assert self._busy is not None
        try:
            busy = await self._busy()
        except Exception:  # a failed look is no reason to stay: the next start resumes the work
            log.exception("cannot tell whether the stores have work left")
            busy = False
        if self._count != 0:
            return
        if not busy:
            self.idle.set()
        elif self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(BUSY_RECHECK_S, self._fire)


async def serve_connection(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    env: Mapping[str, str],
    log_file: Path | None,
    prelude: Prelude | None = None,
    pool: StorePool | None = None,
) -> None:
    """One Pi: the stdio sidecar's endpoint and engine, ended by its `shutdown` or its EOF (with the
    `prelude` of `daemon_start` for the first Pi's connection), on the daemon's `pool` of stores."""
    engine = LazyEngine(env, log_file=log_file, pool=pool)
    stop = asyncio.Event()
    rpc = build_endpoint(engine, stop, prelude=prelude)
    serving = asyncio.create_task(rpc.serve(Prefixed(reader, prelude.unread if prelude else b""), writer))
    stopping = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait({serving, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if not serving.done():
            try:
                await asyncio.wait_for(rpc.drain_tasks(), timeout=DRAIN_S)
            except TimeoutError:
                log.warning("connection closing with requests still in flight")
            serving.cancel()
    finally:
        stopping.cancel()
        log.debug("connection ended; closing its engine")
        try:
            await asyncio.wait_for(engine.close(), timeout=ENGINE_CLOSE_S)
        except TimeoutError:
            log.warning("an engine did not close within %.0f s; leaving it", ENGINE_CLOSE_S)
        except Exception:
            log.exception("closing a connection's engine failed")
        writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await writer.wait_closed()
        log.debug("connection closed")


async def serve_daemon(
    settings: DaemonSettings,
    env: Mapping[str, str],
    lock_fd: int,
    sock: socket.socket,
    first: tuple[socket.socket, Prelude] | None = None,
) -> int:
    """Serve `sock` (bound under the lock by `daemon_start`), and `first`, the connection of the
    Pi that spawned us, as accepted there."""
    log_file = setup_logging(
        data_dir(default_agent_dir(env)) / "logs", env.get("PI_MEMORY_BRIDGE_LOG_LEVEL", "info"), stderr=False
    )
    bound = settings.socket_path.stat().st_ino
    stop = asyncio.Event()
    pool = StorePool()

    async def busy() -> bool:
        left = [work for work in await pool.pending() if work.any]
        if left:
            log.info("idle, staying for the stores' work: %s", "; ".join(w.describe() for w in left))
        return bool(left)

    conns = _Connections(settings.idle_s, busy, settings.busy_s)
    handlers: set[asyncio.Task[None]] = set()

    async def on_connect(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter, prelude: Prelude | None = None
    ) -> None:
        conns.opened()
        task = asyncio.current_task()
        if task is not None:
            handlers.add(task)
        try:
            await serve_connection(reader, writer, env, log_file, prelude, pool)
        finally:
            if task is not None:
                handlers.discard(task)
            conns.closed()

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    server = await asyncio.start_unix_server(on_connect, sock=sock, limit=2**16)
    if first is not None:
        conn, prelude = first
        conn.setblocking(False)
        reader, writer = await asyncio.open_unix_connection(sock=conn, limit=2**16)
        asyncio.create_task(on_connect(reader, writer, prelude))  # noqa: RUF006 - it adds itself to `handlers`
    log.info("background sidecar serving %s (idle exit after %.0f s)", settings.socket_path, settings.idle_s)
    conns.arm()
    await _first(stop.wait(), conns.idle.wait())
    # Give up the name and the lock first: from now on a Pi that connects finds no socket and
    # starts the next daemon, which takes the lock at once. A connection that arrived as the idle
    # time ran out is still served (it is queued on our listening socket): retire, don't drop it.
    with contextlib.suppress(OSError):
        if settings.socket_path.stat().st_ino == bound:
            settings.socket_path.unlink()
    with contextlib.suppress(OSError):
        os.ftruncate(lock_fd, 0)  # no pid left behind for anyone to signal
    os.close(lock_fd)
    if not stop.is_set():
        await asyncio.sleep(0.05)  # accept what is queued
        await _first(stop.wait(), conns.empty.wait())
    watchdog = ExitWatchdog(EXIT_WATCHDOG_S + STORES_CLOSE_S)
    watchdog.arm()
    server.close()
    for task in list(handlers):
        task.cancel()
    if handlers:
        await asyncio.wait(handlers, timeout=EXIT_WATCHDOG_S - 1)
    try:
        await asyncio.wait_for(pool.close(), STORES_CLOSE_S)
    except TimeoutError:
        log.warning("the stores did not close within %.0f s; leaving them", STORES_CLOSE_S)
    log.info("background sidecar exiting; connections served: %d", conns.served)
    return 0


async def _first(*waits: Coroutine[Any, Any, object]) -> None:
    tasks = [asyncio.create_task(w) for w in waits]
    await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    for task in tasks:
        task.cancel()


def _holder(lock: Path) -> int | None:
    """The pid in a lock some live process holds; None for a lock nobody holds (a dead daemon's)."""
    raw = read_if_held(lock, 32)
    return read_lock_pid(raw.decode(errors="replace")) if raw is not None else None


def stop_all(env: Mapping[str, str], timeout_s: float = EXIT_WATCHDOG_S + 1) -> list[int]:
    """SIGTERM every background sidecar of this user and wait for them; the pids stopped."""
    folder = runtime_dir(env)
    pids = [pid for lock in sorted(folder.glob(_LOCKS)) if (pid := _holder(lock)) is not None]
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and any(_holder(lock) for lock in folder.glob(_LOCKS)):
        time.sleep(0.05)
    return pids


def run(env: Mapping[str, str] | None = None) -> int:
    """The background sidecar (`daemon_start.serve`, which `pi-memory-bridge serve` calls first)."""
    return serve_socket(dict(os.environ if env is None else env))


def run_locked(
    settings: DaemonSettings,
    env: Mapping[str, str],
    lock_fd: int,
    sock: socket.socket,
    first: tuple[socket.socket, Prelude] | None = None,
) -> int:
    """Serve with the lock held and the socket bound (by `run`, or by `daemon_start` before the
    heavy imports), then leave without the interpreter's teardown."""
    code = asyncio.run(serve_daemon(settings, dict(env), lock_fd, sock, first))
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
