"""A pause is honoured when the session files are read later (issue 26 item 3), on both Pi versions:
`/tdai-memory-pause`, say X, `/tdai-memory-resume`, then `pi-memory-bridge import --yes` does not
store X and its preview says why; and turns said while paused that live capture never saw (the
sidecar was not there) are skipped by the next session's catch-up, while the turn after the
resume is caught up."""

from __future__ import annotations

import subprocess
import uuid
from collections import Counter

from bridge import SHIM, SIDECAR, stored_turns, use_bridge
from harness import FakeModel, PiEnv, ScriptedDialogs


def _cli(env: PiEnv, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SIDECAR), *args],
        env=env.environ(),
        cwd=env.work_dir,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _texts(env: PiEnv) -> Counter[str]:
    return Counter(row["user_text"] for row in stored_turns(env))


def test_pause_then_import_keeps_nothing_said_while_paused(pi_env: PiEnv, fake_model: FakeModel) -> None:
    use_bridge(pi_env, config={"learning": {"enabled": False}})
    tag = uuid.uuid4().hex[:6]
    before, paused, after = (
        f"before the pause {tag}",
        f"said while paused zebra {tag}",
        f"after the resume {tag}",
    )
    rpc = pi_env.start_rpc(extensions=[SHIM], dialogs=ScriptedDialogs())
    rpc.prompt_and_settle(before)
    rpc.prompt_and_settle("/tdai-memory-pause")
    rpc.wait_until(lambda: rpc.ui.status("tdai-memory") == "memory: paused for this project", timeout=15)
    rpc.prompt_and_settle(paused)
    rpc.prompt_and_settle("/tdai-memory-resume")
    rpc.prompt_and_settle(after)
    rpc.wait_until(lambda: _texts(pi_env)[after] == 1, timeout=30)
    assert rpc.close() == 0
    assert _texts(pi_env)[paused] == 0  # live capture honoured the pause

    preview = _cli(pi_env, "import")
    assert "1 turn was said while memory was paused for their project; not imported" in preview.stdout
    done = _cli(pi_env, "import", "--yes")
    assert done.returncode == 0, done.stdout + done.stderr
    texts = _texts(pi_env)
    assert texts[paused] == 0, texts
    assert texts[before] == 1 and texts[after] == 1


def test_pause_then_catch_up_skips_what_was_said_while_paused(pi_env: PiEnv, fake_model: FakeModel) -> None:
    use_bridge(pi_env, config={"learning": {"enabled": False}})
    tag = uuid.uuid4().hex[:6]
    first, paused, after = (
        f"memory runs here {tag}",
        f"said while paused zebra {tag}",
        f"after the resume {tag}",
    )
    assert pi_env.run_print([first], extensions=[SHIM]).returncode == 0  # memory ran here from now on
    assert _texts(pi_env)[first] == 1

    assert _cli(pi_env, "pause").returncode == 0
    # Pi without the bridge (its sidecar missing, say): live capture never sees these turns
    assert pi_env.run_print([paused]).returncode == 0
    assert _cli(pi_env, "resume").returncode == 0
    assert pi_env.run_print([after]).returncode == 0

    rpc = pi_env.start_rpc(extensions=[SHIM], dialogs=ScriptedDialogs())
    probe = f"probe {tag}"
    rpc.prompt_and_settle(probe)
    # catch-up runs after the first recall, beside everything else a loaded machine does
    rpc.wait_until(lambda: _texts(pi_env)[probe] == 1 and _texts(pi_env)[after] == 1, timeout=120)
    assert rpc.close() == 0
    texts = _texts(pi_env)
    assert texts[paused] == 0, texts  # catch-up read the file and skipped it
    assert max(texts.values()) == 1
