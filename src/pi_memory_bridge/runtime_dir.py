"""This user's runtime folder: the background sidecars' sockets and locks, and the running
inspectors' records. The shim computes the same folder (extension-shim/src/daemon.ts, `socketPath`)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from pi_memory_bridge.daemon_contract import RUNTIME_DIR_FALLBACK, RUNTIME_DIR_VARS, SOCKET_DIR_PREFIX


def runtime_dir(env: Mapping[str, str]) -> Path:
    base = next((env[v] for v in RUNTIME_DIR_VARS if env.get(v)), RUNTIME_DIR_FALLBACK)
    return Path(base) / f"{SOCKET_DIR_PREFIX}{os.getuid()}"
