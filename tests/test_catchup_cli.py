"""`pi-memory-bridge import` as a process: Ctrl-C stops an import for good (no sidecar continues
it), and running it again adds exactly what is left."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

from catchup_files import DATA
from pi_memory_bridge.catchup.runner import CatchUpRunner
from pi_memory_bridge.catchup.state import CatchUpState
from pi_memory_bridge.outbox import Outbox

REPO = Path(__file__).resolve().parents[1]


def _cli(agent: Path, *args: str) -> list[str]:
    exe = REPO / ".venv" / "bin" / "pi-memory-bridge"
    return [str(exe), *args] if exe.exists() else [sys.executable, "-m", "pi_memory_bridge.cli", *args]


def _sessions(agent: Path, files: int) -> int:
    sources = sorted(DATA.glob("tree-*.jsonl"))
    for n in range(files):
        lines = sources[n % len(sources)].read_text(encoding="utf-8").splitlines()
        header = json.loads(lines[0])
        header["id"] = str(uuid.uuid4())
        dest = agent / "sessions" / f"--w{n % 4}--" / f"{n:04d}_{header['id']}.jsonl"
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n", encoding="utf-8")
    return files * 15  # each recorded tree holds 15 settled turns


def test_ctrl_c_stops_an_import_for_good_and_a_second_run_adds_the_rest(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    total = _sessions(agent, 240)
    env = {**os.environ, "PI_CODING_AGENT_DIR": str(agent), "HOME": str(tmp_path)}
    proc = subprocess.Popen(
        _cli(agent, "import", "--yes"),
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    for line in proc.stderr:
        if line.startswith("import: 10/"):
            proc.send_signal(signal.SIGINT)
            break
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "import stopped:" in err
    root = agent / "memory-bridge"
    with CatchUpState.open(root) as state:
        assert state.unfinished_import() is None  # nothing left for a sidecar to continue
    with Outbox.open(root) as box:
        runner = CatchUpRunner(agent_dir=agent, data_dir=root, outbox=box)
        asyncio.run(runner.run_pass())
        assert runner.progress.imported == 0
        partial = len(box.admin.list_entries(limit=10_000))  # queued, not delivered yet
    assert 0 < partial < total
    again = subprocess.run(
        _cli(agent, "import", "--yes"),
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert again.returncode == 0, again.stderr
    assert f"{total - partial} turns in" in again.stdout
    with Outbox.open(root) as box:
        assert box.admin.counts().waiting == 0  # all delivered at the end of the command
