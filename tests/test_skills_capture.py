"""Skill capture: five-role messages from tool-heavy turns, sent at most once per turn."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memorycore_fake import fake_sdk_bindings
from pi_memory_bridge.backends.base import ConversationTurn, ToolEvidence
from pi_memory_bridge.skills import CaptureResult, MemoryCoreSkillCapture, SkillCaptureLedger, skill_messages
from pi_memory_bridge.skills._capture import MAX_MESSAGES, SENT_MEMORY_S
from skill_fake import FakeCaptureClient, backend_with


def turn(n_tools: int = 2, turn_id: str = "turn-1", *, failed: int = 0) -> ConversationTurn:
    tools = tuple(
        ToolEvidence(f"call_{i}", "bash", f'{{"cmd": "step {i}"}}', f"ok {i}", is_error=i < failed)
        for i in range(n_tools)
    )
    return ConversationTurn(
        turn_id, "mem-session", "fix the build", "done", datetime(2026, 1, 1, tzinfo=UTC), tools=tools
    )


def capture(client: FakeCaptureClient) -> MemoryCoreSkillCapture:
    return MemoryCoreSkillCapture(client, fake_sdk_bindings(), team="team", agent="agent", user="user")


def test_messages_use_the_five_roles_with_call_ids() -> None:
    messages = skill_messages(turn(2, failed=1))
    assert [m["role"] for m in messages] == ["user", "tool_call", "tool_result", "assistant"]
    assert messages[1]["tool_call_id"] == messages[2]["tool_call_id"] == "call_1"
    assert skill_messages(turn(0)) == []  # plain chat is not sent


def test_a_huge_turn_is_cut_to_the_server_limit_keeping_pairs_whole() -> None:
    messages = skill_messages(turn(400))
    assert len(messages) <= MAX_MESSAGES
    assert messages[0]["role"] == "user" and messages[-1]["role"] == "assistant"
    middle = messages[1:-1]
    assert all(a["tool_call_id"] == b["tool_call_id"] for a, b in zip(middle[::2], middle[1::2], strict=True))


async def test_a_turn_is_sent_once_even_when_delivered_again(tmp_path: Path) -> None:
    client = FakeCaptureClient()
    ledger = SkillCaptureLedger(tmp_path / "skill-capture")
    first = await ledger.send(capture(client), [turn()])
    again = await SkillCaptureLedger(tmp_path / "skill-capture").send(capture(client), [turn()])
    assert [r.outcome for r in first] == ["sent"] and [r.outcome for r in again] == ["duplicate"]
    assert client.calls == 1 and len(client.buffer) == 6


@pytest.mark.parametrize(
    ("code", "outcome"),
    [
        (429, "uncertain"),
        (408, "uncertain"),
        (503, "uncertain"),
        (50301, "uncertain"),
        (400, "dead"),
        (40001, "dead"),
    ],
)
async def test_failures_are_never_retried(tmp_path: Path, code: int, outcome: str) -> None:
    client = FakeCaptureClient()
    client.faults.append((code, True))  # the server may have buffered it before failing
    ledger = SkillCaptureLedger(tmp_path)
    [result] = await ledger.send(capture(client), [turn()])
    assert result.outcome == outcome and ledger.state("turn-1") == outcome
    [later] = await ledger.send(capture(client), [turn()])
    assert later.outcome == "duplicate" and client.calls == 1


async def test_a_claim_left_by_a_crash_blocks_a_resend(tmp_path: Path) -> None:
    client = FakeCaptureClient()
    ledger = SkillCaptureLedger(tmp_path)
    assert ledger._claim("turn-1", "mem-session") is not None  # crashed right after claiming
    [result] = await ledger.send(capture(client), [turn()])
    assert result.outcome == "duplicate" and client.calls == 0


async def test_archived_is_reported_and_sent_markers_expire(tmp_path: Path) -> None:
    client = FakeCaptureClient()
    client.archive_at = 3
    ledger = SkillCaptureLedger(tmp_path)
    results = await ledger.send(capture(client), [turn(2, "a"), turn(2, "b")])
    assert [r.outcome for r in results] == ["sent", "archived"]
    assert ledger.prune(now=datetime.now(UTC).timestamp() + SENT_MEMORY_S + 1) == 2
    assert ledger.state("a") is None


async def test_capture_goes_out_as_the_backend_identity(tmp_path: Path) -> None:
    client = FakeCaptureClient()
    sender = MemoryCoreSkillCapture.from_backend(backend_with(client))
    [result] = await SkillCaptureLedger(tmp_path).send(sender, [turn()])
    assert result.outcome == "sent"
    assert client.ids == [("mem-session", "user", "team", "agent")]


async def test_two_processes_racing_send_once(tmp_path: Path) -> None:
    client = FakeCaptureClient()
    ledgers = [SkillCaptureLedger(tmp_path) for _ in range(4)]
    results = await asyncio.gather(*(ledger.send(capture(client), [turn()]) for ledger in ledgers))
    outcomes = sorted(r.outcome for batch in results for r in batch)
    assert outcomes == ["duplicate", "duplicate", "duplicate", "sent"] and client.calls == 1
    # and after the winner settled, a late one still sees the claim
    [late] = await SkillCaptureLedger(tmp_path).send(capture(client), [turn()])
    assert late.outcome == "duplicate" and client.calls == 1


async def test_a_turn_recorded_but_never_sent_goes_out_on_the_next_start(tmp_path: Path) -> None:
    client = FakeCaptureClient()
    crashed = SkillCaptureLedger(tmp_path)
    assert crashed.record([turn()]) == 1  # the process died right after the turn settled
    restarted = SkillCaptureLedger(tmp_path)
    assert restarted.recover() == []
    [result] = await restarted.send_pending(capture(client))
    assert result.outcome == "sent" and client.calls == 1
    assert await restarted.send_pending(capture(client)) == [CaptureResult("turn-1", "duplicate", "sent")]


async def test_a_claim_of_a_dead_process_before_the_request_is_released(tmp_path: Path) -> None:
    client = FakeCaptureClient()
    ledger = SkillCaptureLedger(tmp_path)
    ledger.record([turn()])
    claim = ledger._claim("turn-1", "mem-session")
    assert claim is not None
    claim.write_text(json.dumps({"turn_id": "turn-1", "session_id": "mem-session", "pid": _dead_pid()}))
    assert ledger.recover() == ["turn-1"]
    [result] = await ledger.send_pending(capture(client))
    assert result.outcome == "sent" and client.calls == 1


async def test_a_crash_during_the_request_is_uncertain_and_never_resent(tmp_path: Path) -> None:
    client = FakeCaptureClient()
    ledger = SkillCaptureLedger(tmp_path)
    ledger.record([turn()])
    claim = ledger._claim("turn-1", "mem-session")
    assert claim is not None
    claim.with_suffix(".sending").write_text("")
    claim.write_text(json.dumps({"turn_id": "turn-1", "session_id": "mem-session", "pid": _dead_pid()}))
    assert ledger.recover() == []
    assert ledger.state("turn-1") == "uncertain"
    [result] = await ledger.send_pending(capture(client))
    assert result.outcome == "duplicate" and client.calls == 0


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


async def test_a_half_written_pending_record_is_dead_and_the_others_still_go_out(tmp_path: Path) -> None:
    client = FakeCaptureClient()
    ledger = SkillCaptureLedger(tmp_path)
    ledger.record([turn(turn_id="turn-1"), turn(turn_id="turn-2")])
    first = min(os.scandir(tmp_path), key=lambda e: e.name if e.name.endswith(".pending") else "~")
    os.truncate(first.path, 20)  # cut off mid-write
    results = await ledger.send_pending(capture(client))
    dead = [r for r in results if r.outcome == "dead"]
    assert len(dead) == 1 and dead[0].detail.startswith("unreadable pending record: ")
    assert [r.outcome for r in results if r.outcome != "dead"] == ["sent"] and client.calls == 1


async def test_a_claim_held_by_a_live_process_or_half_written_is_never_released(tmp_path: Path) -> None:
    client = FakeCaptureClient()
    ledger = SkillCaptureLedger(tmp_path)
    ledger.record([turn(turn_id="turn-1"), turn(turn_id="turn-2")])
    live = ledger._claim("turn-1", "mem-session")  # this process: alive, maybe sending right now
    torn = ledger._claim("turn-2", "mem-session")
    assert live is not None and torn is not None
    torn.write_text('{"turn_id": "turn-2", "pi')  # the claimer died while writing it: at most once
    assert ledger.recover() == []
    results = await ledger.send_pending(capture(client))
    assert [r.outcome for r in results] == ["duplicate", "duplicate"] and client.calls == 0
