"""The background sidecar's first steps, before its heavy imports: the lock, the socket, and the
handshake of the Pi that spawned it.

A cold daemon used to import everything (pydantic, asyncio, the config models: 250-400 ms on a
loaded 2-core machine) before it even listened, while its Pi retried the socket; then it
answered `initialize` the long way. Here it takes the lock and listens first, accepts that Pi's
connection and answers its first line from the stored answer (`quick_start`) exactly as the
stdio sidecar does, and only then imports the rest (`daemon`), which serves this connection on
from where it stands. Standard library only, like `quick_start`.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import stat
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from pi_memory_bridge.daemon_contract import LOCK_SUFFIX, SOCKET_VAR, lock_text
from pi_memory_bridge.sidecar.quick_start import (
    EARLY_MODULE,
    BackgroundImports,
    Prelude,
    answer_first,
    start_model_early,
    wait_readable,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

LOCK_WAIT_S = 3.0  # a daemon on its way out holds the lock this long at most (its watchdog)
# The Pi that spawned us retries the socket every 15 ms and then sends `initialize` at once;
# whatever comes later (or a connection that sends nothing) is the asyncio server's.
FIRST_CONNECTION_WAIT_S = 1.0
FIRST_LINE_WAIT_S = 0.5


class SocketUnusable(Exception):
    """The socket's folder is not private to this user: refuse to serve (the shim falls back)."""


def check_private_dir(path: Path) -> None:
    """The folder must be ours, a real directory and closed to everyone else (0700)."""
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=0o700, parents=False)
    st = path.lstat()
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise SocketUnusable(f"{path} is not a private directory of this user (0700)")


def _live(path: Path) -> bool:
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(str(path))
        return True
    except OSError:
        return False
    finally:
        probe.close()


def take_lock(socket_path: Path, wait_s: float = LOCK_WAIT_S) -> int | None:
    """The lock's fd (held for the daemon's life), or None when another daemon serves the socket."""
    fd = os.open(f"{socket_path}{LOCK_SUFFIX}", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            # the holder serves (then we are not needed) or is on its way out (then we take over)
            if _live(socket_path) or time.monotonic() > deadline:
                os.close(fd)
                return None
            time.sleep(0.05)
            continue
        os.ftruncate(fd, 0)
        os.write(fd, lock_text(os.getpid()).encode())
        return fd


def bind_socket(socket_path: Path) -> socket.socket:
    """Bind under the lock: whatever is at the path is a dead daemon's socket, and goes."""
    with contextlib.suppress(FileNotFoundError):
        socket_path.unlink()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)  # the socket is created 0600: only this user can connect
    try:
        sock.bind(str(socket_path))
    finally:
        os.umask(old)
    sock.listen(64)
    sock.setblocking(False)
    return sock


def first_connection(
    sock: socket.socket,
    env: Mapping[str, str],
    wait_s: float = FIRST_CONNECTION_WAIT_S,
    on_idle: Callable[[], None] | None = None,
) -> tuple[socket.socket, Prelude] | None:
    """The first Pi's connection with its first line read (and answered, when it could be);
    `on_idle` runs once either keeps us waiting."""
    if not wait_readable(sock.fileno(), wait_s, on_idle):
        return None
    try:
        conn, _ = sock.accept()
    except OSError:
        return None
    conn.setblocking(True)
    fd = conn.fileno()
    try:
        prelude = answer_first(env, fd_in=fd, fd_out=fd, timeout_s=FIRST_LINE_WAIT_S, on_idle=on_idle)
    except OSError:  # the Pi went away: the asyncio server finds the connection closed
        prelude = Prelude()
    return conn, prelude


def _leave(code: int) -> NoReturn:
    # not through the interpreter's teardown while the import thread may be half way through
    sys.stderr.flush()
    os._exit(code)


def serve(env: Mapping[str, str]) -> int:
    """`serve` with `PI_MEMORY_BRIDGE_SOCKET` set: lock, listen, answer the first Pi's handshake,
    then import the daemon and serve on (`daemon.run_locked`)."""
    path = Path(env[SOCKET_VAR])
    imports = BackgroundImports(
        EARLY_MODULE, "pi_memory_bridge.sidecar.daemon", "pi_memory_bridge.engine.core"
    )
    try:
        check_private_dir(path.parent)
        lock_fd = take_lock(path)
    except (SocketUnusable, OSError) as exc:
        print(f"pi-memory-bridge: cannot serve {path}: {exc}", file=sys.stderr)
        _leave(2)
    if lock_fd is None:
        _leave(0)  # another daemon serves this socket: the shim connects to it
    sock = bind_socket(path)
    first = first_connection(sock, env, on_idle=imports.start)
    if first is not None:
        start_model_early(first[1], imports)
    imports.wait()
    from pi_memory_bridge.embeddings.threads import pin_environment

    pin_environment()  # before numpy's first import (done already when the imports ran above)
    from pi_memory_bridge.sidecar.daemon import DaemonSettings, run_locked

    return run_locked(DaemonSettings.from_env(env), env, lock_fd, sock, first)
