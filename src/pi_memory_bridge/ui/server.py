"""`pi-memory-bridge ui`: serve the inspector on 127.0.0.1 until Ctrl-C or an idle time passes.

The first line on stdout is the address with this start's token (what `/tdai-memory-ui` reads);
everything else goes to stderr and the log file. The socket is bound here, before the server
starts, so the port is known (also for `--port 0`) and nothing but the loopback address is bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import sys
import threading
import time
import webbrowser
from collections.abc import Mapping
from pathlib import Path

from pi_memory_bridge.ui.security import LOOPBACK, Guard

log = logging.getLogger(__name__)

DEFAULT_IDLE_MINUTES = 30
IDLE_CHECK_S = 5.0


class IdleClock:
    """When the last request came; the server stops once it is older than `idle_s`."""

    def __init__(self, idle_s: float) -> None:
        self.idle_s = idle_s
        self._last = time.monotonic()

    def touch(self) -> None:
        self._last = time.monotonic()

    @property
    def expired(self) -> bool:
        return time.monotonic() - self._last > self.idle_s


def bind_loopback(port: int) -> socket.socket:
    # proto IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on sockets that say so, and without
    # it every response on a kept-alive connection waits ~40 ms for a delayed ACK (measured)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((LOOPBACK, port))
    sock.listen(64)
    sock.set_inheritable(False)
    return sock


async def serve(
    *, agent_dir: Path, cwd: Path, env: Mapping[str, str], port: int, open_browser: bool, idle_s: float
) -> int:
    import uvicorn

    from pi_memory_bridge.ui.app import create_app
    from pi_memory_bridge.ui.service import Inspector

    try:
        sock = bind_loopback(port)
    except OSError as exc:
        print(
            f"pi-memory-bridge ui: cannot listen on {LOOPBACK}:{port}: {exc.strerror or exc}", file=sys.stderr
        )
        return 1
    guard = Guard.fresh(sock.getsockname()[1])
    inspector = await Inspector.open(agent_dir, cwd, env)
    clock = IdleClock(idle_s)
    app = create_app(inspector, guard, on_request=clock.touch)
    config = uvicorn.Config(
        app, log_config=None, access_log=False, lifespan="off", server_header=False, date_header=False
    )
    server = uvicorn.Server(config)
    from pi_memory_bridge.ui import registry

    # listed before the address is printed: whoever read the address finds it registered
    listed = registry.register(env, guard.start_url, agent_dir)
    print(guard.start_url, flush=True)
    print(
        f"memory inspector for {agent_dir}: open the address above; it stops on Ctrl-C "
        f"or after {idle_s / 60:.0f} minutes without use",
        file=sys.stderr,
        flush=True,
    )
    if open_browser:
        threading.Thread(target=webbrowser.open, args=(guard.start_url,), daemon=True).start()

    async def watch_idle() -> None:
        while not server.should_exit:
            await asyncio.sleep(min(IDLE_CHECK_S, idle_s))
            if clock.expired:
                log.info("memory inspector: idle for %.0f s, stopping", idle_s)
                print("memory inspector stopped: unused for a while", file=sys.stderr, flush=True)
                server.should_exit = True

    watcher = asyncio.create_task(watch_idle())
    try:
        await server.serve(sockets=[sock])
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
        registry.unregister(env, listed)
        await inspector.close()
        sock.close()
    return 0


def run(*, port: int, open_browser: bool, idle_minutes: float) -> int:
    """The CLI entry: checks the extra, sets up logging, serves; Ctrl-C ends it without a traceback."""
    from pi_memory_bridge.ui.extra import missing_message

    missing = missing_message()
    if missing is not None:
        print(f"pi-memory-bridge ui: {missing}", file=sys.stderr)
        return 2
    from pi_memory_bridge.config import data_dir, default_agent_dir
    from pi_memory_bridge.sidecar.logs import setup_logging

    env = dict(os.environ)
    agent_dir = default_agent_dir(env)
    setup_logging(data_dir(agent_dir) / "logs", env.get("PI_MEMORY_BRIDGE_LOG_LEVEL", "info"))
    try:
        return asyncio.run(
            serve(
                agent_dir=agent_dir,
                cwd=Path.cwd(),
                env=env,
                port=port,
                open_browser=open_browser,
                idle_s=max(1.0, idle_minutes * 60),
            )
        )
    except KeyboardInterrupt:
        print("memory inspector stopped", file=sys.stderr)
        return 0
