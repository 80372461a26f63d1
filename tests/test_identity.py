from hypothesis import given
from hypothesis import strategies as st

from pi_memory_bridge.capture.identity import MAIN_BRANCH, BranchIdentity, EntryLink, derive_branch, turn_id


def chain(*ids: str, parent: str | None = None) -> list[EntryLink]:
    out = []
    for i in ids:
        out.append(EntryLink(i, parent))
        parent = i
    return out


def test_main_path_keeps_one_identity_as_it_grows() -> None:
    entries = chain("a", "b", "c")
    assert derive_branch(entries, "b") == MAIN_BRANCH
    assert derive_branch(entries, "c") == MAIN_BRANCH
    assert derive_branch([*entries, *chain("d", "e", parent="c")], "e") == MAIN_BRANCH


def test_tree_branch_gets_its_own_identity_and_returning_restores_each() -> None:
    main = chain("a", "b", "c", "d")
    # /tree back to "b" and continue: "x" is a later sibling of "c"
    entries = [*main, *chain("x", "y", parent="b")]
    assert derive_branch(entries, "y") == "x"
    assert derive_branch(entries, "d") == MAIN_BRANCH  # back on the original path
    assert derive_branch(entries, "b") == MAIN_BRANCH  # at the branch point itself
    # a second branch from the same point gets yet another identity; the first is unchanged
    entries += chain("p", "q", parent="b")
    assert derive_branch(entries, "q") == "p"
    assert derive_branch(entries, "y") == "x"


def test_nested_branches_take_the_deepest_fork() -> None:
    entries = [*chain("a", "b", "c"), *chain("x", "y", "z", parent="a"), *chain("m", parent="y")]
    assert derive_branch(entries, "m") == "m"
    assert derive_branch(entries, "z") == "x"


def test_unknown_leaf_cycles_and_duplicates_do_not_crash() -> None:
    assert derive_branch([], None) == MAIN_BRANCH
    assert derive_branch([], "ghost") == MAIN_BRANCH
    cyc = [EntryLink("a", "b"), EntryLink("b", "a")]
    assert derive_branch(cyc, "a") in {"a", "b", MAIN_BRANCH}
    dup = [EntryLink("a", None), EntryLink("a", "zzz"), EntryLink("b", "a")]
    assert derive_branch(dup, "b") == MAIN_BRANCH


def test_memory_session_id_is_safe_and_distinct_per_branch() -> None:
    a = BranchIdentity("0193-abc|weird/id", MAIN_BRANCH).memory_session_id
    b = BranchIdentity("0193-abc|weird/id", "1f2e3d4c").memory_session_id
    assert a != b
    assert "|" not in a and "/" not in a


@given(st.text(max_size=50), st.integers(min_value=0, max_value=2**42), st.text(max_size=50))
def test_turn_id_is_deterministic(session: str, ts: int, text: str) -> None:
    assert turn_id(session, ts, text, 0) == turn_id(session, ts, text, 3)
    assert turn_id(session, ts, text, 0) != turn_id(session + "x", ts, text, 0)


def test_labels_and_summaries_are_see_through() -> None:
    # M1 <- label (1st visit) <- label (2nd visit) ... then a new message under the same leaf
    entries = [
        *chain("m1", "m2"),
        EntryLink("lab1", "m2", "label"),
        EntryLink("lab2", "m2", "label"),
        EntryLink("m3", "lab2"),
        EntryLink("sum", "m1", "branch_summary"),
        EntryLink("t1", "sum"),
        EntryLink("cmp", "t1", "compaction"),
        EntryLink("t2", "cmp"),
    ]
    assert derive_branch(entries, "m3") == MAIN_BRANCH  # a second visit does not split the branch
    assert derive_branch(entries, "lab2") == MAIN_BRANCH
    assert derive_branch(entries, "t1") == "t1"  # a branch is named by its first message
    assert derive_branch(entries, "t2") == "t1"  # compaction does not change the identity
    assert derive_branch(entries, "sum") == MAIN_BRANCH  # the summary's own position is m1's
