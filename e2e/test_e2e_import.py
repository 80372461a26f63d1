"""`pi-memory-bridge import` and `/tdai-memory-import` over session files real Pi wrote: the
recorded trees, forks and clones of both versions (branches, compaction, branch summaries,
labels; tests/data/pi_sessions/), and sessions this test records with Pi before memory is set up.
Every settled turn once; a second import adds nothing; an import SIGKILLed mid-way resumes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from collections import Counter

from bridge import SHIM, SIDECAR, data_dir, stored_turns, use_bridge
from harness import REPO_ROOT, PiEnv, ScriptedDialogs

RECORDED = REPO_ROOT / "tests" / "data" / "pi_sessions"
VERSIONS = ("0.84.4", "1.6.0")
MARKERS = "M1 M2 M3 M4 M5 M6 M7 S1 S2 S3 S4 S5 T1 T2 N1".split()
# the user texts of every settled turn in the recorded files: each tree's, and one each fork/clone
RECORDED_TURNS = Counter({**{f"{m} turn {m.lower()}": 2 for m in MARKERS}, "F1 turn f1": 2, "C1 turn c1": 2})


def _copy_recorded(env: PiEnv, copies: int = 1) -> int:
    """The recorded files into the agent dir (each copy a session of its own); files written."""
    n = 0
    for copy in range(copies):
        for version in VERSIONS:
            for kind in ("tree", "fork", "clone"):
                lines = (RECORDED / f"{kind}-{version}.jsonl").read_text(encoding="utf-8").splitlines()
                header = json.loads(lines[0])
                if copies > 1:
                    header["id"] = str(uuid.uuid4())
                dest = env.sessions_dir / f"--recorded-{copy}--" / f"{kind}-{version}_{header['id']}.jsonl"
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n", encoding="utf-8")
                n += 1
    return n


def _import(env: PiEnv, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SIDECAR), "import", *args],
        env=env.environ(),
        cwd=env.work_dir,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _texts(env: PiEnv) -> Counter[str]:
    return Counter(row["user_text"] for row in stored_turns(env))


def test_import_stores_every_settled_turn_once_and_a_second_import_adds_nothing(pi_env: PiEnv) -> None:
    # sessions from before memory was set up, recorded now by this Pi (no extension loaded)
    said = [f"before memory {n} {uuid.uuid4().hex[:6]}" for n in range(3)]
    assert pi_env.run_print(said[:2]).returncode == 0  # two prompts, one session
    assert pi_env.run_print([said[2]], extra_args=["--continue"]).returncode == 0  # the same session
    tool = f'CALL_TOOL bash {{"command": "echo imported-{uuid.uuid4().hex[:6]}"}}'
    assert pi_env.run_print([tool]).returncode == 0
    _copy_recorded(pi_env)
    use_bridge(pi_env)
    expected = RECORDED_TURNS + Counter({**dict.fromkeys(said, 1), tool: 1})

    preview = _import(pi_env)
    assert preview.returncode == 1, preview.stderr
    assert f"{sum(expected.values())} turns in 8 sessions to add" in preview.stdout
    assert "nothing imported" in preview.stdout and not stored_turns(pi_env)  # no terminal, no --yes

    done = _import(pi_env, "--yes")
    assert done.returncode == 0, done.stderr
    assert _texts(pi_env) == expected
    (tool_row,) = [r for r in stored_turns(pi_env) if r["user_text"] == tool]
    assert json.loads(tool_row["tools_json"])[0]["toolName"] == "bash"
    by_marker = {r["user_text"].split()[0]: r["memory_session_id"] for r in stored_turns(pi_env)}
    assert by_marker["S1"] != by_marker["M1"] != by_marker["T1"]  # branches keep their identities

    again = _import(pi_env, "--yes")
    assert again.returncode == 0 and "nothing to import" in again.stdout
    assert f"{sum(expected.values())} turns are already in memory" in again.stdout
    assert _texts(pi_env) == expected

    # the sidecar that starts next leaves them alone too: they are from before memory ran here
    rpc = pi_env.start_rpc(extensions=[SHIM], dialogs=ScriptedDialogs())
    rpc.prompt_and_settle("hello after the import")
    rpc.wait_until(lambda: _texts(pi_env)["hello after the import"] == 1, timeout=30)
    assert rpc.close() == 0
    assert _texts(pi_env) == expected + Counter({"hello after the import": 1})


def test_an_import_killed_mid_way_resumes_where_it_stopped(pi_env: PiEnv) -> None:
    files = _copy_recorded(pi_env, copies=60)
    use_bridge(pi_env)
    total = sum(RECORDED_TURNS.values()) * 60
    proc = subprocess.Popen(
        [str(SIDECAR), "import", "--yes"],
        env=pi_env.environ(),
        cwd=pi_env.work_dir,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    progress = ""
    for line in proc.stderr:
        if line.startswith("import: 20/"):
            progress = line
            proc.send_signal(signal.SIGKILL)
            break
    proc.wait(timeout=30)
    assert progress and proc.returncode == -signal.SIGKILL, progress
    partial = len(stored_turns(pi_env))
    assert partial < total

    resumed = _import(pi_env, "--yes", timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming an interrupted import" in resumed.stdout
    rows = stored_turns(pi_env)
    assert len(rows) == total == len({r["turn_id"] for r in rows})
    assert files == 360
    assert "nothing to import" in _import(pi_env, "--yes").stdout


def test_the_pi_command_previews_asks_and_imports(pi_env: PiEnv) -> None:
    _copy_recorded(pi_env)
    use_bridge(pi_env)
    root = data_dir(pi_env)
    # memory ran here from now on: the recorded sessions are older, so only an import takes them
    root.mkdir(parents=True, exist_ok=True)
    (root / "capture-since").write_text(f"{int(time.time() * 1000)}\n", encoding="ascii")
    os.chmod(root / "capture-since", 0o600)
    dialogs = ScriptedDialogs()
    rpc = pi_env.start_rpc(extensions=[SHIM], dialogs=dialogs)
    rpc.prompt_and_settle("/tdai-memory-import")  # no answer scripted: the dialog is cancelled
    rpc.wait_until(lambda: any("import cancelled" in n.message for n in rpc.ui.notifications), timeout=30)
    # a yes/no is a choice that starts on No, its title the question and the preview below it
    (confirm,) = [d for d in rpc.ui.dialogs if d.request.options == ["No", "Yes"]]
    assert confirm.request.method == "select"
    question, _, preview = confirm.request.title.partition("\n")
    assert f"Import {sum(RECORDED_TURNS.values())} turns from 6 sessions" in question
    assert "in 6 sessions" in preview
    assert not stored_turns(pi_env)
    dialogs.select("Yes")
    rpc.prompt_and_settle("/tdai-memory-import")
    rpc.wait_until(lambda: _texts(pi_env) == RECORDED_TURNS, timeout=60)
    assert rpc.close() == 0
