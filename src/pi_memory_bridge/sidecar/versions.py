"""Whether the Pi extension and this sidecar come from the same release, and the fix when not.

They are installed separately (`pi install npm:pi-memory-bridge`, `uv tool install
pi-memory-bridge`), so one can be upgraded without the other. The protocol version guards what
each side can parse; the release version guards behaviour: before 1.0 a minor release may change
what a method means, so the extension and the sidecar must agree on major.minor. Patch releases
mix freely. Only our own extension is held to this (tests and other clients name themselves).
"""

from __future__ import annotations

SHIM_CLIENT_NAME = "pi-memory-bridge-shim"
UPGRADE_HINT = "uv tool upgrade pi-memory-bridge; pi update"  # short: the footer shows ~120 characters


def _release(version: str) -> tuple[str, ...]:
    parts = version.strip().split(".")
    major = parts[0]
    # 0.x: the minor number is the breaking one; from 1.0 on only the major is
    return (major, parts[1] if len(parts) > 1 else "0") if major == "0" else (major,)


def version_mismatch(client_name: str, client_version: str, sidecar_version: str) -> str | None:
    """None when the two may talk; else a one-line reason that names the versions and the fix."""
    if client_name != SHIM_CLIENT_NAME or _release(client_version) == _release(sidecar_version):
        return None
    return f"extension {client_version} and sidecar {sidecar_version} differ: {UPGRADE_HINT}"
