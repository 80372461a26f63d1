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
from collections.abc import Sequence
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
    by_id: dict[str, EntryLink] = {}
    for entry in entries:
        by_id.setdefault(entry.id, entry)  # a duplicated id is malformed input; keep the first

    def conversation_ancestor(entry_id: str | None) -> str | None:
        seen: set[str] = set()
        while entry_id is not None and entry_id not in seen:
            seen.add(entry_id)
            node = by_id.get(entry_id)
            if node is None or node.counts:
                return entry_id
            entry_id = node.parent_id
        return None

    first_child: dict[str | None, str] = {}
    for entry in by_id.values():
        if entry.counts:
            first_child.setdefault(conversation_ancestor(entry.parent_id), entry.id)
    deepest_fork: str | None = None
    seen: set[str] = set()
    node = by_id.get(conversation_ancestor(leaf_id) or "")
    while node is not None and node.id not in seen:
        seen.add(node.id)
        parent = conversation_ancestor(node.parent_id)
        if deepest_fork is None and first_child.get(parent) != node.id:
            deepest_fork = node.id  # walking leaf-upwards, the first hit is the deepest
        node = by_id.get(parent) if parent is not None else None
    return deepest_fork or MAIN_BRANCH


def turn_id(memory_session_id: str, user_timestamp_ms: int | None, user_text: str, ordinal: int) -> str:
    """A deterministic id for a captured turn, so a redelivered turn is recognised as the same."""
    position = ordinal if user_timestamp_ms is None else 0
    material = f"{memory_session_id}\0{user_timestamp_ms}\0{position}\0{user_text}"
    return hashlib.sha256(material.encode("utf-8", "surrogatepass")).hexdigest()[:32]
