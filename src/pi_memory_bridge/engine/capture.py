"""Settled turns into memory: prepared (redacted, fail-closed), handed to the outbox or the
backend, counted for status, and the tool-heavy ones passed on to skill capture."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from pi_memory_bridge.backends.base import BackendError
from pi_memory_bridge.capture.prepare import live_user_entries, prepare_capture
from pi_memory_bridge.capture.scope import not_kept_reason
from pi_memory_bridge.config import LoadedConfig
from pi_memory_bridge.engine.backend_slot import BackendSlot
from pi_memory_bridge.engine.footer import FooterModel
from pi_memory_bridge.engine.sessions import Sessions
from pi_memory_bridge.engine.skills import SkillCapture
from pi_memory_bridge.plural import counted
from pi_memory_bridge.redact import redact_text
from pi_memory_bridge.wire import Footer, TurnSettledParams, TurnSettledResult

log = logging.getLogger(__name__)

CAPTURE_OPEN_WAIT_S = 2.0


@dataclass
class CaptureStats:
    captured: int = 0
    skipped: int = 0
    redactions: int = 0
    failures: int = 0
    last_error: str | None = None
    skip_reasons: Counter[str] = field(default_factory=Counter)
    not_kept: Counter[str] = field(default_factory=Counter)  # whole runs not captured by design

    def describe(self) -> str:
        text = f"{self.captured} captured, {self.skipped} skipped (fail-closed), {self.redactions} redactions"
        if self.skip_reasons:
            top = ", ".join(f"{r} x{n}" for r, n in self.skip_reasons.most_common(3))
            text += f" [skips: {top}]"
        if self.not_kept:
            runs = ", ".join(f"{r} x{n}" for r, n in self.not_kept.most_common())
            text += f", {counted(self.not_kept.total(), 'run')} not captured [{runs}]"
        if self.failures:
            text += f", {self.failures} failed (last: {self.last_error})"
        return text


class Capture:
    def __init__(
        self,
        loaded: LoadedConfig,
        slot: BackendSlot,
        sessions: Sessions,
        skills: SkillCapture,
        status_line: FooterModel,
        *,
        on_failure: Callable[[], None],
        on_captured: Callable[[str, int], None],
    ) -> None:
        self._loaded = loaded
        self._slot = slot
        self._sessions = sessions
        self._skills = skills
        self._status_line = status_line
        self.stats = CaptureStats()
        # a failed live capture: the turn is in Pi's session file, catch-up retries it from there
        self._on_failure = on_failure
        # told (memory session, turns) after turns were captured: learning counts them (never waits)
        self._on_captured = on_captured

    async def turn_settled(self, p: TurnSettledParams) -> TurnSettledResult:
        cfg = self._loaded.config
        if not (cfg.enabled and cfg.capture.enabled):
            done = Footer.of(self._status_line.turn_done())
            return TurnSettledResult(captured=0, skipped=0, reasons=[], footer=done)
        if (unkept := not_kept_reason(p.session_persisted, cfg.capture)) is not None:
            self.stats.not_kept[unkept] += 1
            done = Footer.of(self._status_line.turn_done())  # not the user's conversation: nothing to say
            return TurnSettledResult(captured=0, skipped=0, reasons=[unkept], footer=done)
        ident = self._sessions.identity_for(p.pi_session_id, p.entries, p.leaf_id)
        prepared = prepare_capture(
            p.runs, aborted=p.aborted, identity=ident, user_entries=live_user_entries(p.entries)
        )
        stats = self.stats
        stats.skipped += len(prepared.skipped_reasons)
        stats.skip_reasons.update(prepared.skipped_reasons)
        stats.redactions += prepared.redactions
        skipped = len(prepared.skipped_reasons)
        reasons = list(prepared.skipped_reasons)
        if not prepared.turns:
            done = Footer.of(self._status_line.turn_done())
            return TurnSettledResult(captured=0, skipped=skipped, reasons=reasons, footer=done)
        slot = self._slot
        # with the outbox, capture never waits for the backend; without it, give a slow open a moment
        await slot.ensure(0 if slot.delivery is not None else CAPTURE_OPEN_WAIT_S)
        failure: str | None = None
        if slot.sink is None:
            failure = slot.backend_error or slot.delivery_error or "no backend"
        else:
            try:
                await slot.sink.submit(prepared.turns)
            except BackendError as exc:
                failure = redact_text(f"{type(exc).__name__}: {exc}").text
            except Exception as exc:  # a bug in a sink must be a counted failure, not a crash of the RPC
                log.exception("capture sink raised")
                failure = redact_text(f"{type(exc).__name__}: {exc}").text
        if failure is not None:
            stats.failures += 1
            stats.last_error = failure
            self._on_failure()
            log.error("capture failed: %s", failure)
            failed = Footer.of(self._status_line.capture_failed(failure))
            return TurnSettledResult(captured=0, skipped=skipped, reasons=reasons, footer=failed)
        stats.captured += len(prepared.turns)
        queued = slot.delivery is not None
        await self._skills.settled(slot.backend, prepared.turns)
        self._on_captured(ident.memory_session_id, len(prepared.turns))
        return TurnSettledResult(
            captured=len(prepared.turns),
            skipped=skipped,
            reasons=reasons,
            # queued: "recalled n" stays until the delivery is done (`FooterModel.outbox_changed`)
            footer=Footer.of(self._status_line.show() if queued else self._status_line.turn_done()),
        )
