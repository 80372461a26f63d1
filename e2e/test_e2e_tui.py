"""Pi's interactive TUI, driven under tmux on both Pi versions: a long report (`/tdai-memory-status`)
stays in the transcript after the next command prints, expands with ctrl+o, and never reaches the model."""

from __future__ import annotations

from bridge import SHIM, use_bridge
from harness import FakeModel, PiEnv, TextReply
from harness.tmux import TmuxPi

STATUS_HEAD = "Memory is on and working."


def test_the_status_report_stays_on_screen_after_the_next_command(
    pi_env: PiEnv, fake_model: FakeModel
) -> None:
    use_bridge(pi_env)
    tui = TmuxPi(pi_env.argv(extensions=[SHIM]), env=pi_env.environ(), cwd=pi_env.work_dir)
    try:
        tui.wait_for(lambda text: "memory: ready" in text, timeout=60)
        tui.type("/tdai-memory-status")
        tui.wait_for(lambda text: STATUS_HEAD in text)
        tui.type("/tdai-memory-forget x")
        after = tui.wait_for(lambda text: "Nothing in memory matches 'x'." in text)
        # the report is still there, above the next command's message, collapsed to its summary
        assert STATUS_HEAD in after and after.index(STATUS_HEAD) < after.index("Nothing in memory matches")
        assert "more lines (expand to see)" in after and "Details (pi-memory-bridge" not in after
        tui.key("C-o")  # Pi's expand key shows the details too
        tui.wait_for(lambda text: "Details (pi-memory-bridge" in text and "log file:" in text)
        fake_model.script(TextReply("All right."))
        tui.type("Just say all right.")
        tui.wait_for(lambda text: "All right." in text)
    finally:
        tui.close()
    # in the transcript, not in the conversation: the model never sees the report
    assert STATUS_HEAD not in fake_model.last_request().all_text
