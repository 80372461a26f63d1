"""This user's runtime folder: the background sidecars' sockets and locks, and the running
inspectors' records. The shim computes the same folder (extension-shim/src/daemon.ts, `socketPath`)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path


def runtime_dir(env: Mapping[str, str]) -> Path:
    base = env.get("XDG_RUNTIME_DIR") or env.get("TMPDIR") or "/tmp"
    return Path(base) / f"pi-memory-bridge-{os.getuid()}"
