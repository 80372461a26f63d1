"""Turn keys by Pi entry id, and `BranchResolver` (many leaves of one session) equal to the
one-leaf walk `derive_branch` used to be, on any tree (cycles and dangling parents included)."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from pi_memory_bridge.capture.identity import (
    MAIN_BRANCH,
    BranchResolver,
    EntryLink,
    derive_branch,
    entry_turn_id,
    user_entry_ids,
)


def reference_branch(entries: Sequence[EntryLink], leaf_id: str | None) -> str:
    """derive_branch as it was before the resolver (the specification)."""
    if leaf_id is None:
        return MAIN_BRANCH
    by_id: dict[str, EntryLink] = {}
    for entry in entries:
        by_id.setdefault(entry.id, entry)

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
    deepest: str | None = None
    seen: set[str] = set()
    node = by_id.get(conversation_ancestor(leaf_id) or "")
    while node is not None and node.id not in seen:
        seen.add(node.id)
        parent = conversation_ancestor(node.parent_id)
        if deepest is None and first_child.get(parent) != node.id:
            deepest = node.id
        node = by_id.get(parent) if parent is not None else None
    return deepest or MAIN_BRANCH


IDS = [f"e{i}" for i in range(12)]
links = st.lists(
    st.builds(
        EntryLink,
        st.sampled_from(IDS),
        st.one_of(st.none(), st.sampled_from([*IDS, "gone"])),
        st.sampled_from(["message", "custom_message", "label", "compaction", "branch_summary"]),
    ),
    max_size=16,
)


@settings(max_examples=400)
@given(links, st.lists(st.sampled_from([*IDS, "gone"]), min_size=1, max_size=6))
def test_the_resolver_answers_every_leaf_as_the_one_leaf_walk_does(
    entries: list[EntryLink], leaves: list[str]
) -> None:
    resolver = BranchResolver(entries)
    for leaf in leaves:  # in any order: remembered answers must not change later ones
        assert resolver.branch(leaf) == reference_branch(entries, leaf) == derive_branch(entries, leaf)


def test_a_long_linear_session_resolves_in_linear_time() -> None:
    chain = [EntryLink(f"n{i}", f"n{i - 1}" if i else None) for i in range(20_000)]
    resolver = BranchResolver(chain)
    assert all(resolver.branch(f"n{i}") == MAIN_BRANCH for i in range(0, 20_000, 7))


def test_entry_keys_depend_on_the_session_and_the_entry_only() -> None:
    key = entry_turn_id("sess-1", "ab12cd34")
    assert key == entry_turn_id("sess-1", "ab12cd34") and len(key) == 32
    assert key != entry_turn_id("sess-2", "ab12cd34") != entry_turn_id("sess-1", "ab12cd35")


def test_a_timestamp_identifies_an_entry_only_when_no_other_user_entry_shares_it() -> None:
    index = user_entry_ids([("a", 1), ("b", 2), ("c", 2), ("d", None), ("a", 1), ("e", 3)])
    assert index == {1: "a", 3: "e"}


def test_live_capture_keys_a_turn_by_the_entry_that_stores_its_user_message() -> None:
    from pi_memory_bridge.capture.identity import BranchIdentity
    from pi_memory_bridge.capture.prepare import live_user_entries, prepare_capture
    from pi_memory_bridge.wire import EntryRef

    def msg(role: str, text: str, ts: int) -> dict[str, object]:
        block = {"type": "text", "text": text}
        extra = {"stopReason": "stop"} if role == "assistant" else {}
        return {"role": role, "content": [block], "timestamp": ts, **extra}

    runs = [
        [
            msg("user", "one", 100),
            msg("assistant", "a", 101),
            msg("user", "two", 200),
            msg("assistant", "b", 201),
        ]
    ]
    refs = [
        EntryRef(id="u1", parent_id=None, type="message", role="user", ts=100),
        EntryRef(id="x1", parent_id="u1", type="message", role="assistant", ts=101),
    ]
    ident = BranchIdentity("sess-9", "main")
    prepared = prepare_capture(runs, aborted=False, identity=ident, user_entries=live_user_entries(refs))
    first, second = prepared.turns
    assert first.turn_id == entry_turn_id("sess-9", "u1")
    # the second prompt's entry was not in the list: the content-derived id, as before entry keys
    assert second.turn_id == prepared.legacy_ids[1] != entry_turn_id("sess-9", "u2")
    assert prepared.legacy_ids[0] != first.turn_id
