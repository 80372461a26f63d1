"""Recall for a prompt within the configured budget; the last real recall is kept for status."""

from __future__ import annotations

import time
from dataclasses import replace

from pi_memory_bridge.config import LoadedConfig
from pi_memory_bridge.engine.backend_slot import BackendSlot
from pi_memory_bridge.engine.footer import FooterModel
from pi_memory_bridge.recall import Layer, RecallBudget, RecallOutcome, recall
from pi_memory_bridge.recall.trace_log import TraceLog
from pi_memory_bridge.wire import Footer, LayerReport, RecallParams, RecallResult

# The share of the recall deadline a prompt waits for a store that is still opening.
OPEN_WAIT_SHARE = 0.5


def recall_budget(loaded: LoadedConfig) -> RecallBudget:
    r = loaded.config.recall
    return RecallBudget(
        deadline_ms=r.deadline_ms,
        max_chars=r.max_chars,
        limits={
            Layer.L3: 1,
            Layer.L1: r.l1_limit,
            Layer.L2: r.l2_limit,
            Layer.L0: r.l0_limit,
            Layer.SKILL: r.skill_limit,
        },
        skip_trivial=r.skip_trivial_prompts,
        min_prompt_chars=r.min_prompt_chars,
    )


class Recall:
    def __init__(self, loaded: LoadedConfig, slot: BackendSlot, status_line: FooterModel) -> None:
        self._loaded = loaded
        self._slot = slot
        self._status_line = status_line
        self.last: RecallOutcome | None = None
        self.traces: TraceLog | None = None  # each prompt's recall trace, for the inspector

    async def answer(self, p: RecallParams) -> RecallResult:
        cfg = self._loaded.config
        if not (cfg.enabled and cfg.recall.enabled):
            return RecallResult(
                block=None,
                outcome="disabled",
                layers=[],
                elapsed_ms=0.0,
                chars=0,
                footer=Footer.of(self._status_line.turn_done()),
            )
        budget = recall_budget(self._loaded)
        started = time.monotonic()
        # A store still opening (a fresh `pi -p` on a loaded machine) gets part of the deadline
        # and the rest stays for the search: answering "unavailable" at once lost the first
        # recall whenever the open took longer than the start-up wait.
        backend = await self._slot.ensure(budget.deadline_ms * OPEN_WAIT_SHARE / 1000)
        waited_ms = (time.monotonic() - started) * 1000
        if waited_ms >= 1:
            budget = replace(budget, deadline_ms=max(1, int(budget.deadline_ms - waited_ms)))
        if backend is None:
            return RecallResult(
                block=None,
                outcome="unavailable",
                layers=[],
                elapsed_ms=0.0,
                chars=0,
                footer=Footer.of(self._status_line.turn_done()),
            )
        outcome = await recall(
            backend,
            p.prompt,
            budget,
            live_user_timestamps=frozenset(p.live_user_timestamps),
            recorder=self.traces,
        )
        if outcome.outcome != "skipped":
            self.last = outcome
        return RecallResult(
            block=outcome.block,
            outcome=outcome.outcome,
            layers=[
                LayerReport(
                    layer=str(r.layer), state=r.state, items=r.items, ms=round(r.ms, 2), error=r.error
                )
                for r in outcome.layers
            ],
            elapsed_ms=round(outcome.elapsed_ms, 2),
            chars=outcome.chars,
            footer=Footer.of(self._status_line.recalled(outcome.items)),
        )
