"""Branch identities on real Pi: `/tree` branches capture under their own memory identity, going
back restores the earlier one (also after a restart with --session), `/fork` starts a new one."""

from __future__ import annotations

from bridge import SHIM, stored_turns, use_bridge
from harness import FIXTURES_DIR, PiEnv, ScriptedDialogs

TREE_EXT = FIXTURES_DIR / "tree-ext"


def identity_of(env: PiEnv, marker: str) -> str:
    rows = [t for t in stored_turns(env) if marker in t["user_text"]]
    assert len(rows) == 1, f"{marker}: {len(rows)} rows"
    return str(rows[0]["memory_session_id"])


def wait_captured(env: PiEnv, rpc, marker: str) -> str:  # type: ignore[no-untyped-def]
    rpc.wait_until(lambda: any(marker in t["user_text"] for t in stored_turns(env)), timeout=15)
    return identity_of(env, marker)


def test_tree_branches_fork_and_restart(pi_env: PiEnv) -> None:
    use_bridge(pi_env)
    rpc = pi_env.start_rpc(extensions=[SHIM, TREE_EXT], dialogs=ScriptedDialogs())
    rpc.prompt_and_settle("alpha-one: the main line")
    main = wait_captured(pi_env, rpc, "alpha-one")
    rpc.prompt_and_settle("alpha-two: still the main line")
    assert wait_captured(pi_env, rpc, "alpha-two") == main

    rpc.prompt_and_settle("/e2e-tree user:alpha-two")  # branch off before alpha-two
    rpc.prompt_and_settle("beta-one: a side branch")
    beta = wait_captured(pi_env, rpc, "beta-one")
    assert beta != main

    rpc.prompt_and_settle("/e2e-tree at:alpha-two")  # back to the original branch
    rpc.prompt_and_settle("alpha-three: back on the main line")
    assert wait_captured(pi_env, rpc, "alpha-three") == main

    rpc.prompt_and_settle("/e2e-tree at:beta-one")  # and back to the side branch
    rpc.prompt_and_settle("beta-two: side branch again")
    assert wait_captured(pi_env, rpc, "beta-two") == beta
    session_id = rpc.get_state()["sessionId"]
    assert rpc.close() == 0

    # a new process on the same session file: identities are derived again from the entries
    rpc = pi_env.start_rpc(
        extensions=[SHIM, TREE_EXT], dialogs=ScriptedDialogs(), extra_args=["--session", session_id]
    )
    rpc.prompt_and_settle("/e2e-tree at:alpha-three")
    rpc.prompt_and_settle("alpha-four: main line after a restart")
    assert wait_captured(pi_env, rpc, "alpha-four") == main
    rpc.prompt_and_settle("/e2e-tree at:beta-two")
    rpc.prompt_and_settle("beta-three: side branch after a restart")
    assert wait_captured(pi_env, rpc, "beta-three") == beta

    # /fork makes a new Pi session: a new identity
    entries = rpc.request_ok({"type": "get_fork_messages"})["data"]["messages"]
    target = next(m["entryId"] for m in entries if "alpha-two" in m["text"])
    rpc.request_ok({"type": "fork", "entryId": target})
    rpc.prompt_and_settle("gamma-one: in the fork")
    gamma = wait_captured(pi_env, rpc, "gamma-one")
    assert gamma not in (main, beta)
    assert rpc.close() == 0

    markers = {t["user_text"].split(":")[0] for t in stored_turns(pi_env)}
    assert markers == {
        "alpha-one",
        "alpha-two",
        "beta-one",
        "alpha-three",
        "beta-two",
        "alpha-four",
        "beta-three",
        "gamma-one",
    }
