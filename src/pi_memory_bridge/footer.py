"""The footer's vocabulary: the few states Pi's status line can be in, and their text.

One small set of typed states, low in the layers so every flow can name one, rendered to text
here and nowhere else (the shim gets the state and the text, and renders the two states it must
show on its own, `starting` and `unavailable`, from templates generated from `TEMPLATES`).

    ready        memory works; nothing to report
    recalled n   this turn's prompt got n remembered items (shown for the turn)
    learning     memory is digesting what it captured (consolidation in the background)
    behind n     n captured turns wait for delivery that is failing or retrying
    paused       capture and recall are paused for this project
    unavailable  memory cannot work right now; a short reason why
    off          memory (or recall) is switched off in the configuration
    starting     the sidecar is starting
    setup        the configured backend needs `/tdai-memory-setup` before it can work
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from pi_memory_bridge.config import LoadedConfig

MAX_REASON_CHARS: Final = 120


class FooterKind(enum.StrEnum):
    READY = "ready"
    RECALLED = "recalled"
    LEARNING = "learning"
    BEHIND = "behind"
    PAUSED = "paused"
    UNAVAILABLE = "unavailable"
    OFF = "off"
    STARTING = "starting"
    SETUP = "setup"


TEMPLATES: Final[dict[FooterKind, str]] = {
    FooterKind.READY: "memory: ready",
    FooterKind.RECALLED: "memory: recalled {count}",
    FooterKind.LEARNING: "memory: learning",
    FooterKind.BEHIND: "memory: behind ({count} waiting)",
    FooterKind.PAUSED: "memory: paused for this project",
    FooterKind.UNAVAILABLE: "memory: unavailable ({reason})",
    FooterKind.OFF: "memory: {reason}off",
    FooterKind.STARTING: "memory: starting",
    FooterKind.SETUP: "memory: setup needed (/tdai-memory-setup)",
}


@dataclass(frozen=True, slots=True)
class FooterState:
    kind: FooterKind
    count: int | None = None
    reason: str | None = None

    @property
    def text(self) -> str:
        reason = " ".join((self.reason or "").split())
        if len(reason) > MAX_REASON_CHARS:
            reason = reason[: MAX_REASON_CHARS - 1] + "…"
        if self.kind is FooterKind.OFF:
            reason = f"{reason} " if reason else ""
        return TEMPLATES[self.kind].format(count=self.count or 0, reason=reason)


READY: Final = FooterState(FooterKind.READY)
LEARNING: Final = FooterState(FooterKind.LEARNING)
PAUSED: Final = FooterState(FooterKind.PAUSED)
OFF: Final = FooterState(FooterKind.OFF)
RECALL_OFF: Final = FooterState(FooterKind.OFF, reason="recall")
CAPTURE_OFF: Final = FooterState(FooterKind.OFF, reason="capture")
STARTING: Final = FooterState(FooterKind.STARTING)
SETUP_NEEDED: Final = FooterState(FooterKind.SETUP)


def recalled(count: int) -> FooterState:
    return FooterState(FooterKind.RECALLED, count=count)


def behind(count: int) -> FooterState:
    return FooterState(FooterKind.BEHIND, count=count)


def unavailable(reason: str) -> FooterState:
    return FooterState(FooterKind.UNAVAILABLE, reason=reason)


def not_configured(loaded: LoadedConfig) -> FooterState:
    """The configured backend cannot start: setup is needed only for MemoryCore."""
    if loaded.config.backend == "memorycore":
        return SETUP_NEEDED
    return unavailable(f"the {loaded.config.backend} backend is not configured")


def switched_off(loaded: LoadedConfig) -> FooterState | None:
    """`off` (or which half is off) when the configuration turns memory off, else None."""
    cfg = loaded.config
    if not cfg.enabled or not (cfg.recall.enabled or cfg.capture.enabled):
        return OFF
    if not cfg.recall.enabled:
        return RECALL_OFF
    if not cfg.capture.enabled:
        return CAPTURE_OFF
    return None


def initial(loaded: LoadedConfig) -> FooterState:
    """The handshake's footer, from the configuration alone (the backend opens after)."""
    if not loaded.config.enabled:
        return OFF
    if not loaded.backend_ready:
        return not_configured(loaded)
    return STARTING
