"""What the MCP tools and resources do, apart from the protocol: arguments in, a `Reply` out.

The same store, config, redaction and pause rules as the Pi extension: the backend the config
selects (opened once, like `pi-memory-bridge search`), recall's own layer fetchers, caps, order
and dedupe for `memory_search`, the hand-save path for `memory_remember` (redacted, duplicate-
free), and forget's search and delete (store, vectors, keyword index, the outbox, recall traces).
Forget is two steps: `forget_preview` remembers the candidates it showed on this connection, and
`forget` deletes only ids from that list, so nothing can be deleted that no one was shown.
"""

from __future__ import annotations

import asyncio
import html
import logging
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from pi_memory_bridge.agents import agent_source, saved_by_agent
from pi_memory_bridge.backends.base import BackendError, BackendRejected, Capability, MemoryBackend
from pi_memory_bridge.config import LoadedConfig, data_dir
from pi_memory_bridge.mcp_server.tools import (
    TOOLS_BY_NAME,
    ForgetArgs,
    ForgetPreviewArgs,
    ListArgs,
    RememberArgs,
    SearchArgs,
    ShowArgs,
)
from pi_memory_bridge.operations import memory_view as view
from pi_memory_bridge.operations.forget import ForgetDeps, delete_candidates, find_candidates
from pi_memory_bridge.operations.pause import ProjectPause
from pi_memory_bridge.outbox.delivery import CaptureDelivery
from pi_memory_bridge.plural import counted
from pi_memory_bridge.project import project_of
from pi_memory_bridge.recall.boundary import escape_field, escape_label
from pi_memory_bridge.recall.budget import dedupe
from pi_memory_bridge.recall.items import LAYER_ORDER, Layer, RecallItem
from pi_memory_bridge.recall.layers import LayerQuery, fetch_l0, fetch_l1, fetch_l2
from pi_memory_bridge.recall.trace_log import TraceLog, open_trace_log
from pi_memory_bridge.redact import redact_text
from pi_memory_bridge.tools.memory import ToolFailure, parse_args, save_refusal, wrap_untrusted
from pi_memory_bridge.vocabulary.forget import ForgetCandidate

log = logging.getLogger(__name__)

# the layers memory_search ranks (the profile is a resource; skills have their own tools in Pi)
SEARCHED = {Layer.L1: fetch_l1, Layer.L2: fetch_l2, Layer.L0: fetch_l0}
SEARCH_CAPS = {
    Layer.L1: Capability.L1_SEARCH,
    Layer.L2: Capability.L2_SCENARIOS,
    Layer.L0: Capability.L0_SEARCH,
}


@dataclass(frozen=True, slots=True)
class Reply:
    """A tool's answer: `text` for the model, `data` as structured content."""

    text: str
    data: dict[str, Any] = field(default_factory=dict)
    is_error: bool = False


def _day(when: datetime | None) -> str | None:
    return when.strftime("%Y-%m-%d") if when else None


def _clean(text: str) -> str:
    return redact_text(text).text


