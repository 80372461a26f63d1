"""Every footer text the handshake and the engine show in Pi's status line, in one place.

The texts are part of what the user sees (and the E2E suites read), so they are kept exactly; the
functions say which state each one reports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from pi_memory_bridge.config import LoadedConfig
    from pi_memory_bridge.outbox import OutboxCounts

STARTING: Final = "memory: starting"
OFF: Final = "memory: off"
READY: Final = "memory: ready"
RECALL_OFF: Final = "memory: recall off"
CAPTURE_OFF: Final = "memory: capture off"
NOTHING_TO_CAPTURE: Final = "memory: nothing to capture"
CAPTURE_FAILED: Final = "memory: capture failed"
PAUSED: Final = "memory: paused for this project"


def not_configured(backend: str) -> str:
    return f"memory: {backend} not configured"


def unavailable(backend: str) -> str:
    return f"memory: {backend} unavailable"


def not_captured(reason: str) -> str:
    return f"memory: not captured ({reason})"


def captured(count: int, *, queued: bool) -> str:
    return f"memory: {'queued' if queued else 'captured'} {count}"


def initial(loaded: LoadedConfig) -> str:
    """The handshake's footer, from the configuration alone (the backend opens after)."""
    if not loaded.config.enabled:
        return OFF
    if not loaded.backend_ready:
        return not_configured(loaded.config.backend)
    return STARTING


def engine_state(loaded: LoadedConfig, *, backend_open: bool) -> str:
    if not loaded.config.enabled:
        return OFF
    if not backend_open:
        return unavailable(loaded.config.backend)
    return READY


def outbox(counts: OutboxCounts) -> str:
    if counts.waiting == 0:
        return "memory: saved" if not counts.dead else f"memory: saved ({counts.dead} dead in outbox)"
    if counts.last_error:
        return f"memory: {counts.waiting} queued (will retry)"
    return f"memory: {counts.waiting} queued"
