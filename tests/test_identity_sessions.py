"""Branch identity derived from session files recorded on real Pi 0.84.4 and 1.6.0.

The files in tests/data/pi_sessions/ were written by e2e/record_sessions.py (see the README there).
Each entry is projected as the shim does (`extension-shim/src/entries.ts`), validated as the
sidecar's `EntryRef`, and reduced to `EntryLink`s as `engine.sessions` does. A turn is identified at capture
time: the leaf is the assistant reply and the entry list is the file up to that reply.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pi_memory_bridge.capture.identity import MAIN_BRANCH, BranchIdentity, EntryLink, derive_branch
from pi_memory_bridge.wire import EntryRef

DATA = Path(__file__).parent / "data" / "pi_sessions"
PI_VERSIONS = ("0.84.4", "1.6.0")

Json = dict[str, Any]


def _text(entry: Json) -> str:
    content = entry.get("message", {}).get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content if isinstance(b, dict))
    return ""


def shim_projection(entry: Json) -> Json | None:
    """What `projectEntries` sends for one entry (None: the shim skips it)."""
    if not isinstance(entry.get("id"), str):
        return None
    parent = entry.get("parentId")
    ref: Json = {
        "id": entry["id"],
        "parentId": parent if isinstance(parent, str) else None,
        "type": entry.get("type") if isinstance(entry.get("type"), str) else "",
    }
    message = entry.get("message")
    if (
        entry.get("type") == "message"
        and isinstance(message, dict)
        and isinstance(message.get("timestamp"), int)
    ):
        ref["ts"] = message["timestamp"]
    return ref


@dataclass(frozen=True)
class Session:
    header: Json
    entries: tuple[Json, ...]
    links: tuple[EntryLink, ...]

    @classmethod
    def load(cls, name: str) -> Session:
        path = DATA / name
        lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        header, entries = lines[0], tuple(lines[1:])
        assert header["type"] == "session", f"{name}: first line is not a session header"
        refs = [EntryRef.model_validate(p) for e in entries if (p := shim_projection(e)) is not None]
        return cls(header, entries, tuple(EntryLink(r.id, r.parent_id, r.type) for r in refs))

    def index(self, entry_id: str) -> int:
        return next(i for i, e in enumerate(self.entries) if e["id"] == entry_id)

    def entry(self, entry_id: str) -> Json:
        return self.entries[self.index(entry_id)]

    def user(self, marker: str) -> str:
        found = [
            e["id"]
            for e in self.entries
            if e["type"] == "message" and e["message"]["role"] == "user" and _text(e).startswith(marker + " ")
        ]
        assert len(found) == 1, f"user message {marker}: {len(found)} found"
        return str(found[0])

    def reply(self, marker: str) -> str:
        user_id = self.user(marker)
        return str(next(e["id"] for e in self.entries if e.get("parentId") == user_id))

    def identity_at(self, leaf_id: str) -> str:
        """The identity the sidecar derived when `leaf_id` was the newest entry (capture time)."""
        return derive_branch(self.links[: self.index(leaf_id) + 1], leaf_id)

    def turn_identity(self, marker: str) -> str:
        reply = self.reply(marker)
        assert self.identity_at(self.user(marker)) == self.identity_at(reply)
        return self.identity_at(reply)

    def path_to(self, leaf_id: str) -> list[str]:
        """Entry ids from the root to `leaf_id`."""
        parent_of = {e["id"]: e.get("parentId") for e in self.entries}
        out: list[str | None] = [leaf_id]
        while out[-1] is not None:
            out.append(parent_of[out[-1]])
        return [i for i in reversed(out) if i is not None]

    def of_type(self, entry_type: str) -> list[Json]:
        return [e for e in self.entries if e["type"] == entry_type]


@pytest.fixture(params=PI_VERSIONS, ids=[f"pi{v}" for v in PI_VERSIONS])
def version(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def tree(version: str) -> Session:
    return Session.load(f"tree-{version}.jsonl")


# ---- the recorded tree (see tests/data/pi_sessions/README.md) ---------------------------------


def test_recording_has_the_shapes_the_scenarios_need(tree: Session) -> None:
    assert len(tree.links) == len(tree.entries), "every recorded entry has an id the shim keeps"
    assert len(tree.of_type("compaction")) == 1
    assert len(tree.of_type("branch_summary")) == 2
    labels = tree.of_type("label")
    # /tree onto a user message: the leaf became its parent, and the label went there
    first_nav = labels[0]
    assert first_nav["targetId"] == tree.user("M2")
    assert first_nav["parentId"] == tree.reply("M1")


def test_main_line_is_main_at_every_entry_it_passes(tree: Session) -> None:
    for marker in ("M1", "M2", "M3", "M4", "M5"):
        for entry_id in tree.path_to(tree.reply(marker)):
            assert tree.identity_at(entry_id) == MAIN_BRANCH, (marker, tree.entry(entry_id)["type"])


def test_tree_branch_gets_one_identity_along_its_whole_length(tree: Session) -> None:
    side = tree.turn_identity("S1")
    assert side != MAIN_BRANCH
    # the branch is named by its first conversation entry: labels and summaries are see-through
    assert side == tree.user("S1")
    path = tree.path_to(tree.reply("S4"))
    branch_part = path[path.index(side) :]
    assert len(branch_part) >= 8
    assert {tree.identity_at(i) for i in branch_part} == {side}
    assert {tree.identity_at(i) for i in path[: path.index(tree.reply("M1")) + 1]} == {MAIN_BRANCH}


def test_returning_to_a_branch_restores_its_identity(tree: Session) -> None:
    side = tree.turn_identity("S1")
    assert tree.turn_identity("M4") == MAIN_BRANCH  # back to the original line's end
    assert tree.turn_identity("S3") == side  # back to the side branch's end
    assert tree.turn_identity("S2") == side


def test_branch_off_a_branch_takes_the_deepest_fork(tree: Session) -> None:
    side, nested = tree.turn_identity("S1"), tree.turn_identity("N1")
    assert nested not in (MAIN_BRANCH, side)
    assert nested == tree.user("N1")
    path = tree.path_to(tree.reply("N1"))
    assert tree.reply("S1") in path
    assert side in path  # the outer branch's first entry is on the nested branch's path too
    assert tree.turn_identity("S5") == side  # back to the outer branch's end after its compaction


def test_compaction_keeps_the_identity_of_its_path(tree: Session) -> None:
    (compaction,) = tree.of_type("compaction")
    side = tree.turn_identity("S3")
    assert compaction["parentId"] == tree.reply("S3")
    assert tree.identity_at(compaction["id"]) == side
    assert tree.turn_identity("S4") == side
    assert compaction["id"] in tree.path_to(tree.reply("S4"))


def test_branch_summary_returning_to_a_leaf_stays_on_that_branch(tree: Session) -> None:
    back_to_main = next(s for s in tree.of_type("branch_summary") if s["parentId"] == tree.reply("M4"))
    assert back_to_main["fromId"] == tree.reply("S4")  # it summarises the side branch left behind
    assert tree.identity_at(back_to_main["id"]) == MAIN_BRANCH
    assert tree.turn_identity("M5") == MAIN_BRANCH


def test_branch_summary_that_starts_a_branch_names_it(tree: Session) -> None:
    starts_t = next(s for s in tree.of_type("branch_summary") if s["parentId"] == tree.reply("M1"))
    t_branch = tree.turn_identity("T1")
    assert t_branch == tree.user("T1")  # the summary is see-through; T's first message names it
    assert starts_t["id"] in tree.path_to(tree.reply("T1"))
    assert t_branch not in (MAIN_BRANCH, tree.turn_identity("S1"))


def test_writes_of_different_branches_never_share_an_identity(tree: Session) -> None:
    """Turns were asked on four branches (marker letters M, S, T, N); an identity shared by two
    of them would mix their memories."""
    turns = [e for e in tree.entries if e["type"] == "message" and e["message"]["role"] == "user"]
    markers = [_text(e).split()[0] for e in turns]
    owner: dict[str, str] = {}
    for marker in markers:
        identity = tree.turn_identity(marker)
        branch_letter = marker[0]
        assert owner.setdefault(identity, branch_letter) == branch_letter, (marker, identity)


def test_navigating_back_to_the_same_leaf_twice_keeps_its_identity(tree: Session) -> None:
    # M5 and T1 were each visited twice without a prompt in between, then T2 and M6 were asked
    assert tree.turn_identity("T2") == tree.turn_identity("T1")
    assert tree.turn_identity("M6") == MAIN_BRANCH


def test_a_move_without_label_writes_nothing_and_keeps_the_identity(tree: Session) -> None:
    assert tree.entry(tree.user("M7"))["parentId"] == tree.reply("M6")
    assert tree.turn_identity("M7") == tree.turn_identity("M6")


def test_identity_is_fixed_when_captured(tree: Session) -> None:
    """Entries appended later (siblings, labels, summaries) never re-label an earlier leaf."""
    for entry in tree.entries:
        assert derive_branch(tree.links, entry["id"]) == tree.identity_at(entry["id"])


def test_session_header_and_memory_ids(tree: Session) -> None:
    ident = {
        BranchIdentity(tree.header["id"], tree.turn_identity(m)).memory_session_id
        for m in ("M1", "S1", "T1", "N1")
    }
    assert len(ident) == 4
    assert all(m.startswith("pi-") for m in ident)


# ---- /fork and /clone: separate files with a parentSession header ---------------------------


@pytest.mark.parametrize("kind", ["fork", "clone"])
def test_fork_and_clone_derive_from_their_own_entries(version: str, tree: Session, kind: str) -> None:
    copy = Session.load(f"{kind}-{version}.jsonl")
    assert copy.header["parentSession"]
    assert copy.header["id"] != tree.header["id"]
    marker = "F1" if kind == "fork" else "C1"
    # the copied path ends before M3 and carries a re-emitted label; it is one straight line
    assert {copy.identity_at(e["id"]) for e in copy.entries} == {MAIN_BRANCH}
    assert copy.turn_identity(marker) == MAIN_BRANCH
    assert copy.of_type("label"), "Pi copies the labels of the forked path"
    assert not any(_text(e).startswith("M3 ") for e in copy.entries), "the fork ends before M3"
    main_here = BranchIdentity(copy.header["id"], MAIN_BRANCH).memory_session_id
    main_there = BranchIdentity(tree.header["id"], MAIN_BRANCH).memory_session_id
    assert main_here != main_there


# ---- property: random trees built the way Pi builds them ------------------------------------

_Op = tuple[str, int]  # ("append", _) or ("move", index into the entries so far, -1 = no leaf)


@st.composite
def pi_trees(draw: st.DrawFn) -> tuple[list[EntryLink], list[str]]:
    """Entries appended under a moving leaf (as prompts, labels, summaries and /tree do)."""
    ops = draw(
        st.lists(
            st.tuples(st.sampled_from(["append", "append", "move"]), st.integers(min_value=-1, max_value=60)),
            min_size=1,
            max_size=60,
        )
    )
    entries: list[EntryLink] = []
    leaf: str | None = None
    for kind, pos in [("append", 0), *ops]:  # a Pi session starts with its model_change entry
        if kind == "append":
            new = EntryLink(f"{len(entries):08x}", leaf)
            entries.append(new)
            leaf = new.id
        elif entries:
            leaf = None if pos < 0 else entries[pos % len(entries)].id
    return entries, [e.id for e in entries]


def branch_oracle(entries: Sequence[EntryLink]) -> dict[str, str]:
    """Top-down: a first child (in file order) continues its parent's branch; any later child
    starts its own. Roots continue a virtual root, so the first root is on "main"."""
    seen_children: set[str | None] = set()
    branch: dict[str, str] = {}
    for entry in entries:
        first = entry.parent_id not in seen_children
        seen_children.add(entry.parent_id)
        inherited = MAIN_BRANCH if entry.parent_id is None else branch[entry.parent_id]
        branch[entry.id] = inherited if first else entry.id
    return branch


@given(pi_trees())
def test_same_identity_iff_same_branch(tree_and_ids: tuple[list[EntryLink], list[str]]) -> None:
    entries, ids = tree_and_ids
    oracle = branch_oracle(entries)
    derived = {i: derive_branch(entries, i) for i in ids}
    assert derived == oracle
    for a in ids:
        for b in ids:
            assert (derived[a] == derived[b]) == (oracle[a] == oracle[b])


@given(pi_trees(), st.integers(min_value=0, max_value=59))
def test_identity_depends_only_on_the_entry_list(
    tree_and_ids: tuple[list[EntryLink], list[str]], cut: int
) -> None:
    entries, ids = tree_and_ids
    prefix = entries[: cut % len(entries) + 1]
    for entry in prefix:
        at_capture = derive_branch(prefix, entry.id)
        assert derive_branch(tuple(prefix), entry.id) == at_capture  # no state between calls
        assert derive_branch(entries, entry.id) == at_capture  # later appends change nothing
    # consistent renaming of ids renames identities and nothing else
    rename = {i: f"r{i}" for i in ids}
    renamed = [EntryLink(rename[e.id], None if e.parent_id is None else rename[e.parent_id]) for e in entries]
    for i in ids:
        d = derive_branch(entries, i)
        assert derive_branch(renamed, rename[i]) == (MAIN_BRANCH if d == MAIN_BRANCH else rename[d])
