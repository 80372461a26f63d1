"""The inspector's engine room: what each page shows and what each button does, without HTTP.

It opens what a sidecar opens for one agent dir (the configured backend, the shared outbox, the
recall traces) and answers the pages with typed data. Every change is made by the engine call the
commands use: `delete_candidates` (forget), `edit_memory` / `save_scenario` / `save_profile`,
`requeue_records` / `purge_records`; searches are the backend's own (`search_atomic`,
`search_conversation`), the same ones recall and the tools use.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from pi_memory_bridge.backends.base import (
    AtomicType,
    BackendError,
    Capability,
    MemoryBackend,
    Profile,
    ScenarioEntry,
    ScenarioNote,
)
from pi_memory_bridge.backends.factory import open_backend
from pi_memory_bridge.backends.local import LocalBackend
from pi_memory_bridge.backends.local.memories import LearnedMemories
from pi_memory_bridge.commands.forget import ForgetCandidate, ForgetDeps, delete_candidates
from pi_memory_bridge.commands.memory_edit import (
    EditReport,
    NoteWriter,
    edit_memory,
    save_profile,
    save_scenario,
)
from pi_memory_bridge.commands.outbox_ops import (
    describe_counts,
    purge_records,
    purge_targets,
    requeue_records,
)
from pi_memory_bridge.commands.status import Problem, config_problems, outbox_problems, sdk_problems
from pi_memory_bridge.config import LoadedConfig, data_dir, load_config
from pi_memory_bridge.outbox import ALL, AllRecords, OutboxCounts, OutboxEntry, RecordState
from pi_memory_bridge.outbox.delivery import CaptureDelivery
from pi_memory_bridge.recall.trace_log import StoredTrace, TraceLog, TraceLogError
from pi_memory_bridge.redact import redact_text
from pi_memory_bridge.ui.store_view import StoreView, StoreViewError
from pi_memory_bridge.ui.undo import JobUndo
from pi_memory_bridge.ui.views import (
    Learning,
    MemoryDetail,
    MemoryRow,
    Page,
    SessionRow,
    StoreCounts,
    TurnRow,
)

log = logging.getLogger(__name__)

SEARCH_LIMIT = 50
RECENT_MEMORIES = 6
SESSION_LIST = 60
OUTBOX_LIST_LIMIT = 200


def _plain(exc: BaseException) -> str:
    return redact_text(str(exc)).text


@dataclass(frozen=True, slots=True)
class Overview:
    backend: str
    backend_ok: bool
    backend_detail: str
    counts: StoreCounts | None
    recent: tuple[MemoryRow, ...]  # the newest current memories
    backend_counts: dict[str, int]
    profile: Profile | None
    scenarios: tuple[ScenarioEntry, ...]
    outbox: OutboxCounts | None
    outbox_line: str
    learning: Learning
    last_trace: StoredTrace | None
    problems: tuple[Problem, ...]


@dataclass(frozen=True, slots=True)
class MemoriesPage:
    rows: Page[MemoryRow]
    query: str
    kind: str
    project: str
    include_inactive: bool
    kinds: tuple[str, ...]
    projects: tuple[str, ...]
    fields: frozenset[str]
    searched: bool
    can_browse: bool
    can_edit: bool
    problem: str = ""


@dataclass(frozen=True, slots=True)
class ConversationPage:
    turns: Page[TurnRow]
    sessions: tuple[tuple[str, tuple[SessionRow, ...]], ...]  # (pi session, its branches)
    session: str
    query: str
    searched: bool
    can_browse: bool
    problem: str = ""


@dataclass(frozen=True, slots=True)
class OutboxPage:
    counts: OutboxCounts | None
    line: str
    state: str
    entries: tuple[OutboxEntry, ...]
    problem: str = ""


@dataclass
class Inspector:
    loaded: LoadedConfig
    agent_dir: Path
    backend: MemoryBackend | None = None
    backend_error: str = ""
    delivery: CaptureDelivery | None = None
    outbox_error: str = ""
    traces: TraceLog | None = None
    traces_error: str = ""
    store: StoreView | None = None
    store_error: str = ""
    undo: JobUndo | None = None  # the learning page's jobs and their undo (local store only)
    _closed: bool = field(default=False, repr=False)

    # --- lifecycle ------------------------------------------------------------------------------

    @classmethod
    async def open(cls, agent_dir: Path, cwd: Path, env: Mapping[str, str]) -> Inspector:
        loaded = await asyncio.to_thread(
            load_config, agent_dir=agent_dir, cwd=cwd, project_trusted=False, env=env
        )
        self = cls(loaded=loaded, agent_dir=agent_dir)
        root = data_dir(agent_dir)
        try:
            self.backend = await asyncio.to_thread(open_backend, loaded, agent_dir)
        except (BackendError, OSError) as exc:
            self.backend_error = _plain(exc)
        try:
            self.delivery = await CaptureDelivery.open(root, lambda _counts: None)
        except (BackendError, OSError) as exc:
            self.outbox_error = _plain(exc)
        try:
            self.traces = await asyncio.to_thread(TraceLog.open, root)
        except TraceLogError as exc:
            self.traces_error = _plain(exc)
        if isinstance(self.backend, LocalBackend):
            self.undo = JobUndo(LearnedMemories(self.backend.store), self._regenerate_notes)
        if self.backend is not None and self.backend.name == "local":
            try:
                self.store = await asyncio.to_thread(StoreView, root / "memory.sqlite3")
            except StoreViewError as exc:
                self.store_error = _plain(exc)
        else:
            self.store_error = "browsing lists needs the local store; search works on every backend"
        return self

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.store is not None:
            await asyncio.to_thread(self.store.close)
        if self.traces is not None:
            await asyncio.to_thread(self.traces.close)
        if self.delivery is not None:
            await self.delivery.close()
        if self.backend is not None:
            try:
                await self.backend.close()
            except BackendError as exc:
                log.warning("closing the backend: %s", exc)

    async def _regenerate_notes(self) -> None:
        """After an undo the learned profile and notes follow the memories, as Pi's sidecar does."""
        backend = self.backend
        if not self.loaded.config.learning.generate_notes or not isinstance(backend, LocalBackend):
            return
        from pi_memory_bridge.learning.notes import write_generated

        try:
            await asyncio.to_thread(
                write_generated, LearnedMemories(backend.store), backend.notes, backend.root
            )
        except (BackendError, OSError) as exc:
            log.warning("cannot write the learned profile or notes: %s", exc)

    @property
    def backend_name(self) -> str:
        return self.loaded.config.backend

    def forget_deps(self) -> ForgetDeps:
        delivery, backend = self.delivery, self.backend
        return ForgetDeps(
            backend=backend,
            backend_problem=self.backend_error or "not open",
            search_pending=delivery.search_pending if delivery is not None else None,
            remove_pending=(lambda ids: delivery.remove_pending(ids, backend))
            if delivery is not None
            else None,
            forgotten=self.traces.scrub_forgotten if self.traces is not None else None,
        )

    # --- overview -------------------------------------------------------------------------------

    async def overview(self) -> Overview:
        problems = config_problems(self.loaded)
        backend_ok, detail, backend_counts = False, self.backend_error, {}
        profile: Profile | None = None
        scenarios: tuple[ScenarioEntry, ...] = ()
        if self.backend is not None:
            try:
                st = await self.backend.status()
                backend_ok, detail, backend_counts = st.ok, st.detail, dict(st.counts)
                problems += [Problem(p, "see the log file for details") for p in st.problems]
            except BackendError as exc:
                detail = _plain(exc)
                problems.append(Problem(f"the memory store does not answer: {detail}", "see the log file"))
            profile, scenarios = await self._profile_and_notes(problems)
        else:
            problems.append(
                Problem(
                    f"the memory store is unavailable: {self.backend_error}",
                    "run `pi-memory-bridge doctor` for the details and the fix",
                )
            )
        counts = None
        recent: tuple[MemoryRow, ...] = ()
        if self.store is not None:
            try:
                counts = await asyncio.to_thread(self.store.counts)
                recent = (await asyncio.to_thread(self.store.memories, limit=RECENT_MEMORIES)).rows
            except StoreViewError as exc:
                problems.append(Problem(_plain(exc), "see the log file"))
        outbox, line = await self._outbox_counts(problems)
        if self.backend_name == "memorycore":
            from pi_memory_bridge.backends.memorycore import install_command, sdk_available

            problems += sdk_problems(self.loaded, sdk_available(), install_command())
        if self.traces_error:
            problems.append(
                Problem(f"recall traces cannot be read: {self.traces_error}", "delete the file named above")
            )
        last = await self._last_trace()
        return Overview(
            backend=self.backend_name,
            backend_ok=backend_ok,
            backend_detail=detail,
            counts=counts,
            recent=recent,
            backend_counts=backend_counts,
            profile=profile,
            scenarios=scenarios,
            outbox=outbox,
            outbox_line=line,
            learning=await self.learning(),
            last_trace=last,
            problems=tuple(problems),
        )

    async def _profile_and_notes(
        self, problems: list[Problem]
    ) -> tuple[Profile | None, tuple[ScenarioEntry, ...]]:
        assert self.backend is not None
        profile: Profile | None = None
        scenarios: tuple[ScenarioEntry, ...] = ()
        if Capability.L3_PROFILE in self.backend.capabilities:
            try:
                profile = await self.backend.read_profile()
            except BackendError as exc:
                problems.append(
                    Problem(f"the profile cannot be read: {_plain(exc)}", "fix or delete the file")
                )
        if Capability.L2_SCENARIOS in self.backend.capabilities:
            try:
                scenarios = tuple(await self.backend.list_scenarios())
            except BackendError as exc:
                problems.append(
                    Problem(f"the project notes cannot be listed: {_plain(exc)}", "see the log file")
                )
        return profile, scenarios

    async def _outbox_counts(self, problems: list[Problem]) -> tuple[OutboxCounts | None, str]:
        if self.delivery is None:
            problems.append(
                Problem(
                    f"the capture outbox is unavailable: {self.outbox_error}",
                    "check the data directory's permissions and free space",
                )
            )
            return None, f"unavailable: {self.outbox_error}"
        try:
            counts = await self.delivery.counts()
        except BackendError as exc:
            problems.append(Problem(f"the capture outbox is unreadable: {_plain(exc)}", "see the log file"))
            return None, "unreadable"
        problems += outbox_problems(counts, None)
        return counts, describe_counts(counts)

    async def _last_trace(self) -> StoredTrace | None:
        traces = await self.recent_traces(1)
        return traces[0] if traces else None

    # --- L1 -------------------------------------------------------------------------------------

    async def memories(
        self, *, query: str, kind: str, project: str, include_inactive: bool, offset: int
    ) -> MemoriesPage:
        kinds: tuple[str, ...] = ()
        projects: tuple[str, ...] = ()
        fields: frozenset[str] = frozenset()
        problem = self.store_error
        store = self.store
        if store is not None:
            try:
                kinds = await asyncio.to_thread(store.kinds)
                projects = await asyncio.to_thread(store.projects)
                fields = store.l1_fields
            except StoreViewError as exc:
                problem = _plain(exc)
        can_edit = self.backend is not None and Capability.L1_EDIT in self.backend.capabilities
        empty = MemoriesPage(
            rows=Page((), 0, SEARCH_LIMIT, 0),
            query=query,
            kind=kind,
            project=project,
            include_inactive=include_inactive,
            kinds=kinds,
            projects=projects,
            fields=fields,
            searched=bool(query),
            can_browse=store is not None,
            can_edit=can_edit,
            problem=problem,
        )
        if query:
            rows, search_problem = await self._search_memories(query, kind)
            found = Page(tuple(rows), 0, SEARCH_LIMIT, len(rows))
            return replace(empty, rows=found, problem=search_problem or problem)
        if store is None:
            return empty
        try:
            page = await asyncio.to_thread(
                store.memories,
                kind=kind or None,
                project=project or None,
                include_inactive=include_inactive,
                offset=offset,
            )
        except StoreViewError as exc:
            return replace(empty, problem=_plain(exc))
        return replace(empty, rows=page)

    async def _search_memories(self, query: str, kind: str) -> tuple[list[MemoryRow], str]:
        """The backend's own L1 search (what recall and the search tool use), then the store's
        fuller rows for the hits when it has them."""
        backend = self.backend
        if backend is None or Capability.L1_SEARCH not in backend.capabilities:
            return [], f"memory search is unavailable: {self.backend_error or 'not supported'}"
        # the backend filters by the types it knows; kinds a newer store adds are filtered here
        typed = kind if kind in {t.value for t in AtomicType} else None
        try:
            hits = await backend.search_atomic(query, SEARCH_LIMIT, typed)
        except BackendError as exc:
            return [], f"search failed: {_plain(exc)}"
        if kind:
            hits = [h for h in hits if h.type == kind]
        full = await asyncio.to_thread(self.store.memories_by_id, [h.id for h in hits]) if self.store else {}
        rows: list[MemoryRow] = []
        for hit in hits:
            row = full.get(hit.id) or MemoryRow(
                id=hit.id, kind=hit.type, content=hit.content, source=hit.source,
                created_at=hit.created_at, updated_at=hit.updated_at,
            )  # fmt: skip
            rows.append(_with_score(row, hit.score))
        return rows, ""

    async def memory(self, memory_id: str) -> MemoryDetail | None:
        if self.store is None:
            return None
        return await asyncio.to_thread(self.store.memory, memory_id)

    async def edit(self, memory_id: str, content: str, kind: str) -> EditReport:
        if self.backend is None:
            return EditReport(False, False, f"FAILED  [L1 {memory_id}]: the memory store is unavailable")
        return await edit_memory(self.backend, memory_id, content, kind)

    # --- L0 -------------------------------------------------------------------------------------

    async def conversation(self, *, session: str, query: str, offset: int) -> ConversationPage:
        problem = self.store_error
        groups: list[tuple[str, tuple[SessionRow, ...]]] = []
        store = self.store
        if store is not None:
            try:
                sessions = await asyncio.to_thread(store.sessions, limit=SESSION_LIST)
                by_pi: dict[str, list[SessionRow]] = {}
                for s in sessions:
                    by_pi.setdefault(s.pi_session_id or s.memory_session_id, []).append(s)
                groups = [(pi, tuple(rows)) for pi, rows in by_pi.items()]
            except StoreViewError as exc:
                problem = _plain(exc)
        if query:
            turns, search_problem = await self._search_turns(query)
            return ConversationPage(
                Page(tuple(turns), 0, SEARCH_LIMIT, len(turns)), tuple(groups), session, query, True,
                store is not None, search_problem or problem,
            )  # fmt: skip
        if store is None:
            return ConversationPage(Page((), 0, 50, 0), (), session, query, False, False, problem)
        try:
            page = await asyncio.to_thread(store.turns, session=session or None, offset=offset)
        except StoreViewError as exc:
            return ConversationPage(
                Page((), 0, 50, 0), tuple(groups), session, query, False, True, _plain(exc)
            )
        return ConversationPage(page, tuple(groups), session, query, False, True, problem)

    async def _search_turns(self, query: str) -> tuple[list[TurnRow], str]:
        backend = self.backend
        if backend is None or Capability.L0_SEARCH not in backend.capabilities:
            return [], f"conversation search is unavailable: {self.backend_error or 'not supported'}"
        try:
            hits = await backend.search_conversation(query, SEARCH_LIMIT)
        except BackendError as exc:
            return [], f"search failed: {_plain(exc)}"
        full = (
            await asyncio.to_thread(self.store.turns_by_id, [h.turn_id for h in hits]) if self.store else {}
        )
        rows = []
        for h in hits:
            row = full.get(h.turn_id) or TurnRow(
                h.turn_id, h.memory_session_id, "", h.user_text, h.assistant_text, h.created_at
            )
            rows.append(_with_turn_score(row, h.score))
        return rows, ""

    async def turn(self, turn_id: str) -> TurnRow | None:
        if self.store is None:
            return None
        found = await asyncio.to_thread(self.store.turns_by_id, [turn_id])
        return found.get(turn_id)

    # --- L2 / L3 --------------------------------------------------------------------------------

    @property
    def notes_editable(self) -> bool:
        return isinstance(self.backend, NoteWriter)

    async def notes(self) -> tuple[list[ScenarioEntry], Profile | None, str]:
        if self.backend is None:
            return [], None, f"the memory store is unavailable: {self.backend_error}"
        problems: list[Problem] = []
        profile, scenarios = await self._profile_and_notes(problems)
        return list(scenarios), profile, "; ".join(p.what for p in problems)

    async def note(self, path: str) -> ScenarioNote | str:
        if self.backend is None:
            return f"the memory store is unavailable: {self.backend_error}"
        try:
            return await self.backend.read_scenario(path)
        except BackendError as exc:
            return _plain(exc)

    async def save_note(self, path: str, content: str) -> EditReport:
        if self.backend is None:
            return EditReport(False, False, f"FAILED  [L2 {path}]: the memory store is unavailable")
        return await save_scenario(self.backend, path, content)

    async def save_profile(self, content: str) -> EditReport:
        if self.backend is None:
            return EditReport(False, False, "FAILED  [L3 profile]: the memory store is unavailable")
        return await save_profile(self.backend, content)

    # --- forget ---------------------------------------------------------------------------------

    async def candidates(self, keys: Sequence[str]) -> tuple[list[ForgetCandidate], list[str]]:
        """The items behind `layer:id` keys as forget candidates, and the keys not found."""
        wanted: dict[str, list[str]] = {}
        for key in dict.fromkeys(keys):
            layer, _, item_id = key.partition(":")
            wanted.setdefault(layer, []).append(item_id)
        found: list[ForgetCandidate] = []
        missing = [k for k in keys if k.partition(":")[0] not in ("L1", "L0", "outbox")]
        if self.store is not None:
            mems = await asyncio.to_thread(self.store.memories_by_id, wanted.get("L1", []))
            turns = await asyncio.to_thread(self.store.turns_by_id, wanted.get("L0", []))
        else:
            mems, turns = {}, {}
        for memory_id in wanted.get("L1", []):
            m = mems.get(memory_id)
            if m is None:
                missing.append(f"L1:{memory_id}")
            else:
                found.append(ForgetCandidate.for_memory(m.id, m.kind, m.content, m.updated_at))
        for turn_id in wanted.get("L0", []):
            t = turns.get(turn_id)
            if t is None:
                missing.append(f"L0:{turn_id}")
            else:
                found.append(ForgetCandidate.for_turn(t.turn_id, t.user_text, t.assistant_text, t.created_at))
        if wanted.get("outbox"):
            entries = {e.id: e for e in (await self.outbox_entries(None))}
            for record_id in wanted["outbox"]:
                e = entries.get(record_id)
                if e is None or e.turn is None:
                    missing.append(f"outbox:{record_id}")
                else:
                    found.append(
                        ForgetCandidate.for_turn(
                            e.id, e.turn.user_text, e.turn.assistant_text, e.created_at, layer="outbox"
                        )
                    )
        return found, missing

    async def forget(self, chosen: Sequence[ForgetCandidate]) -> list[str]:
        return await delete_candidates(self.forget_deps(), chosen)

    # --- recall traces --------------------------------------------------------------------------

    async def recent_traces(self, limit: int = 50) -> list[StoredTrace]:
        if self.traces is None:
            return []
        try:
            return await asyncio.to_thread(self.traces.recent, limit)
        except TraceLogError as exc:
            self.traces_error = _plain(exc)
            return []

    async def trace(self, trace_id: int) -> StoredTrace | None:
        if self.traces is None:
            return None
        try:
            return await asyncio.to_thread(self.traces.get, trace_id)
        except TraceLogError as exc:
            self.traces_error = _plain(exc)
            return None

    async def clear_traces(self) -> str:
        if self.traces is None:
            return f"FAILED  recall traces are unavailable: {self.traces_error}"
        try:
            gone = await asyncio.to_thread(self.traces.clear)
        except TraceLogError as exc:
            return f"FAILED  {_plain(exc)}"
        return f"deleted {gone} recall trace(s)"

    # --- learning -------------------------------------------------------------------------------

    async def learning(self) -> Learning:
        if self.store is None:
            return Learning(present=False)
        try:
            return await asyncio.to_thread(self.store.learning)
        except StoreViewError as exc:
            return Learning(present=False, problems=(_plain(exc),))

    # --- outbox ---------------------------------------------------------------------------------

    async def outbox_entries(self, state: RecordState | None) -> list[OutboxEntry]:
        if self.delivery is None:
            return []
        return await asyncio.to_thread(self.delivery.outbox.list_entries, state, OUTBOX_LIST_LIMIT)

    async def outbox(self, state: str) -> OutboxPage:
        problems: list[Problem] = []
        counts, line = await self._outbox_counts(problems)
        chosen = RecordState(state) if state in {s.value for s in RecordState} else None
        entries = await self.outbox_entries(chosen) if self.delivery is not None else []
        # the page itself shows the counts; only say what keeps it from showing them
        problem = "" if counts is not None else "; ".join(p.what for p in problems)
        return OutboxPage(counts, line, chosen.value if chosen else "", tuple(entries), problem)

    async def requeue(self, ids: Sequence[str] | AllRecords) -> str:
        if self.delivery is None:
            return f"FAILED  the outbox is unavailable: {self.outbox_error}"
        selection: AllRecords | list[str] = ids if not isinstance(ids, Sequence) else list(ids)
        return await requeue_records(self.delivery.outbox, selection)

    async def purge_preview(self, ids: Sequence[str] | AllRecords) -> tuple[AllRecords | list[str], str]:
        assert self.delivery is not None
        selection: AllRecords | list[str] = ids if not isinstance(ids, Sequence) else list(ids)
        return await purge_targets(self.delivery.outbox, selection)

    async def purge(self, ids: Sequence[str] | AllRecords) -> str:
        if self.delivery is None:
            return f"FAILED  the outbox is unavailable: {self.outbox_error}"
        targets, _ = await self.purge_preview(ids)
        return await purge_records(self.delivery.outbox, targets)


def _with_score(row: MemoryRow, score: float) -> MemoryRow:
    return replace(row, score=score)


def _with_turn_score(row: TurnRow, score: float) -> TurnRow:
    return replace(row, score=score)


__all__ = ["ALL", "ConversationPage", "Inspector", "MemoriesPage", "OutboxPage", "Overview"]
