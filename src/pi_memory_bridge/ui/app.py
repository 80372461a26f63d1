"""The inspector's web app: its routes, behind the guard (`ui/security.py`).

Reads are GETs (`ui/pages.py`); every change is a POST with the CSRF field, asked first and then
done through the engine (`ui/page_actions.py`). All stored text is untrusted and reaches the page
only through Jinja's autoescaping (`ui/render.py`).
"""

from __future__ import annotations

from collections.abc import Callable

from starlette.applications import Starlette
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from pi_memory_bridge.ui.page_actions import Actions
from pi_memory_bridge.ui.pages import Pages
from pi_memory_bridge.ui.render import HERE, templates
from pi_memory_bridge.ui.security import Guard, GuardMiddleware
from pi_memory_bridge.ui.service import Inspector


def create_app(
    inspector: Inspector, guard: Guard, on_request: Callable[[], None] | None = None
) -> GuardMiddleware:
    env = templates()
    pages, act = Pages(inspector, guard, env), Actions(inspector, guard, env)
    post = ["POST"]
    routes = [
        Route("/", pages.overview),
        Route("/favicon.ico", pages.favicon),
        Route("/memories", pages.memories),
        Route("/memories/{memory_id}", pages.memory),
        Route("/memories/{memory_id}/edit", act.memory_edit, methods=post),
        Route("/conversation", pages.conversation),
        Route("/conversation/{turn_id}", pages.turn),
        Route("/forget", act.forget, methods=post),
        Route("/notes", pages.notes),
        Route("/notes/edit", pages.note),
        Route("/notes/save", act.note_save, methods=post),
        Route("/profile", pages.profile),
        Route("/profile/save", act.profile_save, methods=post),
        Route("/traces", pages.traces),
        Route("/traces/clear", act.traces_clear, methods=post),
        Route("/traces/{trace_id}", pages.trace),
        Route("/learning", pages.learning),
        Route("/learning/undo", act.learning_undo, methods=post),
        Route("/outbox", pages.outbox),
        Route("/outbox/requeue", act.outbox_requeue, methods=post),
        Route("/outbox/purge", act.outbox_purge, methods=post),
        Mount("/static", app=StaticFiles(directory=HERE / "static"), name="static"),
    ]
    return GuardMiddleware(Starlette(routes=routes), guard, on_request)


__all__ = ["create_app"]
