"""The real `pi-memory-bridge` command ends with one line, never a traceback, when stdin is closed
(`forget x </dev/null`) or the user presses Ctrl-C (SIGINT) at a prompt; nothing is deleted."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pi_memory_bridge.backends.base import ConversationTurn
from pi_memory_bridge.backends.local import LocalBackend
from pi_memory_bridge.outbox import Outbox
from sidecar_client import REPO
from waiting import wait_until

CLI = REPO / ".venv" / "bin" / "pi-memory-bridge"
WHEN = datetime(2026, 11, 1, tzinfo=UTC)


@pytest.fixture
def agent(tmp_path: Path) -> Path:
    agent = tmp_path / "agent"
    data = agent / "memory-bridge"
    backend = LocalBackend(data)
    backend.store.conversation.add([ConversationTurn("t1", "s", "the billing cluster is blue", "ok", WHEN)])
    asyncio.run(backend.close())
    box = Outbox.open(data)
    box.enqueue([ConversationTurn("q1", "s", "queued billing turn", "ok", WHEN)])
    for _ in range(2):  # rejected for good twice: dead, so `outbox purge all` has something to ask about
        claim = box.claims.claim(limit=1, ignore_backoff=True)
        assert claim is not None
        box.claims.reject(claim, "400 bad request", max_rejections=2, delay_s=0)
    box.close()
    return agent


def _env(agent: Path) -> dict[str, str]:
    return {**os.environ, "PI_CODING_AGENT_DIR": str(agent), "HOME": str(agent.parent)}


def _counts(agent: Path) -> tuple[int, int]:
    backend = LocalBackend(agent / "memory-bridge")
    turns = asyncio.run(backend.status()).counts["turns"]
    asyncio.run(backend.close())
    with Outbox.open(agent / "memory-bridge") as box:
        dead = box.admin.counts().dead
    return turns, dead


@pytest.mark.parametrize("args", [["forget", "billing"], ["outbox", "purge", "all"]])
def test_eof_at_a_prompt_is_one_line_and_a_non_zero_exit(agent: Path, args: list[str]) -> None:
    done = subprocess.run(
        [str(CLI), *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=_env(agent),
        timeout=60,
    )
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr + done.stdout
    assert done.stderr.strip().splitlines() == [
        "pi-memory-bridge: stdin closed before an answer was given; stopped"
    ]
    assert _counts(agent) == (1, 1)


@pytest.mark.parametrize("args", [["forget", "billing"], ["outbox", "purge", "all"]])
def test_ctrl_c_at_a_prompt_exits_130_with_one_line(agent: Path, tmp_path: Path, args: list[str]) -> None:
    out_path = tmp_path / "stdout.txt"
    with out_path.open("w") as out:
        proc = subprocess.Popen(
            [str(CLI), *args],
            stdin=subprocess.PIPE,
            stdout=out,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(agent),
        )
        try:

            def asked() -> bool:  # a prompt waits for input
                assert proc.poll() is None, f"the command ended before asking: {out_path.read_text()}"
                return out_path.read_text().rstrip().endswith(("]", ":"))

            wait_until(asked, 60, "the question waiting for an answer", detail=out_path.read_text)
            proc.send_signal(signal.SIGINT)
            _, stderr = proc.communicate(timeout=20)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert stderr.strip().splitlines() == ["pi-memory-bridge: interrupted"]
    assert _counts(agent) == (1, 1)
