"""The inspector's actions (POSTs only, each read with its CSRF field), in two steps.

Without `confirm=1` an action answers with a question saying exactly what will change; with it,
it makes the change through `ui/actions.py` (or the undo flow) and answers with the same per-item
report the commands print.
"""

from __future__ import annotations

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import Response

from pi_memory_bridge.outbox import ALL
from pi_memory_bridge.ui import actions, reads
from pi_memory_bridge.ui.render import Renderer, Review


def _record_ids(form: FormData) -> list[str]:
    """Outbox record ids from `id` fields or from the list's `key` checkboxes (`outbox:<id>`)."""
    ids = [str(v) for v in form.getlist("id")]
    ids += [str(v).removeprefix("outbox:") for v in form.getlist("key") if str(v).startswith("outbox:")]
    return list(dict.fromkeys(i for i in ids if i))


def _confirmed(form: FormData) -> bool:
    return form.get("confirm") == "1"


class Actions(Renderer):
    async def memory_edit(self, request: Request) -> Response:
        memory_id = request.path_params["memory_id"]
        form = await self.form(request)
        content, kind = str(form.get("content", "")), str(form.get("kind", ""))

        async def review() -> Review | str:
            detail = await reads.memory(self.inspector, memory_id)
            if detail is None:
                return f"memory {memory_id}"
            return Review(
                "Save this change?",
                f"{detail.memory.kind}: {detail.memory.content}",
                f"{kind}: {content}",
                f"/memories/{memory_id}/edit",
                {"content": content, "kind": kind},
            )

        return await self.review_then_save(
            request,
            form,
            review,
            lambda: actions.edit(self.inspector, memory_id, content, kind),
            title="Edit",
            back=f"/memories/{memory_id}",
            back_label="Back to the memory",
        )

    async def note_save(self, request: Request) -> Response:
        form = await self.form(request)
        path, content = str(form.get("path", "")).strip(), str(form.get("content", ""))

        async def review() -> Review:
            old = await reads.note(self.inspector, path)
            before = old.content if not isinstance(old, str) else "(a new note)"
            fields = {"path": path, "content": content}
            return Review(f"Save the note l2/{path}?", before, content, "/notes/save", fields)

        return await self.review_then_save(
            request,
            form,
            review,
            lambda: actions.save_note(self.inspector, path, content),
            title="Save note",
            back=f"/notes/edit?path={path}" if path else "/notes",
            back_label="Back to the note",
        )

    async def profile_save(self, request: Request) -> Response:
        form = await self.form(request)
        content = str(form.get("content", ""))

        async def review() -> Review:
            _, old, _ = await reads.notes(self.inspector)
            before = old.content if old is not None else "(no profile yet)"
            return Review("Save the profile?", before, content, "/profile/save", {"content": content})

        return await self.review_then_save(
            request,
            form,
            review,
            lambda: actions.save_user_profile(self.inspector, content),
            title="Save profile",
            back="/profile",
            back_label="Back to the profile",
        )

    async def forget(self, request: Request) -> Response:
        form = await self.form(request)
        keys = [str(k) for k in form.getlist("key")]
        back = str(form.get("back", "/")) if str(form.get("back", "/")).startswith("/") else "/"
        chosen, missing = await actions.candidates(self.inspector, keys)
        if not _confirmed(form):
            return self.render(
                request,
                "confirm_forget.html",
                items=[(f"{c.layer}:{c.id}", c.preview()) for c in chosen],
                missing=missing,
                back=back,
            )
        lines = await actions.forget(self.inspector, chosen) if chosen else []
        lines += [f"FAILED  {key}: not found (already forgotten?)" for key in missing]
        return self.report(request, "Forget", lines or ["Nothing chosen: nothing was deleted."], back, "Back")

    async def traces_clear(self, request: Request) -> Response:
        form = await self.form(request)
        if not _confirmed(form):
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
        line = await actions.clear_traces(self.inspector)
        return self.report(request, "Recall traces", [line], "/traces", "Back to the traces")

    async def learning_undo(self, request: Request) -> Response:
        form = await self.form(request)
        job_id = str(form.get("job", "")).strip()
        undo = self.inspector.undo
        if undo is None:
            lines = ["FAILED  learning works on the local store only"]
            return self.report(request, "Undo", lines, "/learning", "Back")
        plan = await undo.plan(job_id)
        if not _confirmed(form) or plan.refusal:  # nothing to undo: said on the question's page
            return self.render(request, "confirm_undo.html", plan=plan)
        result = await undo.undo(plan)
        return self.report(request, "Undo", list(result.lines), "/learning", "Back to the learning jobs")

    async def outbox_requeue(self, request: Request) -> Response:
        form = await self.form(request)
        ids = ALL if form.get("all") == "1" else _record_ids(form)
        line = await actions.requeue(self.inspector, ids)
        return self.report(request, "Requeue", [line], "/outbox?state=dead", "Back to the outbox")

    async def outbox_purge(self, request: Request) -> Response:
        form = await self.form(request)
        everything = form.get("all") == "1"
        ids = ALL if everything else _record_ids(form)
        if _confirmed(form):
            line = await actions.purge(self.inspector, ids)
            return self.report(request, "Purge", [line], "/outbox", "Back to the outbox")
        preview = await actions.purge_preview(self.inspector, ids)
        if isinstance(preview, str):
            return self.report(request, "Purge", [preview], "/outbox", "Back")
        targets, what = preview
        if isinstance(targets, list) and not targets:
            lines = ["Nothing to purge: no dead or quarantined record chosen."]
            return self.report(request, "Purge", lines, "/outbox", "Back")
        fields: dict[str, str | list[str]] = {"all": "1"} if everything else {"id": _record_ids(form)}
        return self.render(
            request,
            "confirm.html",
            title=f"Purge {'every rejected and unreadable record' if everything else what}?",
            message="They will never be delivered to the memory store. This cannot be undone.",
            action="/outbox/purge",
            fields=fields,
            button="Purge",
            back="/outbox",
        )
