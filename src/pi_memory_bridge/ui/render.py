"""How the inspector answers: its Jinja environment (autoescaped: all stored text is untrusted),
the filters the templates use, and the shared steps of every handler (render a page, read a form
only with its CSRF field, show a per-item report, ask before a change)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from pi_memory_bridge._version import __version__
from pi_memory_bridge.operations.memory_edit import EditReport
from pi_memory_bridge.recall.trace import FATE_WORDS
from pi_memory_bridge.ui.security import CSRF_FIELD, Guard
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


def int_param(value: str | None, default: int = 0) -> int:
    try:
        return max(0, int(value or default))
    except ValueError:
        return default


@dataclass(frozen=True, slots=True)
class Review:
    """A save's question: the text now and after, and the fields the confirming form carries."""

    title: str
    before: str
    after: str
    action: str
    fields: dict[str, str] = field(default_factory=dict)


class Renderer:
    def __init__(self, inspector: Inspector, guard: Guard, env: Environment) -> None:
        self.inspector = inspector
        self.guard = guard
        self.env = env

    def render(self, request: Request, name: str, status: int = 200, **context: Any) -> HTMLResponse:
        html = self.env.get_template(name).render(
            path=request.url.path, csrf_field=CSRF_FIELD, csrf=self.guard.csrf_token, **context
        )
        return HTMLResponse(html, status_code=status)

    def missing(self, request: Request, what: str) -> HTMLResponse:
        return self.render(request, "missing.html", 404, what=what)

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

    async def review_then_save(
        self,
        request: Request,
        form: FormData,
        review: Callable[[], Awaitable[Review | str]],
        save: Callable[[], Awaitable[EditReport]],
        *,
        title: str,
        back: str,
        back_label: str,
    ) -> Response:
        """The two steps of every save: without `confirm=1` the question (before and after, or a
        404 naming what is missing), with it the save and its report line."""
        if form.get("confirm") != "1":
            asked = await review()
            if isinstance(asked, str):
                return self.missing(request, asked)
            return self.render(
                request,
                "confirm_edit.html",
                title=asked.title,
                before=asked.before,
                after=asked.after,
                action=asked.action,
                fields=asked.fields,
                back=back,
            )
        report = await save()
        return self.report(request, title, [report.line], back, back_label)
