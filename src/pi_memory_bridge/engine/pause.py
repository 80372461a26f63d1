"""What the engine answers while memory is paused for this project: no recall, no capture, no tools."""

from __future__ import annotations

from pi_memory_bridge import footer
from pi_memory_bridge.wire import Footer, RecallResult, ToolCallResult, TurnSettledResult

RESUME_HINT = "/tdai-memory-resume turns it back on"


def paused_recall() -> RecallResult:
    return RecallResult(
        block=None, outcome="disabled", layers=[], elapsed_ms=0.0, chars=0, footer=Footer.of(footer.PAUSED)
    )


def paused_capture() -> TurnSettledResult:
    return TurnSettledResult(
        captured=0, skipped=0, reasons=["paused for this project"], footer=Footer.of(footer.PAUSED)
    )


def paused_tool() -> ToolCallResult:
    return ToolCallResult(
        text="Memory is paused for this project by the user; continue without memory.",
        details={"paused": True},
        is_error=True,
    )
