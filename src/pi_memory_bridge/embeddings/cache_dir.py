"""Where the decoded model is cached (a module of its own: no numpy, cheap to import early)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path


def default_cache_root(env: Mapping[str, str]) -> Path:
    """`$PI_MEMORY_BRIDGE_CACHE_DIR`, else the user's cache dir: shared by every Pi agent dir."""
    explicit = env.get("PI_MEMORY_BRIDGE_CACHE_DIR")
    if explicit:
        return Path(explicit)
    xdg = env.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path(env.get("HOME") or Path.home()) / ".cache"
    return base / "pi-memory-bridge"