class McpMemory:
    """One MCP connection's view of memory; the store is opened at the first call and kept."""

    def __init__(self, loaded: LoadedConfig, agent_dir: Path, *, agent: str, project_dir: Path) -> None:
        self.loaded = loaded
        self.agent_dir = agent_dir
        self.source = agent_source(agent)
        self._project_dir = project_dir
        self._pause = ProjectPause(agent_dir, project_dir)
        self._backend: MemoryBackend | None = None
        self._problem = ""
        self._delivery: CaptureDelivery | None = None
        self._traces: TraceLog | None = None
        self._opening = asyncio.Lock()
        self._previewed: dict[str, ForgetCandidate] = {}

    # --- project -------------------------------------------------------------------------------

    def use_project(self, folder: Path) -> None:
        """The project the client works in (its first root), for pause and project notes."""
        self._project_dir = folder
        self._pause = ProjectPause(self.agent_dir, folder)

    @property
    def paused_project(self) -> str:
        return self._pause.project

    @property
    def learning_project(self) -> str:
        return project_of(self._project_dir)

    def _paused_reply(self) -> Reply:
        text = (
            f"Memory is paused for {self._pause.project}: nothing is recalled into or saved from this "
            "project until `pi-memory-bridge resume` (or /tdai-memory-resume in Pi). Continue without memory."
        )
        return Reply(text, {"paused": True, "project": self._pause.project})

    # --- store ---------------------------------------------------------------------------------

    async def backend(self) -> MemoryBackend:
        async with self._opening:
            if self._backend is not None:
                return self._backend
            from pi_memory_bridge.backends.factory import open_backend

            try:
                backend = await asyncio.to_thread(open_backend, self.loaded, self.agent_dir)
            except (BackendError, OSError) as exc:
                self._problem = _clean(str(exc))
                raise ToolFailure(f"memory store unavailable: {self._problem}") from None
            start = getattr(backend, "start_background", None)
            if callable(start):
                start()  # embed what is saved here, beside any sidecar (the vector lock decides)
            self._backend = backend
            return backend

    async def _forget_deps(self, backend: MemoryBackend) -> ForgetDeps:
        from pi_memory_bridge.outbox import Outbox

        if self._delivery is None:
            try:
                box = await asyncio.to_thread(Outbox.open, data_dir(self.agent_dir))
                self._delivery = CaptureDelivery(box, lambda _c: None)
            except (BackendError, OSError) as exc:
                log.warning("outbox unavailable for forget: %s", _clean(str(exc)))
        if self._traces is None:
            self._traces = await open_trace_log(data_dir(self.agent_dir))
        delivery, traces = self._delivery, self._traces
        return ForgetDeps(
            backend,
            self._problem,
            search_pending=delivery.search_pending if delivery else None,
            remove_pending=(lambda ids: delivery.remove_pending(ids, backend)) if delivery else None,
            forgotten=traces.scrub_forgotten if traces else None,
        )

    async def close(self) -> None:
        if self._traces is not None:
            self._traces.close()
        if self._delivery is not None:
            await self._delivery.close()
        if self._backend is not None:
            await self._backend.close()

    # --- tools ---------------------------------------------------------------------------------

    async def call(self, name: str, arguments: dict[str, Any]) -> Reply:
        """Run tool `name`; bad arguments and store failures come back as error replies."""
        spec = TOOLS_BY_NAME.get(name)
        if spec is None:
            raise KeyError(name)
        try:
            args = parse_args(spec.args, arguments)
            if isinstance(args, SearchArgs):
                return await self.search(args)
            if isinstance(args, RememberArgs):
                return await self.remember(args)
            if isinstance(args, ListArgs):
                return await self.list_memories(args)
            if isinstance(args, ShowArgs):
                return await self.show(args)
            if isinstance(args, ForgetPreviewArgs):
                return await self.forget_preview(args)
            assert isinstance(args, ForgetArgs)
            return await self.forget(args)
        except ToolFailure as exc:
            return Reply(str(exc), {"error": str(exc)}, is_error=True)
        except BackendError as exc:
            reason = f"memory store failed: {_clean(str(exc))}"
            return Reply(reason, {"error": reason}, is_error=True)

    async def search(self, args: SearchArgs) -> Reply:
        if self._pause.paused():
            return self._paused_reply()
        from pi_memory_bridge.engine.recall import recall_budget

        backend = await self.backend()
        limits = recall_budget(self.loaded).limits
        layers = [
            layer
            for layer in LAYER_ORDER
            if layer in SEARCHED and SEARCH_CAPS[layer] in backend.capabilities and limits.get(layer, 0) > 0
        ]
        found = await asyncio.gather(
            *(
                SEARCHED[layer](backend, LayerQuery(args.query, limits[layer], frozenset()))
                for layer in layers
            ),
            return_exceptions=True,
        )
        # as recall does: a layer that fails is left out and said to be missing, the others answer
        answered: dict[Layer, list[RecallItem]] = {}
        failed: dict[str, str] = {}
        for layer, result in zip(layers, found, strict=True):
            if isinstance(result, BackendError | OSError):
                failed[str(layer)] = _clean(str(result))
            elif isinstance(result, BaseException):
                raise result
            else:
                answered[layer] = result
        if failed and not answered:
            raise ToolFailure("memory search failed: " + "; ".join(f"{k}: {v}" for k, v in failed.items()))
        unique = dedupe(answered)
        ranked = [item for layer in LAYER_ORDER for item in unique.get(layer, [])][: args.limit]
        dates = await self._dates(backend, ranked)
        results = [
            {
                "layer": str(item.layer),
                "ref": f"{item.layer}:{item.source_id}",
                "id": item.source_id,
                "label": html.unescape(item.label),
                "date": dates.get(item.source_id),
                "text": item.plain,
            }
            for item in ranked
        ]
        data: dict[str, Any] = {"untrusted": True, "results": results}
        note = ""
        if failed:
            data["failedLayers"] = failed
            note = f" (not searched, failed: {', '.join(failed)})"
        if not results:
            return Reply(f"No matching memories found{note}.", data)
        lines = [_search_line(item, dates.get(item.source_id)) for item in ranked]
        if note:
            lines.append(escape_field(f"Partial results{note}."))
        return Reply(wrap_untrusted(lines), data)

    async def _dates(self, backend: MemoryBackend, items: list[RecallItem]) -> dict[str, str | None]:
        """When each L1 memory was last changed and each L0 turn was said."""
        dates: dict[str, str | None] = {}
        l1 = [i.source_id for i in items if i.layer is Layer.L1]
        if l1 and Capability.L1_LIST in backend.capabilities:
            for m in await backend.memories.list(len(l1), 0, None, l1):
                dates[m.id] = _day(m.observed_at or m.updated_at)
        l0 = [i.source_id for i in items if i.layer is Layer.L0]
        if l0 and Capability.L0_LIST in backend.capabilities:
            for t in await backend.conversation.list(len(l0), 0, l0):
                dates[t.turn_id] = _day(t.created_at)
        return dates

    async def remember(self, args: RememberArgs) -> Reply:
        if self._pause.paused():
            return self._paused_reply()
        backend = await self.backend()
        if Capability.L1_SAVE not in backend.capabilities:
            raise ToolFailure(f"the {backend.name} backend does not accept saved memories")
        # another agent's model asks: the same refusal as Pi's save tool (an injection in what that
        # agent read can ask for a save as well as in Pi), with the reason in the structured content
        refusal = save_refusal(args.text)
        if refusal is not None:
            rule, why = refusal
            log.warning("memory_remember from %s refused: %s", self.source, rule)
            return Reply(why, {"refused": rule, "error": why}, is_error=True)
        redacted = redact_text(args.text)
        saved = await backend.memories.save(redacted.text, args.kind.value, self.source)
        verb = "Saved" if saved.created else "Already remembered"
        note = f" ({counted(redacted.count, 'secret')} redacted)" if redacted.count else ""
        data = {"ref": f"L1:{saved.id}", "id": saved.id, "created": saved.created, "redacted": redacted.count}
        return Reply(f"{verb} ({args.kind.value}, L1:{saved.id}): {redacted.text}{note}", data)

    async def list_memories(self, args: ListArgs) -> Reply:
        backend = await self.backend()
        kind = args.kind.value if args.kind else None
        if args.project:
            items = await self._project_memories(backend, kind, args.limit)
        else:
            if Capability.L1_LIST not in backend.capabilities:
                raise ToolFailure(f"the {backend.name} backend cannot list memories; use memory_search")
            items = await view.memories(backend, kind=kind, limit=args.limit)
        if not items:
            return Reply("No memories listed.", {"untrusted": True, "items": []})
        return Reply(
            wrap_untrusted([escape_field(f"{i.ref}  {i.preview(200)}") for i in items]),
            {"untrusted": True, "items": [_item_json(i) for i in items]},
        )

    async def _project_memories(
        self, backend: MemoryBackend, kind: str | None, limit: int
    ) -> list[view.MemoryItem]:
        learning = backend.learning()
        if learning is None:
            raise ToolFailure(f"the {backend.name} backend keeps no project per memory")
        project = self.learning_project
        rows = await asyncio.to_thread(
            learning.memories.active, kinds=(kind,) if kind else (), project=project, limit=5000
        )
        rows = sorted(rows, key=lambda r: r.observed_at, reverse=True)[:limit]
        return [
            view.MemoryItem("L1", r.memory_id, r.kind, _clean(r.text), r.observed_at, r.observed_at, r.origin)
            for r in rows
        ]

    async def show(self, args: ShowArgs) -> Reply:
        backend = await self.backend()
        try:
            item = await view.find(backend, args.ref)
        except BackendRejected:
            item = None
        if item is None:
            raise ToolFailure(
                f"nothing in memory has the ref {args.ref!r} (see memory_list or memory_search)"
            )
        return Reply(
            wrap_untrusted([escape_field(item.full())]), {"untrusted": True, "item": _item_json(item)}
        )

    async def forget_preview(self, args: ForgetPreviewArgs) -> Reply:
        backend = await self.backend()
        found, failures = await find_candidates(await self._forget_deps(backend), args.query)
        candidates = []
        for cand in found:
            key = f"{cand.layer}:{cand.id}"
            self._previewed[key] = cand
            candidates.append(
                {"id": key, "layer": cand.layer, "date": _day(cand.when), "preview": cand.preview()}
            )
        if not candidates:
            text = "Nothing in memory matches; nothing to forget."
            if failures:
                text = "Could not search everything: " + "; ".join(failures)
            return Reply(text, {"candidates": [], "failures": failures}, is_error=bool(failures))
        lines = [f"{c['id']}  {c['preview']}" for c in candidates]
        text = "\n".join(
            [
                f"{counted(len(candidates), 'candidate')}; nothing "
                "was deleted. Ask the user which to forget, then "
                "call memory_forget with exactly those ids:",
                *lines,
                *(f"! {f}" for f in failures),
            ]
        )
        return Reply(text, {"candidates": candidates, "failures": failures})

    def forget_summary(self, arguments: dict[str, Any]) -> list[str] | None:
        """The previews of the previewed ids a `memory_forget` call names (for the client's own
        confirmation), or None when the call would be refused anyway."""
        try:
            args: ForgetArgs = parse_args(ForgetArgs, arguments)
        except ToolFailure:
            return None
        ids = list(dict.fromkeys(args.ids))
        if any(i not in self._previewed for i in ids):
            return None
        return [self._previewed[i].preview() for i in ids]

    async def forget(self, args: ForgetArgs) -> Reply:
        unknown = [i for i in dict.fromkeys(args.ids) if i not in self._previewed]
        if unknown:
            raise ToolFailure(
                f"not candidates from memory_forget_preview on this connection: {', '.join(unknown[:10])}; "
                "nothing was deleted"
            )
        backend = await self.backend()
        chosen = [self._previewed[i] for i in dict.fromkeys(args.ids)]
        lines = await delete_candidates(await self._forget_deps(backend), chosen)
        for cand in chosen:
            self._previewed.pop(f"{cand.layer}:{cand.id}", None)
        failed = [line for line in lines if not line.startswith("deleted")]
        return Reply("\n".join(lines), {"report": lines, "failed": len(failed)}, is_error=bool(failed))

    # --- resources -----------------------------------------------------------------------------

    async def profile_text(self) -> str:
        if self._pause.paused():
            return self._paused_reply().text
        item = await view.profile(await self.backend())
        return wrap_untrusted([escape_field(item.text)]) if item else "No profile yet."

    async def project_text(self) -> str:
        """What memory knows about the current project: its learned notes and its memories."""
        if self._pause.paused():
            return self._paused_reply().text
        backend = await self.backend()
        project = self.learning_project
        parts: list[str] = []
        if Capability.L2_SCENARIOS in backend.capabilities:
            from pi_memory_bridge.learning.notes import project_note_path

            try:
                note = await backend.notes.read_scenario(project_note_path(project))
                parts.append(_clean(note.content).strip())
            except BackendRejected:
                pass  # no notes learned about this project yet
        if not parts and backend.learning() is not None:
            items = await self._project_memories(backend, None, 50)
            parts += [f"- [{i.kind}] {i.text}" for i in items]
        if not parts:
            return f"Nothing is known about the project {project} yet."
        return wrap_untrusted([escape_field(f"Project {project}:"), *(escape_field(p) for p in parts)])


def _search_line(item: RecallItem, day: str | None) -> str:
    """`- [L1 preference 2026-12-01 ref=L1:at-…] text`, continuation lines indented (the label
    and body are escaped already, so no result can close the untrusted wrapper)."""
    ref = escape_label(f"{item.layer}:{item.source_id}")
    head = f"- [{item.layer} {item.label}{' ' + day if day else ''} ref={ref}] "
    return head + item.body.replace("\n", "\n  ")


def _item_json(item: view.MemoryItem) -> dict[str, object]:
    out = item.to_json()
    agent = saved_by_agent(item.source) if item.layer == "L1" else None
    if agent:
        out["savedBy"] = agent
    return out
