"""`/tdai-memory-ui`: start the memory inspector for this agent dir and say where it is.

The inspector runs as its own process (`pi-memory-bridge ui --no-open`), detached in a new
session so that neither Pi's exit nor the sidecar's waits for it or takes it down; it stops by
itself when unused, or with `pi-memory-bridge serve --stop`. One already running for this agent dir
(ui.registry) is reused rather than a second one started. Its first line on stdout is the
address, which is all we read of it.
"""

from __future__ import annotations

import asyncio
import os
import select
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pi_memory_bridge.ui import registry
from pi_memory_bridge.ui.extra import missing_message
from pi_memory_bridge.vocabulary.dialog import Outcome

START_TIMEOUT_S = 20.0  # importing the web stack and opening the store on a loaded machine
IDLE_MINUTES = 30
_LAUNCH = "import sys; from pi_memory_bridge.cli import main; sys.exit(main())"


class InspectorStartError(Exception):
    pass


@dataclass(frozen=True, slots=True)
class InspectorDeps:
    agent_dir: Path
    cwd: Path
    env: Mapping[str, str]
    python: str = sys.executable


@dataclass(frozen=True, slots=True)
class Started:
    url: str
    pid: int


def launch_detached(deps: InspectorDeps, *, timeout_s: float = START_TIMEOUT_S) -> Started:
    """Start the inspector and return its address (blocking: run it in a thread)."""
    env = {**deps.env, "PI_CODING_AGENT_DIR": str(deps.agent_dir)}
    argv = [deps.python, "-c", _LAUNCH, "ui", "--no-open", "--idle-minutes", str(IDLE_MINUTES)]
    try:
        proc = subprocess.Popen(
            argv,
            cwd=deps.cwd if deps.cwd.is_dir() else None,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
        )
    except OSError as exc:
        raise InspectorStartError(f"cannot start the inspector: {exc}") from exc
    assert proc.stdout is not None
    line = b""
    deadline = time.monotonic() + timeout_s
    try:
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            ready, _, _ = select.select([proc.stdout], [], [], left)
            if not ready:
                break
            chunk = os.read(proc.stdout.fileno(), 4096)
            if not chunk:
                break
            line += chunk
    finally:
        proc.stdout.close()  # the inspector writes nothing else there
    url = line.decode("utf-8", "replace").strip().splitlines()[0] if line.strip() else ""
    if not url.startswith("http://127.0.0.1:"):
        if proc.poll() is None:
            proc.kill()
        code = proc.wait(timeout=5)
        raise InspectorStartError(
            f"the inspector did not start (exit code {code}); "
            "run `pi-memory-bridge ui` in a terminal to see why"
        )
    return Started(url, proc.pid)


async def inspector_flow(deps: InspectorDeps) -> Outcome:
    missing = missing_message()
    if missing is not None:
        return Outcome(f"Cannot open the memory inspector: {missing}", "warning")
    already = registry.running(deps.env, deps.agent_dir)
    if already:
        url, how = already[-1].url, "already running"
    else:
        try:
            url, how = (await asyncio.to_thread(launch_detached, deps)).url, "started"
        except InspectorStartError as exc:
            return Outcome(str(exc), "error")
    return Outcome(
        f"Memory inspector ({how}): {url}\nOpen it in a browser on this computer. It shows what Pi "
        f"remembers and why it recalled it; it stops by itself after {IDLE_MINUTES} minutes without use, "
        "or with `pi-memory-bridge serve --stop`."
    )
