"""`/tdai-memory-pause` and `/tdai-memory-resume`: `operations.pause` said as an outcome."""

from __future__ import annotations

from pi_memory_bridge.operations.pause import ProjectPause, set_paused
from pi_memory_bridge.vocabulary.dialog import Outcome


async def pause_flow(pause: ProjectPause, *, paused: bool) -> Outcome:
    """Nothing is deleted either way and it is undone by the other command, so nothing is asked;
    the footer after the command says "paused" (or the engine's state again)."""
    outcome = set_paused(pause.agent_dir, pause.project, paused)
    return Outcome(outcome.message, "info" if outcome.ok else "error")
