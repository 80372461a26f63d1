"""The inspector's pages and actions: HTTP in, `Inspector` calls, escaped HTML out.

Reads are GETs; every change is a POST with the CSRF field, in two steps: the first answers with
a confirmation page saying exactly what will change, the second (carrying `confirm=1`) does it
through the engine call and answers with the same per-item report the commands print. All stored
text is untrusted and reaches the page only through Jinja's autoescaping.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from starlette.applications import Starlette
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from pi_memory_bridge._version import __version__
from pi_memory_bridge.backends.base import AtomicType, BackendError
from pi_memory_bridge.outbox import ALL, RecordState
from pi_memory_bridge.recall.trace import FATE_WORDS
from pi_memory_bridge.redact import redact_text
from pi_memory_bridge.ui.security import CSRF_FIELD, Guard, GuardMiddleware
from pi_memory_bridge.ui.service import Inspector

HERE = Path(__file__).resolve().parent
NAV = (
    ("/", "Overview"),
    ("/memories", "Memories"),
    ("/conversation", "Conversation"),
    ("/notes", "Notes & profile"),
    ("/traces", "Recall traces"),
    ("/learning", "Learning"),
    ("/outbox", "Outbox"),
)
Handler = Callable[[Request], Awaitable[Response]]
# outbox record states as a person reads them
STATE_WORDS = {
    "pending": "waiting",
    "in_flight": "being delivered",
    "dead": "rejected",
    "quarantined": "unreadable",
}


def _when(value: datetime | None) -> str:
    if value is None:
        return "?"
    return value.astimezone().strftime("%Y-%m-%d %H:%M")


def _stamp(value: str) -> str:
    """A raw stored value: an ISO timestamp shown like every other time, anything else as is."""
    if len(value) >= 10 and value[4:5] == "-" and value[7:8] == "-":
        try:
            return _when(datetime.fromisoformat(value))
        except ValueError:
            pass
    return value


def _short(text: str, limit: int = 160) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _score(value: float | None) -> str:
    # keyword scores of a small store are tiny (a word in every memory counts for little)
    if value is None:
        return ""
    return f"{value:.2f}" if abs(value) >= 0.01 else "<0.01"


def _plural(count: int, word: str, many: str = "") -> str:
    return f"{count:,} {word if count == 1 else (many or word + 's')}"


def templates() -> Environment:
    env = Environment(
        loader=FileSystemLoader(HERE / "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(when=_when, short=_short, score=_score, plural=_plural, stamp=_stamp)
    env.globals.update(state_words=STATE_WORDS)
    env.globals.update(nav=NAV, version=__version__, fate_words=FATE_WORDS)
    return env


def _int(value: str | None, default: int = 0) -> int:
    try:
        return max(0, int(value or default))
    except ValueError:
        return default


class Pages:
    def __init__(self, inspector: Inspector, guard: Guard) -> None:
        self.inspector = inspector
        self.guard = guard
        self.env = templates()

    def render(self, request: Request, name: str, status: int = 200, **context: Any) -> HTMLResponse:
        html = self.env.get_template(name).render(
            path=request.url.path, csrf_field=CSRF_FIELD, csrf=self.guard.csrf_token, **context
        )
        return HTMLResponse(html, status_code=status)

    async def form(self, request: Request) -> FormData:
        form = await request.form()
        value = form.get(CSRF_FIELD)
        if not self.guard.csrf_ok(value if isinstance(value, str) else None):
            raise HTTPException(403, "missing or wrong CSRF token: reload the page and try again")
        return form

    def report(
        self, request: Request, title: str, lines: list[str], back: str, back_label: str
    ) -> HTMLResponse:
        ok = all(not line.startswith("FAILED") for line in lines)
        return self.render(
            request, "report.html", title=title, lines=lines, ok=ok, back=back, back_label=back_label
        )

    # --- overview -------------------------------------------------------------------------------

    async def overview(self, request: Request) -> Response:
        return self.render(request, "overview.html", o=await self.inspector.overview())

    # --- memories -------------------------------------------------------------------------------

    async def memories(self, request: Request) -> Response:
        q = request.query_params
        page = await self.inspector.memories(
            query=q.get("q", "").strip()[:2000],
            kind=q.get("kind", ""),
            project=q.get("project", ""),
            include_inactive=q.get("all") == "1",
            offset=_int(q.get("offset")),
        )
        return self.render(request, "memories.html", p=page)

    async def memory(self, request: Request) -> Response:
        memory_id = request.path_params["memory_id"]
        detail = await self.inspector.memory(memory_id)
        if detail is None:
            return self.render(request, "missing.html", 404, what=f"memory {memory_id}")
        return self.render(
            request, "memory.html", d=detail, kinds=_edit_kinds(detail.memory.kind), can_edit=self._can_edit()
        )

    def _can_edit(self) -> bool:
        from pi_memory_bridge.backends.base import Capability

        backend = self.inspector.backend
        return backend is not None and Capability.L1_EDIT in backend.capabilities

    async def memory_edit(self, request: Request) -> Response:
        memory_id = request.path_params["memory_id"]
        form = await self.form(request)
        content, kind = str(form.get("content", "")), str(form.get("kind", ""))
        back = f"/memories/{memory_id}"
        if form.get("confirm") != "1":
            detail = await self.inspector.memory(memory_id)
            if detail is None:
                return self.render(request, "missing.html", 404, what=f"memory {memory_id}")
            return self.render(
                request,
                "confirm_edit.html",
                title="Save this change?",
                before=f"{detail.memory.kind}: {detail.memory.content}",
                after=f"{kind}: {content}",
                action=f"/memories/{memory_id}/edit",
                fields={"content": content, "kind": kind},
                back=back,
            )
        report = await self.inspector.edit(memory_id, content, kind)
        return self.report(request, "Edit", [report.line], back, "Back to the memory")

    # --- conversation ---------------------------------------------------------------------------

    async def conversation(self, request: Request) -> Response:
        q = request.query_params
        page = await self.inspector.conversation(
            session=q.get("session", ""), query=q.get("q", "").strip()[:2000], offset=_int(q.get("offset"))
        )
        return self.render(request, "conversation.html", p=page)

    async def turn(self, request: Request) -> Response:
        turn_id = request.path_params["turn_id"]
        found = await self.inspector.turn(turn_id)
        if found is None:
            return self.render(request, "missing.html", 404, what=f"turn {turn_id}")
        return self.render(request, "turn.html", t=found, tools=_tools(found.tools_json))

    # --- forget ---------------------------------------------------------------------------------

    async def forget(self, request: Request) -> Response:
        form = await self.form(request)
        keys = [str(k) for k in form.getlist("key")]
        back = str(form.get("back", "/")) if str(form.get("back", "/")).startswith("/") else "/"
        chosen, missing = await self.inspector.candidates(keys)
        if form.get("confirm") != "1":
            return self.render(
                request,
                "confirm_forget.html",
                items=[(f"{c.layer}:{c.id}", c.preview()) for c in chosen],
                missing=missing,
                back=back,
            )
        lines = await self.inspector.forget(chosen) if chosen else []
        lines += [f"FAILED  {key}: not found (already forgotten?)" for key in missing]
        return self.report(request, "Forget", lines or ["Nothing chosen: nothing was deleted."], back, "Back")

    # --- notes ----------------------------------------------------------------------------------

    async def notes(self, request: Request) -> Response:
        scenarios, profile, problem = await self.inspector.notes()
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
        note = await self.inspector.note(path) if path else ""
        if isinstance(note, str) and path and "no scenario note" not in note:
            return self.render(request, "missing.html", 404, what=f"note {path}: {note}")
        content = note.content if not isinstance(note, str) else ""
        return self.render(
            request, "note.html", note_path=path, content=content, editable=self.inspector.notes_editable
        )

    async def note_save(self, request: Request) -> Response:
        form = await self.form(request)
        path, content = str(form.get("path", "")).strip(), str(form.get("content", ""))
        back = f"/notes/edit?path={path}" if path else "/notes"
        if form.get("confirm") != "1":
            old = await self.inspector.note(path)
            before = old.content if not isinstance(old, str) else "(a new note)"
            return self.render(
                request,
                "confirm_edit.html",
                title=f"Save the note l2/{path}?",
                before=before,
                after=content,
                action="/notes/save",
                fields={"path": path, "content": content},
                back=back,
            )
        report = await self.inspector.save_note(path, content)
        return self.report(request, "Save note", [report.line], back, "Back to the note")

    async def profile(self, request: Request) -> Response:
        _, profile, problem = await self.inspector.notes()
        return self.render(
            request, "profile.html", profile=profile, problem=problem, editable=self.inspector.notes_editable
        )

    async def profile_save(self, request: Request) -> Response:
        form = await self.form(request)
        content = str(form.get("content", ""))
        if form.get("confirm") != "1":
            _, old, _ = await self.inspector.notes()
            return self.render(
                request,
                "confirm_edit.html",
                title="Save the profile?",
                before=old.content if old is not None else "(no profile yet)",
                after=content,
                action="/profile/save",
                fields={"content": content},
                back="/profile",
            )
        report = await self.inspector.save_profile(content)
        return self.report(request, "Save profile", [report.line], "/profile", "Back to the profile")

    # --- traces ---------------------------------------------------------------------------------

    async def traces(self, request: Request) -> Response:
        traces = await self.inspector.recent_traces(200)
        return self.render(request, "traces.html", traces=traces, problem=self.inspector.traces_error)

    async def trace(self, request: Request) -> Response:
        trace_id = _int(request.path_params["trace_id"], -1)
        found = await self.inspector.trace(trace_id)
        if found is None:
            return self.render(request, "missing.html", 404, what=f"recall trace {trace_id}")
        return self.render(request, "trace.html", s=found)

    async def traces_clear(self, request: Request) -> Response:
        form = await self.form(request)
        if form.get("confirm") != "1":
            return self.render(
                request,
                "confirm.html",
                title="Delete every recall trace?",
                message="The traces say which memories were given to the model for each recent prompt. "
                "Deleting them does not change any memory.",
                action="/traces/clear",
                fields={},
                button="Delete all traces",
                back="/traces",
            )
        line = await self.inspector.clear_traces()
        return self.report(request, "Recall traces", [line], "/traces", "Back to the traces")

    # --- learning -------------------------------------------------------------------------------

    async def learning(self, request: Request) -> Response:
        undo = self.inspector.undo
        if undo is None:
            problem = f"learning works on the local store only (this one is {self.inspector.backend_name})"
            return self.render(request, "learning.html", jobs=[], problem=problem)
        try:
            jobs = await undo.jobs()
        except BackendError as exc:
            return self.render(request, "learning.html", jobs=[], problem=redact_text(str(exc)).text)
        return self.render(request, "learning.html", jobs=jobs, problem="")

    async def learning_undo(self, request: Request) -> Response:
        form = await self.form(request)
        job_id = str(form.get("job", "")).strip()
        undo = self.inspector.undo
        if undo is None:
            return self.report(
                request, "Undo", ["FAILED  learning works on the local store only"], "/learning", "Back"
            )
        plan = await undo.plan(job_id)
        if form.get("confirm") != "1" or plan.refusal:  # nothing to undo: said on the question's page
            return self.render(request, "confirm_undo.html", plan=plan)
        result = await undo.undo(plan)
        return self.report(request, "Undo", list(result.lines), "/learning", "Back to the learning jobs")

    # --- outbox ---------------------------------------------------------------------------------

    async def outbox(self, request: Request) -> Response:
        page = await self.inspector.outbox(request.query_params.get("state", ""))
        return self.render(request, "outbox.html", p=page, states=[s.value for s in RecordState])

    async def outbox_requeue(self, request: Request) -> Response:
        form = await self.form(request)
        ids = ALL if form.get("all") == "1" else _record_ids(form)
        line = await self.inspector.requeue(ids)
        return self.report(request, "Requeue", [line], "/outbox?state=dead", "Back to the outbox")

    async def outbox_purge(self, request: Request) -> Response:
        form = await self.form(request)
        everything = form.get("all") == "1"
        ids = _record_ids(form)
        if form.get("confirm") != "1":
            if self.inspector.delivery is None:
                return self.report(request, "Purge", ["FAILED  the outbox is unavailable"], "/outbox", "Back")
            targets, what = await self.inspector.purge_preview(ALL if everything else ids)
            what = "every rejected and unreadable record" if everything else what
            count = len(targets) if isinstance(targets, list) else None
            if count == 0:
                return self.report(
                    request,
                    "Purge",
                    ["Nothing to purge: no dead or quarantined record chosen."],
                    "/outbox",
                    "Back",
                )
            fields: dict[str, str | list[str]] = {"all": "1"} if everything else {"id": ids}
            return self.render(
                request,
                "confirm.html",
                title=f"Purge {what}?",
                message="They will never be delivered to the memory store. This cannot be undone.",
                action="/outbox/purge",
                fields=fields,
                button="Purge",
                back="/outbox",
            )
        line = await self.inspector.purge(ALL if everything else ids)
        return self.report(request, "Purge", [line], "/outbox", "Back to the outbox")

    async def favicon(self, _request: Request) -> Response:
        return Response(status_code=204)


def _record_ids(form: FormData) -> list[str]:
    """Outbox record ids from `id` fields or from the list's `key` checkboxes (`outbox:<id>`)."""
    ids = [str(v) for v in form.getlist("id")]
    ids += [str(v).removeprefix("outbox:") for v in form.getlist("key") if str(v).startswith("outbox:")]
    return list(dict.fromkeys(i for i in ids if i))


