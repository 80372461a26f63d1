"""Runs Pi does not keep (`pi --no-session`): recall as usual, capture only when configured.

Drives the real sidecar process over stdio, as the shim does.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sidecar_client import SidecarProcess
from waiting import wait_until

RUNS = [
    [
        {
            "role": "user",
            "content": [{"type": "text", "text": "Task: list the billing endpoints"}],
            "timestamp": 1,
        },
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "GET /invoices, POST /refunds"}],
            "stopReason": "stop",
            "timestamp": 2,
        },
    ]
]


def _sidecar(tmp_path: Path, config: dict[str, Any] | None) -> Iterator[SidecarProcess]:
    agent = tmp_path / "home" / ".pi" / "agent"
    (agent / "memory-bridge").mkdir(parents=True)
    if config is not None:
        doc = {"schemaVersion": 1, **config}
        (agent / "memory-bridge" / "config.json").write_text(json.dumps(doc), encoding="utf-8")
    proc = SidecarProcess(agent)
    proc.initialize(tmp_path)
    yield proc
    if proc.proc.poll() is None:
        proc.proc.kill()
        proc.proc.wait()


@pytest.fixture
def sidecar(tmp_path: Path) -> Iterator[SidecarProcess]:
    yield from _sidecar(tmp_path, None)


@pytest.fixture
def sidecar_keeping_them(tmp_path: Path) -> Iterator[SidecarProcess]:
    yield from _sidecar(tmp_path, {"capture": {"noSessionRuns": True}})


def settle(sidecar: SidecarProcess, **extra: Any) -> dict[str, Any]:
    params = {"piSessionId": "sub-1", "runs": RUNS, "aborted": False, **extra}
    return sidecar.call("turn/settled", params)["result"]


def test_a_no_session_run_is_not_captured_and_status_says_why(sidecar: SidecarProcess) -> None:
    result = settle(sidecar, sessionPersisted=False)
    assert result["captured"] == 0 and result["reasons"] == ["no-session run"]
    assert result["footer"]["state"] == "ready"  # not the user's conversation: nothing to report
    settle(sidecar, sessionPersisted=False)
    report = sidecar.call("command/run", {"name": "status"})["result"]["message"]
    assert "2 runs not captured [no-session run x2]" in report
    assert "0 captured" in report
    # nothing reached the store: a kept run settled after it is found, the no-session one is not
    kept = [[{**RUNS[0][0], "content": [{"type": "text", "text": "the staging host is stg-7"}]}, RUNS[0][1]]]
    assert (
        sidecar.call("turn/settled", {"piSessionId": "main", "runs": kept, "aborted": False})["result"][
            "captured"
        ]
        == 1
    )
    wait_recalled(sidecar, "what is the staging host?", "stg-7")
    found = sidecar.call("tool/call", {"name": "tdai_conversation_search", "arguments": {"query": "billing"}})
    assert "billing" not in json.dumps(found["result"]), found


def wait_recalled(sidecar: SidecarProcess, prompt: str, needle: str) -> None:
    def found() -> dict[str, Any] | None:  # delivery from the outbox runs in the background
        rec = sidecar.call("recall", {"piSessionId": "other", "prompt": prompt})["result"]
        return rec if needle in (rec["block"] or "") else None

    rec = wait_until(found, 10, f"recall of {needle!r}")
    assert needle in (rec["block"] or ""), rec


def test_a_no_session_run_still_gets_recall(sidecar: SidecarProcess) -> None:
    assert settle(sidecar)["captured"] == 1  # a kept run, for something to recall
    wait_recalled(sidecar, "which billing endpoints exist?", "GET /invoices")


def test_runs_that_pi_keeps_are_captured_as_before(sidecar: SidecarProcess) -> None:
    assert settle(sidecar, sessionPersisted=True)["captured"] == 1
    assert settle(sidecar)["captured"] == 1  # a shim that does not send the field: a kept run


def test_the_switch_captures_no_session_runs(sidecar_keeping_them: SidecarProcess) -> None:
    result = settle(sidecar_keeping_them, sessionPersisted=False)
    assert result["captured"] == 1 and result["reasons"] == []


def test_the_field_is_strictly_typed(sidecar: SidecarProcess) -> None:
    bad = sidecar.call(
        "turn/settled", {"piSessionId": "s", "runs": RUNS, "aborted": False, "sessionPersisted": "no"}
    )
    assert bad["error"]["code"] == -32602 and "sessionPersisted" in bad["error"]["message"]
