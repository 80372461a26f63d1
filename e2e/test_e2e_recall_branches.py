"""What a branch already holds, on real Pi: a recalled memory is not given again while the
block that gave it is in the model's context, and is given again once it is not (`/tree` to
before it, compaction); a `/fork` keeps the blocks it copied."""

from __future__ import annotations

from bridge import SHIM, stored_turns, use_bridge
from harness import FIXTURES_DIR, FakeModel, PiEnv, ScriptedDialogs, TextReply

TREE_EXT = FIXTURES_DIR / "tree-ext"
FACT = "The staging cluster is called kestrel-west-kemub."


def _ask(rpc, fake_model: FakeModel, prompt: str) -> str:  # type: ignore[no-untyped-def]
    """This run's recalled block for `prompt`."""
    assert rpc.prompt_and_settle(prompt).ran
    request = fake_model.requests_containing(prompt)[-1]
    return request.recalled_block


def test_a_branch_gets_a_memory_once_and_again_when_its_block_left(
    pi_env: PiEnv, fake_model: FakeModel
) -> None:
    use_bridge(pi_env, config={"learning": {"enabled": False}, "recall": {"deadlineMs": 10_000}})
    pi_env.write_settings({"compaction": {"keepRecentTokens": 1}})  # so a short session compacts
    seed = pi_env.start_rpc(extensions=[SHIM], dialogs=ScriptedDialogs())
    fake_model.script(TextReply("Noted."))
    assert seed.prompt_and_settle(f"Please remember: {FACT}").ran
    assert seed.close() == 0
    assert any(FACT in t["user_text"] for t in stored_turns(pi_env))

    rpc = pi_env.start_rpc(extensions=[SHIM, TREE_EXT], dialogs=ScriptedDialogs())
    assert FACT in _ask(rpc, fake_model, "one: is kestrel-west-kemub the staging cluster?")
    # the block is in the context: asked again, the memory is not sent again
    assert FACT not in _ask(rpc, fake_model, "two: deploy to kestrel-west-kemub now?")
    assert sum(FACT in b for b in fake_model.last_request().recalled_blocks) == 1

    # /tree to before the first question: its block is off the branch, so the memory comes again
    rpc.prompt_and_settle("/e2e-tree user:one: is kestrel")
    assert FACT in _ask(rpc, fake_model, "three: kestrel-west-kemub, staging or production?")

    # /fork before "four": the fork copies "three" and its block, so nothing is sent again
    rpc.prompt_and_settle("four: and kestrel-west-kemub again?")
    forks = rpc.request_ok({"type": "get_fork_messages"})["data"]["messages"]
    rpc.request_ok({"type": "fork", "entryId": next(m["entryId"] for m in forks if "four:" in m["text"])})
    assert FACT not in _ask(rpc, fake_model, "five: in the fork, kestrel-west-kemub?")
    assert sum(FACT in b for b in fake_model.last_request().recalled_blocks) == 1

    # compaction summarises the blocks away: the next question gets the memory again
    assert rpc.request({"type": "compact"}, timeout=60).get("success"), "Pi did not compact"
    block = _ask(rpc, fake_model, "six: after compaction, kestrel-west-kemub?")
    assert FACT in block
    assert sum(FACT in b for b in fake_model.last_request().recalled_blocks) == 1
    assert rpc.close() == 0
