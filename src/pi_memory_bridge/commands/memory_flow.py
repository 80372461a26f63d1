"""`/tdai-memory [words]`: browse what memory holds, search it, and per item show, edit, forget.

A menu of sections (profile, memories by kind, recent conversation, notes, search), a list per
section, and per item its full text and what can be done with it. Edits go through the backend's
`memories.update` (L1 only, redacted first); forgetting goes through the same code as
`/tdai-memory-forget` and asks first. Without a UI it prints an overview (or the search results)
and changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pi_memory_bridge.backends.base import BackendError, Capability, MemoryBackend
from pi_memory_bridge.operations import memory_view as view
from pi_memory_bridge.operations.forget import ForgetDeps, forget_chosen
from pi_memory_bridge.operations.memory_view import MemoryItem
from pi_memory_bridge.plural import counted
from pi_memory_bridge.redact import redact_text
from pi_memory_bridge.vocabulary.dialog import Cancelled, Dialog, Outcome
from pi_memory_bridge.vocabulary.forget import ForgetCandidate

TITLE = "Memory: what it knows"
PROFILE = "Profile"
SEARCH = "Search…"
CLOSE = "Close"
BACK = "Back"
SHOW = "Show in full"
EDIT = "Edit text"
FORGET = "Forget"
LIST_LIMIT = 30
SUMMARY_ITEMS = 10


def _conversation_label(count: int) -> str:
    return f"Recent conversation ({count}{'+' if count >= view.COUNT_CAP else ''})"


def _menu(ov: view.Overview) -> dict[str, str]:
    """Option label -> section key."""
    options: dict[str, str] = {}
    if ov.profile:
        options[PROFILE] = "profile"
    for kind, count in ov.kinds.items():
        options[view.kind_label(kind, count)] = f"kind:{kind}"
    if ov.conversation:
        options[_conversation_label(ov.conversation)] = "conversation"
    if ov.notes:
        options[f"Notes ({ov.notes})"] = "notes"
    options[SEARCH] = "search"
    options[CLOSE] = "close"
    return options


def _summary(ov: view.Overview) -> str:
    remembered = sum(ov.kinds.values())
    parts = [f"{remembered} memor{'y' if remembered == 1 else 'ies'}"]
    if ov.conversation is not None:
        parts.append(f"{counted(ov.conversation, 'recent turn')}")
    parts.append(f"{counted(ov.notes, 'note')}")
    parts.append("a profile" if ov.profile else "no profile yet")
    text = "Memory holds " + ", ".join(parts) + "."
    if ov.problems:
        text += "\n" + "\n".join(f"! {p}" for p in ov.problems)
    return text


async def _section(backend: MemoryBackend, key: str) -> tuple[str, list[MemoryItem]]:
    if key == "profile":
        found = await view.profile(backend)
        return "Profile", [found] if found else []
    if key.startswith("kind:"):
        kind = key.partition(":")[2]
        return view.kind_label(kind, 0).split(" (")[0], await view.memories(
            backend, kind=kind, limit=LIST_LIMIT
        )
    if key == "conversation":
        return "Recent conversation", await view.conversation(backend, limit=LIST_LIMIT)
    return "Notes", await view.notes(backend)


def _labels(items: Sequence[MemoryItem]) -> list[str]:
    return [f"{i + 1}. {item.preview()}" for i, item in enumerate(items)]


def _actions(backend: MemoryBackend, item: MemoryItem) -> list[str]:
    actions = [SHOW]
    if item.editable and Capability.L1_UPDATE in backend.capabilities:
        actions.append(EDIT)
    deletable = {"L1": Capability.L1_DELETE, "L0": Capability.L0_DELETE}.get(item.layer)
    if deletable is not None and deletable in backend.capabilities:
        actions.append(FORGET)
    return [*actions, BACK]


async def edit_item(backend: MemoryBackend, item: MemoryItem, new_text: str) -> tuple[MemoryItem | None, str]:
    """Write the corrected text of an L1 item (redacted first); the item as stored and a report line."""
    redacted = redact_text(new_text.strip())
    if redacted.text == item.text:
        return item, "unchanged: the text is the same."
    try:
        stored = await backend.memories.update(item.id, redacted.text)
    except BackendError as exc:
        return None, f"FAILED  {item.preview()}: {redact_text(str(exc)).text}"
    updated = view.atomic_item(stored)
    note = f" ({counted(redacted.count, 'secret')} redacted)" if redacted.count else ""
    return updated, f"edited  {updated.preview()}{note}"


async def forget_item(deps: ForgetDeps, item: MemoryItem) -> list[str]:
    when = item.updated_at or item.created_at
    return await forget_chosen(deps, [ForgetCandidate(item.layer, item.id, when, item.text)])


async def _headless(backend: MemoryBackend, query: str) -> str:
    if query:
        return view.render_list(f"Matches for {query!r}", await view.search(backend, query))
    ov = await view.overview(backend)
    recent = await view.search(backend, "", SUMMARY_ITEMS)
    return "\n".join([
        _summary(ov),
        view.render_list("Most recent", recent),
        "Open /tdai-memory in interactive Pi to browse, edit or forget, or use `pi-memory-bridge list` "
        "in a terminal.",
    ])  # fmt: skip


async def memory_flow(
    deps: ForgetDeps, args: str, dialog: Dialog, *, saved: Callable[[], None] = lambda: None
) -> Outcome:
    """`saved` is told of each memory whose text was corrected (its questions went with the old text)."""
    backend = deps.backend
    if backend is None:
        return Outcome(f"Memory is unavailable: {deps.backend_problem}", "error")
    query = args.strip()
    try:
        if not dialog.has_ui:
            return Outcome(await _headless(backend, query))
        changed = await _browse(deps, backend, dialog, query, saved)
    except BackendError as exc:
        return Outcome(f"Memory could not be read: {redact_text(str(exc)).text}", "error")
    return Outcome(f"{counted(changed, 'change')} made." if changed else "")


async def _browse(
    deps: ForgetDeps, backend: MemoryBackend, dialog: Dialog, query: str, saved: Callable[[], None]
) -> int:
    """Three screens, the menu, a list, an item, until the user closes the menu (Escape goes back a
    level); the number of changes made."""
    screen = "list" if query else "menu"
    title, items = (f"Matches for {query!r}", await view.search(backend, query)) if query else ("", [])
    current: MemoryItem | None = None
    note = ""
    changed = 0
    while True:
        try:
            if screen == "menu":
                ov = await view.overview(backend)
                menu = _menu(ov)
                key = menu[
                    await dialog.select(TITLE, list(menu), "\n".join(filter(None, [note, _summary(ov)])))
                ]
                note = ""
                if key == "close":
                    return changed
                if key == "search":
                    try:
                        words = await dialog.input(
                            "Search memory", placeholder="words to look for (empty: the most recent)"
                        )
                    except Cancelled:
                        continue
                    title = f"Matches for {words!r}" if words else "Most recent"
                    items = await view.search(backend, words)
                else:
                    title, items = await _section(backend, key)
                screen = "list"
            elif screen == "list":
                if not items:
                    note, screen = "\n".join(filter(None, [note, f"{title}: nothing here."])), "menu"
                    continue
                labels = _labels(items)
                picked = await dialog.select(f"{title} ({len(items)})", [*labels, BACK], note)
                note = ""
                if picked == BACK:
                    screen = "menu"
                    continue
                current, screen = items[labels.index(picked)], "item"
                note = current.full()
            else:
                assert current is not None
                picked = await dialog.select(current.preview(60), _actions(backend, current), note)
                note = ""
                if picked == SHOW:
                    note = current.full()
                elif picked == EDIT:
                    try:
                        text = await dialog.editor(f"Edit {current.ref}", prefill=current.text)
                    except Cancelled:
                        text = ""
                    if not text.strip():
                        note = "Not changed."
                        continue
                    updated, note = await edit_item(backend, current, text)
                    if updated is not None:
                        if updated is not current:
                            changed += 1
                            saved()
                        items = [updated if i.ref == current.ref else i for i in items]
                        current = updated
                elif picked == FORGET:
                    if not await dialog.confirm("Forget this? This cannot be undone.", current.preview()):
                        note = "Not confirmed: nothing was deleted."
                        continue
                    lines = await forget_item(deps, current)
                    note = "\n".join(lines)
                    if all(line.startswith("deleted") for line in lines):
                        changed += 1
                        items = [i for i in items if i.ref != current.ref]
                    screen = "list"
                else:
                    screen = "list"
        except Cancelled:
            # Escape goes back one level, as Pi's own menus do; from the menu it closes the view
            if screen == "menu":
                return changed
            screen, note = ("menu" if screen == "list" else "list"), ""
