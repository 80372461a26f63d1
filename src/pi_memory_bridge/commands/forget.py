"""`/tdai-memory-forget <query>`: find, preview (redacted), choose, confirm, delete, report.

Nothing is deleted without an explicit "yes" in an interactive dialog (every confirm starts on
No, and the first choice is one by one, never "all"). The finding and deleting is
`operations.forget`, shared with the terminal and the inspector.
"""

from __future__ import annotations

from collections.abc import Sequence

from pi_memory_bridge.operations.forget import ForgetDeps, delete_candidates, find_candidates
from pi_memory_bridge.plural import counted, noun
from pi_memory_bridge.vocabulary.dialog import Cancelled, Dialog, Outcome
from pi_memory_bridge.vocabulary.forget import ForgetCandidate

ALL = "Delete all of them"
CHOOSE = "Choose one by one"
CANCEL = "Cancel"


async def forget_flow(deps: ForgetDeps, query: str, dialog: Dialog) -> Outcome:
    query = query.strip()
    if not query:
        return Outcome("usage: /tdai-memory-forget <words to look for>", "warning")
    found, failures = await find_candidates(deps, query)
    failure_text = "\n".join(f"! {f}" for f in failures)
    if not found:
        if failures:
            return Outcome(f"Could not search everything, so nothing was deleted:\n{failure_text}", "error")
        return Outcome(f"Nothing in memory matches {query!r}.")
    listing = "\n".join(f"{i + 1}. {c.preview()}" for i, c in enumerate(found))
    header = f"{counted(len(found), 'item')} {noun(len(found), 'matches', 'match')} {query!r}:\n{listing}"
    if failures:
        header += f"\n{failure_text}"
    if not dialog.has_ui:
        return Outcome(
            f"{header}\nNo interactive UI here, so nothing was deleted. Run /tdai-memory-forget in "
            "interactive Pi or `pi-memory-bridge forget` in a terminal.",
            "warning",
        )
    try:
        chosen = await _choose(found, header, dialog)
    except Cancelled:
        return Outcome("Cancelled: nothing was deleted.")
    if not chosen:
        return Outcome("Nothing chosen: nothing was deleted.")
    summary = "\n".join(c.preview() for c in chosen)
    if not await dialog.confirm(f"Delete {counted(len(chosen), 'item')}? This cannot be undone.", summary):
        return Outcome("Not confirmed: nothing was deleted.")
    report = await delete_candidates(deps, chosen)
    ok = all(line.startswith("deleted") for line in report)
    return Outcome("\n".join(report), "info" if ok else "error")


async def _choose(found: Sequence[ForgetCandidate], header: str, dialog: Dialog) -> list[ForgetCandidate]:
    """What the user picks; one by one comes first, so deleting all is never the preselection."""
    choice = await dialog.select(
        f"Forget: {counted(len(found), 'item')} {noun(len(found), 'matches', 'match')}",
        [CHOOSE, ALL, CANCEL],
        header,
    )
    if choice == ALL:
        return list(found)
    if choice != CHOOSE:
        raise Cancelled
    return [
        cand
        for i, cand in enumerate(found)
        if await dialog.confirm(f"Forget item {i + 1} of {len(found)}?", cand.preview())
    ]