def _edit_kinds(current: str) -> list[str]:
    kinds = [t.value for t in AtomicType]
    return kinds if current in kinds else [current, *kinds]


def _tools(tools_json: str) -> list[dict[str, str]]:
    import json

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


def create_app(
    inspector: Inspector, guard: Guard, on_request: Callable[[], None] | None = None
) -> GuardMiddleware:
    pages = Pages(inspector, guard)
    routes = [
        Route("/", pages.overview),
        Route("/favicon.ico", pages.favicon),
        Route("/memories", pages.memories),
        Route("/memories/{memory_id}", pages.memory),
        Route("/memories/{memory_id}/edit", pages.memory_edit, methods=["POST"]),
        Route("/conversation", pages.conversation),
        Route("/conversation/{turn_id}", pages.turn),
        Route("/forget", pages.forget, methods=["POST"]),
        Route("/notes", pages.notes),
        Route("/notes/edit", pages.note),
        Route("/notes/save", pages.note_save, methods=["POST"]),
        Route("/profile", pages.profile),
        Route("/profile/save", pages.profile_save, methods=["POST"]),
        Route("/traces", pages.traces),
        Route("/traces/clear", pages.traces_clear, methods=["POST"]),
        Route("/traces/{trace_id}", pages.trace),
        Route("/learning", pages.learning),
        Route("/learning/undo", pages.learning_undo, methods=["POST"]),
        Route("/outbox", pages.outbox),
        Route("/outbox/requeue", pages.outbox_requeue, methods=["POST"]),
        Route("/outbox/purge", pages.outbox_purge, methods=["POST"]),
        Mount("/static", app=StaticFiles(directory=HERE / "static"), name="static"),
    ]
    app = Starlette(routes=routes)
    return GuardMiddleware(app, guard, on_request)


__all__ = ["RedirectResponse", "create_app"]
