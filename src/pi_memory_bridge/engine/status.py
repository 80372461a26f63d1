"""The status report: what `/tdai-memory-status` and the `status` method show."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from pi_memory_bridge import inspector_registry
from pi_memory_bridge._version import PROTOCOL_VERSION, __version__
from pi_memory_bridge.backends.base import BackendError, SearchesByMeaning
from pi_memory_bridge.config import LoadedConfig
from pi_memory_bridge.engine.backend_slot import BackendSlot
from pi_memory_bridge.engine.capture import CaptureStats
from pi_memory_bridge.engine.catch_up import CatchUp
from pi_memory_bridge.engine.learning import Learning
from pi_memory_bridge.engine.learning_status import describe, sentence
from pi_memory_bridge.engine.recall import Recall
from pi_memory_bridge.engine.sessions import Sessions
from pi_memory_bridge.operations.outbox import describe_counts
from pi_memory_bridge.operations.status_lines import (
    config_problems,
    describe_budget,
    describe_embeddings,
    describe_identity,
    describe_inspectors,
    describe_last_recall,
    describe_recalled,
    describe_session,
    describe_waiting,
    outbox_problems,
    sdk_problems,
)
from pi_memory_bridge.outbox import OutboxCounts
from pi_memory_bridge.redact import redact_text
from pi_memory_bridge.vocabulary.status import Problem, StatusReport


def sdk_state() -> str:
    from pi_memory_bridge.backends.memorycore import sdk_available

    return "installed" if sdk_available() else "not installed (needed only for the memorycore backend)"


def sdk_install_command() -> str:
    from pi_memory_bridge.backends.memorycore import install_command

    return install_command()


class Status:
    def __init__(
        self,
        loaded: LoadedConfig,
        slot: BackendSlot,
        sessions: Sessions,
        recall: Recall,
        capture_stats: CaptureStats,
        log_file: Path | None,
        learning: Learning,
        catch_up: CatchUp | None,
    ) -> None:
        self._learning = learning
        self._loaded = loaded
        self._slot = slot
        self._sessions = sessions
        self._recall = recall
        self._capture_stats = capture_stats
        self._log_file = log_file
        self.catch_up = catch_up

    async def report(self, pi_session_id: str = "") -> StatusReport:
        loaded = self._loaded
        problems = config_problems(loaded)
        sdk = sdk_state()
        install = sdk_install_command()
        missing_sdk = sdk_problems(loaded, sdk.startswith("installed"), install)
        backend_ok, detail, counts = await self._backend_status([] if missing_sdk else problems)
        # the SDK problem is why the backend is down: say it once, with its one fix
        problems += missing_sdk
        detail = detail.replace(install, "the install command above") if missing_sdk else detail
        outbox, queued = await self._outbox_status(problems)
        pause = self._slot.delivery.pause_reason if self._slot.delivery is not None else None
        identity = self._sessions.get(pi_session_id)
        if self.catch_up is not None:
            problems += self.catch_up.problems()
        learning, learning_problems = await describe(self._learning)
        problems += [Problem(what, fix) for what, fix in learning_problems]
        embeddings, embeddings_words = await self._embeddings_status()
        inspectors = await asyncio.to_thread(inspector_registry.running, os.environ, self._slot.agent_dir)
        return StatusReport(
            version=__version__,
            protocol=PROTOCOL_VERSION,
            enabled=loaded.config.enabled,
            backend=loaded.config.backend,
            backend_ok=backend_ok,
            backend_detail=detail,
            counts=counts,
            identity=describe_identity(identity),
            config_sources=tuple(s.path or s.kind for s in loaded.sources),
            recall_budget=describe_budget(loaded),
            last_recall=describe_last_recall(self._recall.last),
            capture=self._capture_stats.describe(),
            outbox=outbox,
            sdk=sdk,
            log_file=str(self._log_file) if self._log_file else "stderr only",
            problems=tuple(problems),
            embeddings=embeddings,
            catch_up=self.catch_up.status_line() if self.catch_up is not None else "",
            learning=learning,
            session=describe_session(identity),
            recalled=describe_recalled(self._recall.last),
            waiting=describe_waiting(queued, pause)
            if self._slot.delivery is not None
            else "Waiting: nothing (captured turns go straight to the store, or capture is off).",
            learning_words=sentence(self._learning),
            catch_up_words=self.catch_up.status_sentence() if self.catch_up is not None else "",
            embeddings_words=embeddings_words,
            inspector_words=describe_inspectors(inspectors),
        )

    async def _embeddings_status(self) -> tuple[str, str]:
        """The details line and the sentence of search by meaning ("" for a backend without it)."""
        backend = self._slot.backend
        if not isinstance(backend, SearchesByMeaning):
            return "", ""
        status = await asyncio.to_thread(backend.semantic_status)
        if status is None:
            return "", ""
        turns = status.turns.total - status.turns.done if status.turns is not None else None
        memories = status.atomic.total - status.atomic.done if status.atomic is not None else None
        words = describe_embeddings(status.state.value, status.reason, turns, memories)
        return status.describe(), words

    async def _backend_status(self, problems: list[Problem]) -> tuple[bool, str, dict[str, int]]:
        """(ok, detail, counts) of the backend; what is wrong goes into `problems`."""
        slot = self._slot
        if slot.backend is None:
            if not self._loaded.config.enabled:
                return False, "", {}
            detail = slot.backend_error or "not opened"
            problems.append(
                Problem(
                    f"the memory store is unavailable: {detail}",
                    "run `pi-memory-bridge doctor` for the details and fix",
                )
            )
            return False, detail, {}
        try:
            st = await slot.backend.status()
        except BackendError as exc:
            detail = redact_text(str(exc)).text
            problems.append(Problem(f"backend status failed: {detail}", "see the log file"))
            return False, detail, {}
        if st.damaged:
            problems.append(Problem(st.damaged, st.damage_fix or "run `pi-memory-bridge doctor`"))
        problems.extend(Problem(x, "see the log file for details") for x in st.problems)
        return st.ok, st.detail, dict(st.counts)

    async def _outbox_status(self, problems: list[Problem]) -> tuple[str, OutboxCounts | None]:
        """The outbox line of the details and its counts; what is wrong goes into `problems`."""
        slot = self._slot
        if slot.delivery is None:
            if not slot.delivery_error:
                return "off (capture disabled)", None
            problems.append(
                Problem(
                    f"the queue of captured turns cannot be opened: {slot.delivery_error}",
                    "run `pi-memory-bridge doctor`: it names the file at fault and what to do",
                )
            )
            return f"unavailable: {slot.delivery_error}", None
        try:
            queued = await slot.delivery.counts()
        except BackendError as exc:
            line = f"unreadable: {redact_text(str(exc)).text}"
            problems.append(Problem(f"the queue of captured turns is {line}", "see the log file"))
            return line, None
        problems += outbox_problems(queued, slot.delivery.pause_reason)
        return describe_counts(queued, slot.delivery.pause_reason), queued
