"""`/tdai-memory` over Pi's RPC mode: a saved memory is listed, edited and forgotten through the
dialogs; `/tdai-memory-pause` stops capture and recall for that project only."""

from __future__ import annotations

import sqlite3
from collections import deque
from pathlib import Path

from bridge import SHIM, data_dir, stored_turns, use_bridge
from harness import Answer, Cancelled, DialogRequest, FakeModel, PiEnv, TextReply, Value


class PickByText:
    """Answers each dialog with the next scripted answer; a select takes the option containing it."""

    def __init__(self, *answers: str | bool) -> None:
        self.answers: deque[str | bool] = deque(answers)
        self.seen: list[DialogRequest] = []

    def __call__(self, request: DialogRequest) -> Answer | None:
        self.seen.append(request)
        if not self.answers:
            return Cancelled()
        want = self.answers.popleft()
        if isinstance(want, bool) and request.options == ["No", "Yes"]:  # a yes/no, starting on No
            return Value("Yes" if want else "No")
        if request.method == "select":
            picked = next((o for o in request.options if str(want) in o), None)
            return Value(picked) if picked is not None else Cancelled()
        return Value(str(want))


def _memories(env: PiEnv) -> list[str]:
    db = data_dir(env) / "memory.sqlite3"
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return [row[0] for row in con.execute("SELECT content FROM atomic ORDER BY id")]
    finally:
        con.close()


def test_the_view_lists_edits_and_forgets_a_saved_memory(pi_env: PiEnv) -> None:
    use_bridge(pi_env)
    saved = pi_env.run_print(["/tdai-memory-remember I prefer tabs in Makefiles"], extensions=[SHIM])
    assert saved.returncode == 0, saved.stderr
    assert _memories(pi_env) == ["I prefer tabs in Makefiles"]

    edit = PickByText(
        "Preferences (1)",
        "prefer tabs",
        "Edit text",
        "I prefer tabs in Makefiles and Go",
        "Back",
        "Back",
        "Close",
    )
    rpc = pi_env.start_rpc(extensions=[SHIM], dialogs=edit)
    rpc.prompt_and_settle("/tdai-memory")
    rpc.wait_until(lambda: not edit.answers, timeout=30)
    rpc.wait_until(lambda: any("1 change" in n.message for n in rpc.ui.notifications), timeout=15)
    menu = edit.seen[0]
    assert menu.method == "select" and "Preferences (1)" in menu.options
    editor = next(d for d in edit.seen if d.method == "editor")
    assert editor.raw.get("prefill") == "I prefer tabs in Makefiles"
    assert any(n.message.startswith("edited") for n in rpc.ui.notifications)
    assert rpc.close() == 0
    assert _memories(pi_env) == ["I prefer tabs in Makefiles and Go"]

    forget = PickByText("Preferences (1)", "Makefiles and Go", "Forget", True, "Close")
    rpc = pi_env.start_rpc(extensions=[SHIM], dialogs=forget)
    rpc.prompt_and_settle("/tdai-memory")
    rpc.wait_until(lambda: any("1 change" in n.message for n in rpc.ui.notifications), timeout=30)
    confirm = next(d for d in forget.seen if d.options == ["No", "Yes"])
    assert confirm.method == "select" and "cannot be undone" in confirm.title
    assert "Makefiles and Go" in confirm.title  # the item, under the question
    assert any("deleted" in n.message for n in rpc.ui.notifications)
    assert rpc.close() == 0
    assert _memories(pi_env) == []


def test_pause_stops_capture_and_recall_for_that_project_only(pi_env: PiEnv, fake_model: FakeModel) -> None:
    use_bridge(pi_env, config={"recall": {"deadlineMs": 15000}})  # a loaded machine must not drop a layer
    fake_model.script(TextReply("Noted: the billing service runs on port 8443."))
    first = pi_env.run_print(["The billing service runs on port 8443."], extensions=[SHIM])
    assert first.returncode == 0, first.stderr
    assert len(stored_turns(pi_env)) == 1
    project_a = pi_env.work_dir
    project_b = pi_env.root / "other-project"
    project_b.mkdir()

    rpc = pi_env.start_rpc(extensions=[SHIM])
    rpc.prompt_and_settle("/tdai-memory-pause")
    rpc.wait_until(lambda: rpc.ui.status("tdai-memory") == "memory: paused for this project", timeout=15)
    fake_model.script(TextReply("ok"))
    rpc.prompt_and_settle("Which port does the billing service use? Also my secret plan is zebra.")
    assert "<recalled_memory" not in fake_model.last_request().recalled_block  # no recall here
    assert rpc.ui.status("tdai-memory") == "memory: paused for this project"
    assert rpc.close() == 0
    assert len(stored_turns(pi_env)) == 1  # nothing captured while paused
    status = pi_env.run_print(["/tdai-memory-status"], extensions=[SHIM])
    assert "paused for this project" in status.stderr and str(Path(project_a).resolve()) in status.stderr

    pi_env.work_dir = project_b  # another project, the same memory: not paused
    try:
        fake_model.script(TextReply("8443"))
        other = pi_env.run_print(["Which port does the billing service use?"], extensions=[SHIM])
        assert other.returncode == 0, other.stderr
        assert "port 8443" in fake_model.last_request().recalled_block  # recalled there
        assert len(stored_turns(pi_env)) == 2  # and captured
    finally:
        pi_env.work_dir = project_a

    resumed = pi_env.run_print(["/tdai-memory-resume"], extensions=[SHIM])
    assert "on again" in resumed.stderr
    fake_model.script(TextReply("8443"))
    pi_env.run_print(["Which port does the billing service use?"], extensions=[SHIM])
    assert "port 8443" in fake_model.last_request().recalled_block
    assert len(stored_turns(pi_env)) == 3
