"""Catch-up capture and import from Pi's own session files (the source of truth for what was said).

    runner = CatchUpRunner(agent_dir=..., data_dir=..., outbox=outbox, wake=worker.wake)
    runner.start()            # a first pass now, in the background; then on a slow timer
    runner.nudge()            # live capture failed: look again soon
    runner.progress.describe()
    await runner.stop()

Modules: `reader` (session files, fail-closed), `segments` (turns as live capture sees them),
`files` (finding and reading files against their watermark), `state` (watermarks, import jobs,
when capture started), `runner` (the background passes), `importer` (preview and import).

`service` (imported on its own: it needs the engine's pieces) holds what a sidecar wires up.
"""

from pi_memory_bridge.catchup.importer import (
    ImportPlan,
    ImportResult,
    ImportScope,
    plan_import,
    run_import,
)
from pi_memory_bridge.catchup.runner import Budget, CatchUpProgress, CatchUpRunner, PassOutcome
from pi_memory_bridge.catchup.state import CatchUpState, StateError, capture_since

__all__ = [
    "Budget",
    "CatchUpProgress",
    "CatchUpRunner",
    "CatchUpState",
    "ImportPlan",
    "ImportResult",
    "ImportScope",
    "PassOutcome",
    "StateError",
    "capture_since",
    "plan_import",
    "run_import",
]
