"""Which memory session a Pi session (and its current branch) writes to and reads from."""

from __future__ import annotations

from pi_memory_bridge.capture.identity import BranchIdentity, EntryLink, derive_branch
from pi_memory_bridge.wire import EntryRef, SessionParams, SessionResult


def _links(entries: list[EntryRef]) -> list[EntryLink]:
    return [EntryLink(e.id, e.parent_id, e.type) for e in entries]


class Sessions:
    def __init__(self) -> None:
        self._known: dict[str, BranchIdentity] = {}

    def get(self, pi_session_id: str) -> BranchIdentity | None:
        return self._known.get(pi_session_id)

    def identity_for(
        self, pi_session_id: str, entries: list[EntryRef], leaf_id: str | None
    ) -> BranchIdentity:
        if entries or leaf_id is not None:
            ident = BranchIdentity(pi_session_id, derive_branch(_links(entries), leaf_id))
            self._known[pi_session_id] = ident
            return ident
        ident = self._known.get(pi_session_id) or BranchIdentity(pi_session_id, "main")
        self._known[pi_session_id] = ident
        return ident

    def changed(self, p: SessionParams) -> SessionResult:
        ident = self.identity_for(p.pi_session_id, p.entries, p.leaf_id)
        return SessionResult(memory_session_id=ident.memory_session_id, branch=ident.branch)
