"""Memory identity of a Pi session branch: a pure function of the session's entries.

Pi's `/tree` keeps every branch in one session file: moving the leaf to an earlier entry and
continuing from there appends a *later sibling* under that point. So a branch is recognisable from
the entries alone, without marker entries:

  * walk the active path from the root to the leaf;
  * the branch identity is the id of the deepest entry on that path that is NOT the first child
    (in file order) of its parent; when every entry is a first child, it is the main path ("main").

Only conversation entries (`message`, `custom_message`) count. Everything else (labels and branch
summaries that navigation appends at the target, compactions, model changes, extension entries)
is see-through: its children hang from its nearest conversation ancestor. Otherwise every visit
to the same leaf would append another child there and split one branch into many identities.

Consequences that the design asks for: the main path keeps one identity however long it grows;
a new branch gets the id of its first entry; going back to any earlier branch, including the
original one, yields the same identity again; restarting, `--continue` and `--session` re-read the
same entries and so restore it; nothing is ever appended to the session. `/fork` and `/clone` start
a new Pi session, so the session part of the id changes.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

MAIN_BRANCH = "main"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


CONVERSATION_TYPES = frozenset({"message", "custom_message"})


@dataclass(frozen=True, slots=True)
class EntryLink:
    id: str
    parent_id: str | None
    type: str = "message"

    @property
    def counts(self) -> bool:
        return self.type in CONVERSATION_TYPES


@dataclass(frozen=True, slots=True)
class BranchIdentity:
    pi_session_id: str
    branch: str  # MAIN_BRANCH or the id of the entry that started the branch

    @property
    def memory_session_id(self) -> str:
        return f"pi-{_segment(self.pi_session_id)}-{_segment(self.branch)}"


def _segment(value: str) -> str:
    cleaned = _UNSAFE.sub("_", value)[:96]
    return cleaned or "unknown"


def derive_branch(entries: Sequence[EntryLink], leaf_id: str | None) -> str:
    """The branch identity of the path ending at `leaf_id` (see the module docstring)."""
    if leaf_id is None:
        return MAIN_BRANCH
    return BranchResolver(entries).branch(leaf_id)


class BranchResolver:
    """`derive_branch` for many leaves of one session: the tree is indexed once, and each entry's
    branch is remembered, so a whole session file resolves in time linear in its size."""

    def __init__(self, entries: Sequence[EntryLink]) -> None:
        self._by_id: dict[str, EntryLink] = {}
        for entry in entries:
            self._by_id.setdefault(entry.id, entry)  # a duplicated id is malformed input; keep the first
        self._ancestor: dict[str | None, str | None] = {}
        self._first_child: dict[str | None, str] = {}
        for entry in self._by_id.values():
            if entry.counts:
                self._first_child.setdefault(self._conversation_ancestor(entry.parent_id), entry.id)
        self._branch: dict[str, str] = {}

    def _conversation_ancestor(self, entry_id: str | None) -> str | None:
        """The nearest entry at or above `entry_id` that counts (or a missing id, or None)."""
        path: list[str | None] = []
        seen: set[str] = set()
        found: str | None = None
        while True:
            if entry_id in self._ancestor:
                found = self._ancestor[entry_id]
                break
            if entry_id is None or entry_id in seen:
                found = None
                break
            node = self._by_id.get(entry_id)
            if node is None or node.counts:
                found = entry_id
                break
            seen.add(entry_id)
            path.append(entry_id)
            entry_id = node.parent_id
        for step in path:
            self._ancestor[step] = found
        return found

    def branch(self, leaf_id: str) -> str:
        """The id of the deepest entry on the path to `leaf_id` that is not the first child of its
        parent, or MAIN_BRANCH."""
        start = self._by_id.get(self._conversation_ancestor(leaf_id) or "")
        path: list[str] = []
        seen: set[str] = set()
        result = MAIN_BRANCH
        node = start
        while node is not None:
            if node.id in self._branch:
                result = self._branch[node.id]
                break
            if node.id in seen:
                break
            seen.add(node.id)
            parent = self._conversation_ancestor(node.parent_id)
            path.append(node.id)
            if self._first_child.get(parent) != node.id:
                result = node.id  # walking leaf-upwards, the first hit is the deepest
                break
            node = self._by_id.get(parent) if parent is not None else None
        for step in path:
            self._branch[step] = result
        return result


def entry_turn_id(pi_session_id: str, user_entry_id: str) -> str:
    """The id of the turn that starts at this user message entry of this Pi session.

    Live capture and catch-up from the session file both find the entry, so the same turn gets
    the same id on either path, whatever the redaction rules or the branch identity say that day.
    """
    material = f"pi-entry\0{pi_session_id}\0{user_entry_id}"
    return hashlib.sha256(material.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def user_entry_ids(user_entries: Iterable[tuple[str, int | None]]) -> dict[int, str]:
    """Message timestamp -> entry id for the user message entries `(entry id, timestamp)` of a
    session, for the timestamps that belong to exactly one entry.

    A live run's user message carries its timestamp but not its entry id; the session entry that
    stores it has both. A timestamp two entries share identifies neither, and those turns keep the
    content-derived `turn_id`; both capture paths apply this same rule, so they still agree.
    """
    found: dict[int, str] = {}
    shared: set[int] = set()
    for entry_id, ts in user_entries:
        if ts is None:
            continue
        if ts in found and found[ts] != entry_id:
            shared.add(ts)
        found.setdefault(ts, entry_id)
    return {ts: entry_id for ts, entry_id in found.items() if ts not in shared}


def turn_id(memory_session_id: str, user_timestamp_ms: int | None, user_text: str, ordinal: int) -> str:
    """A deterministic id for a captured turn whose user message entry is not known, so a
    redelivered turn is recognised as the same (and the id turns had before entry ids)."""
    position = ordinal if user_timestamp_ms is None else 0
    material = f"{memory_session_id}\0{user_timestamp_ms}\0{position}\0{user_text}"
    return hashlib.sha256(material.encode("utf-8", "surrogatepass")).hexdigest()[:32]
