"""The footer tells the truth over RPC on real Pi (issue 14, item 5): over a turn it goes
ready -> recalled n -> ready, never stuck on "queued", and it comes back after `/new`."""

from __future__ import annotations

from bridge import SHIM, use_bridge
from harness import FakeModel, PiEnv, ScriptedDialogs, TextReply

KEY = "tdai-memory"


def _footers(history: list[tuple[str, str | None]]) -> list[str]:
    """The memory footer's texts in order, repeats folded."""
    out: list[str] = []
    for key, value in history:
        if key == KEY and value is not None and (not out or out[-1] != value):
            out.append(value)
    return out


def test_a_turn_is_ready_recalled_ready_and_new_keeps_the_footer(
    pi_env: PiEnv, fake_model: FakeModel
) -> None:
    use_bridge(pi_env)
    fake_model.script(TextReply("noted"))
    seed = pi_env.run_print(
        ["we always deploy the billing service with the blue pipeline"], extensions=[SHIM]
    )
    assert seed.returncode == 0, seed.stderr

    rpc = pi_env.start_rpc(extensions=[SHIM], dialogs=ScriptedDialogs())
    rpc.wait_until(lambda: rpc.ui.status(KEY) == "memory: ready", timeout=15)
    start = len(rpc.ui.status_history)
    fake_model.script(TextReply("with the blue pipeline"))
    result = rpc.prompt_and_settle("how do we deploy the billing service?")
    assert result.ran
    # the turn's capture is delivered in the background; the footer follows it there (a loaded
    # 2-core machine may take a while to deliver: the bound is generous, the sequence is the point)
    rpc.wait_until(lambda: rpc.ui.status(KEY) == "memory: ready", timeout=45)
    seen = _footers(rpc.ui.status_history[start:])
    assert len(seen) == 2 and seen[0].startswith("memory: recalled ") and seen[1] == "memory: ready", seen
    assert int(seen[0].removeprefix("memory: recalled ")) >= 1
    assert not any("queued" in s for s in seen)

    mark = len(rpc.ui.status_history)
    rpc.request_ok({"type": "new_session"})
    rpc.wait_until(lambda: bool(_footers(rpc.ui.status_history[mark:])), timeout=10)
    assert _footers(rpc.ui.status_history[mark:])[-1] == "memory: ready"
    assert rpc.close() == 0
