"""Which settled runs capture keeps at all, before any parsing: a pure decision.

A run Pi itself does not keep (`pi --no-session`, which is how Pi's subagent example starts its
children with a model-written task) is not the user's conversation. It gets recall like any other
run, but its turns are captured only when `capture.noSessionRuns` says so.
"""

from __future__ import annotations

from typing import Final

from pi_memory_bridge.config import CaptureSettings

NO_SESSION_RUN: Final = "no-session run"


def not_kept_reason(session_persisted: bool, capture: CaptureSettings) -> str | None:
    """Why this run's turns are not captured at all, or None when capture goes ahead."""
    if not session_persisted and not capture.no_session_runs:
        return NO_SESSION_RUN
    return None
