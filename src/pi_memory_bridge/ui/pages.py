"""The inspector's pages (GETs only): query parameters in, a read from `ui/reads`, HTML out."""

from __future__ import annotations

import json

from starlette.requests import Request
from starlette.responses import Response

from pi_memory_bridge.backends.base import AtomicType, BackendError, Capability
from pi_memory_bridge.outbox import RecordState
from pi_memory_bridge.ui import reads
from pi_memory_bridge.ui.render import Renderer, int_param
from pi_memory_bridge.ui.service import plain


def _edit_kinds(current: str) -> list[str]:
    kinds = [t.value for t in AtomicType]
    return kinds if current in kinds else [current, *kinds]


def _tools(tools_json: str) -> list[dict[str, str]]:
    try:
        parsed = json.loads(tools_json)
    except ValueError:
        return []
    if not isinstance(parsed, list):
        return []
    out = []
    for t in parsed:
        if isinstance(t, dict):
            out.append({k: str(t.get(k, "")) for k in ("toolName", "arguments", "result", "isError")})
    return out


class Pages(Renderer):
    async def overview(self, request: Request) -> Response:
        return self.render(request, "overview.html", o=await reads.overview(self.inspector))

    async def memories(self, request: Request) -> Response:
        q = request.query_params
        page = await reads.memories(
            self.inspector,
            query=q.get("q", "").strip()[:2000],
            kind=q.get("kind", ""),
            project=q.get("project", ""),
            include_inactive=q.get("all") == "1",
            offset=int_param(q.get("offset")),
        )
        return self.render(request, "memories.html", p=page)

    async def memory(self, request: Request) -> Response:
        memory_id = request.path_params["memory_id"]
        detail = await reads.memory(self.inspector, memory_id)
        if detail is None:
            return self.missing(request, f"memory {memory_id}")
        return self.render(
            request,
            "memory.html",
            d=detail,
            kinds=_edit_kinds(detail.memory.kind),
            can_edit=self.inspector.can(Capability.L1_EDIT),
        )

    async def conversation(self, request: Request) -> Response:
        q = request.query_params
        page = await reads.conversation(
            self.inspector,
            session=q.get("session", ""),
            query=q.get("q", "").strip()[:2000],
            offset=int_param(q.get("offset")),
        )
        return self.render(request, "conversation.html", p=page)

    async def turn(self, request: Request) -> Response:
        turn_id = request.path_params["turn_id"]
        found = await reads.turn(self.inspector, turn_id)
        if found is None:
            return self.missing(request, f"turn {turn_id}")
        return self.render(request, "turn.html", t=found, tools=_tools(found.tools_json))

    async def notes(self, request: Request) -> Response:
        scenarios, profile, problem = await reads.notes(self.inspector)
        return self.render(
            request,
            "notes.html",
            scenarios=scenarios,
            profile=profile,
            problem=problem,
            editable=self.inspector.notes_editable,
        )

    async def note(self, request: Request) -> Response:
        path = request.query_params.get("path", "").strip()
        note = await reads.note(self.inspector, path) if path else ""
        if isinstance(note, str) and path and "no scenario note" not in note:
            return self.missing(request, f"note {path}: {note}")
        content = note.content if not isinstance(note, str) else ""
        return self.render(
            request, "note.html", note_path=path, content=content, editable=self.inspector.notes_editable
        )

    async def profile(self, request: Request) -> Response:
        _, profile, problem = await reads.notes(self.inspector)
        return self.render(
            request, "profile.html", profile=profile, problem=problem, editable=self.inspector.notes_editable
        )

    async def traces(self, request: Request) -> Response:
        traces = await reads.recent_traces(self.inspector, 200)
        return self.render(request, "traces.html", traces=traces, problem=self.inspector.traces_error)

    async def trace(self, request: Request) -> Response:
        trace_id = int_param(request.path_params["trace_id"], -1)
        found = await reads.trace(self.inspector, trace_id)
        if found is None:
            return self.missing(request, f"recall trace {trace_id}")
        return self.render(request, "trace.html", s=found)

    async def learning(self, request: Request) -> Response:
        undo = self.inspector.undo
        if undo is None:
            problem = f"learning works on the local store only (this one is {self.inspector.backend_name})"
            return self.render(request, "learning.html", jobs=[], problem=problem)
        try:
            jobs = await undo.jobs()
        except BackendError as exc:
            return self.render(request, "learning.html", jobs=[], problem=plain(exc))
        return self.render(request, "learning.html", jobs=jobs, problem="")

    async def outbox(self, request: Request) -> Response:
        page = await reads.outbox(self.inspector, request.query_params.get("state", ""))
        return self.render(request, "outbox.html", p=page, states=[s.value for s in RecordState])

    async def favicon(self, _request: Request) -> Response:
        return Response(status_code=204)
