"""`pi-memory-bridge redact --rescan` and the re-scan after an upgrade: data stored before a rule
existed is redacted in the store (rows, tool evidence, full-text index), the outbox, the notes
and the profile, and no trace of it stays in the files.

The "old" data is written the way an older version left it: straight into the store and the
outbox, past today's capture-time redaction. Secrets are generated at run time.
"""

from __future__ import annotations

import asyncio
import json
import random
import sqlite3
import string
import subprocess
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pi_memory_bridge import rescan
from pi_memory_bridge.backends.base import ConversationTurn, ToolEvidence
from pi_memory_bridge.backends.local import LocalBackend
from pi_memory_bridge.outbox import Outbox
from pi_memory_bridge.redact import rules_fingerprint
from sidecar_client import REPO, SidecarProcess
from waiting import wait_until

CLI = REPO / ".venv" / "bin" / "pi-memory-bridge"
WHEN = datetime(2026, 1, 1, tzinfo=UTC)
RNG = random.Random(1313)
ALNUM = string.ascii_letters + string.digits


def _token() -> str:
    return "ghp_" + "".join(RNG.choice(ALNUM) for _ in range(36))


def _password() -> str:
    return "Zq" + "".join(RNG.choice(ALNUM) for _ in range(8)) + "7!"


class Old:
    """What an older version stored, and the secrets in it."""

    def __init__(self, data: Path) -> None:
        self.token, self.password, self.note_secret, self.queued = (
            _token(),
            _password(),
            _password(),
            _token(),
        )
        backend = LocalBackend(data)
        split = f"{self.token[:14]}\n{self.token[14:]}"
        backend.store.conversation.add(
            [
                ConversationTurn(
                    "t-old",
                    "s",
                    f"deploy the zebracorn service with token {split}",
                    f"done; my password is {self.password} by the way",
                    WHEN,
                    tools=(
                        ToolEvidence(
                            "c1", "bash", json.dumps({"cmd": f"echo {split}"}), f"pw: {self.password}"
                        ),
                    ),
                ),
                ConversationTurn("t-clean", "s", "the zebracorn dashboard is green", "good", WHEN),
            ]
        )
        backend.store.memories.save(f"the wifi password is {self.password}", "fact", "user")
        backend.store.memories.save(
            f"the wifi password is {_password()}", "fact", "user"
        )  # same once redacted
        backend.store.memories.save("the zebracorn team owns billing", "fact", "user")
        backend.notes.write_scenario(
            "ops/deploy.md", f"# Deploy\nuse {self.note_secret[:6]}\n{self.note_secret[6:]}\n"
        )
        backend.notes.write_scenario("ops/deploy.md", f"# Deploy\nthe admin password is {self.note_secret}\n")
        backend.notes.write_profile(f"backend developer; 数据库密码是 {self.note_secret}\n")
        asyncio.run(backend.close())
        with Outbox.open(data) as box:
            box.enqueue(
                [ConversationTurn("q1", "s", f"queued: my password is {self.queued[4:16]}", "ok", WHEN)]
            )
        self.secrets = [self.token[:14], self.token[14:], self.password, self.note_secret, self.queued[4:16]]


def _raw(data: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(data.rglob("*")) if p.is_file())


def _df_is_consistent(db: Path) -> None:
    with sqlite3.connect(db) as conn:
        for table, columns in (("turns", ("user_tokens", "assistant_tokens")), ("atomic", ("tokens",))):
            expected: Counter[str] = Counter()
            for row in conn.execute(f"SELECT {', '.join(columns)} FROM {table}"):
                expected.update({term for text in row for term in text.split()})
            stored = {term: n for term, n in conn.execute(f"SELECT term, df FROM {table}_df") if n}
            assert stored == dict(expected), table


def test_rescan_command_redacts_everything_stored_and_reports_it(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    data = agent / "memory-bridge"
    old = Old(data)
    assert all(secret.encode() in _raw(data) for secret in old.secrets)

    done = subprocess.run(
        [str(CLI), "redact", "--rescan"],
        env={"PATH": "/usr/bin:/bin", "PI_CODING_AGENT_DIR": str(agent), "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert f"rules {rules_fingerprint()}" in out
    assert "L0 turns        2 scanned, 1 changed" in out and "github-token" in out
    assert "L1 memories     3 scanned, 1 changed, 1 merged into a duplicate" in out
    assert "outbox          1 record, 1 changed" in out
    assert "L2 notes        1 file, 1 changed" in out and "profile         1 file, 1 changed" in out

    raw = _raw(data)
    for secret in old.secrets:
        assert secret.encode() not in raw, secret  # rows, FTS segments, WAL, outbox, notes
    backend = LocalBackend(data)
    try:
        hits = asyncio.run(backend.conversation.search("zebracorn", 5))
        assert {h.turn_id for h in hits} == {"t-old", "t-clean"}  # the index still finds both
        assert "[REDACTED:github-token]" in next(h.user_text for h in hits if h.turn_id == "t-old")
        assert asyncio.run(backend.conversation.search(old.token[14:], 5)) == []
        facts = asyncio.run(backend.memories.search("wifi password", 5))
        assert [f.content for f in facts] == ["the wifi password is [REDACTED:password]"]
    finally:
        asyncio.run(backend.close())
    _df_is_consistent(data / "memory.sqlite3")
    state = json.loads((data / "redaction-rules.json").read_text())
    assert state["fingerprint"] == rules_fingerprint() and state["changed"] == 6
    assert (data / "redaction-rules.json").stat().st_mode & 0o077 == 0


def test_rescan_tells_listeners_which_rows_changed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "memory-bridge"
    Old(data)
    seen: list[rescan.RowsChanged] = []
    monkeypatch.setattr(rescan, "_listeners", [seen.append])
    report = rescan.rescan(data)
    assert report.changed == 6
    assert rescan.RowsChanged("L0", ("t-old",)) in seen
    assert [c.layer for c in seen].count("L1") == 2  # one memory rewritten, one merged away
    assert any(c.deleted for c in seen if c.layer == "L1")


def test_it_runs_once_after_an_upgrade_that_changed_the_rules(tmp_path: Path) -> None:
    data = tmp_path / "memory-bridge"
    old = Old(data)
    (data / "redaction-rules.json").write_text(json.dumps({"fingerprint": "1:rules-of-an-older-version"}))
    assert rescan.needs_rescan(data)
    first = rescan.rescan_if_rules_changed(data)
    assert first is not None and first.changed == 6
    assert old.password.encode() not in _raw(data)
    assert not rescan.needs_rescan(data)
    assert rescan.rescan_if_rules_changed(data) is None  # once


def test_the_real_sidecar_rescans_after_an_upgrade(tmp_path: Path) -> None:
    agent = tmp_path / "home" / ".pi" / "agent"
    data = agent / "memory-bridge"
    old = Old(data)
    (data / "redaction-rules.json").write_text(json.dumps({"fingerprint": "1:rules-of-an-older-version"}))
    sidecar = SidecarProcess(agent)
    try:
        sidecar.initialize(tmp_path)
        wait_until(lambda: not rescan.needs_rescan(data), 30, "the sidecar's re-scan", interval=0.1)
        found = sidecar.call(
            "tool/call", {"name": "tdai_conversation_search", "arguments": {"query": "zebracorn"}}
        )
        assert (
            old.token[14:] not in found["result"]["text"]
            and "[REDACTED:github-token]" in found["result"]["text"]
        )
    finally:
        sidecar.close()
    assert old.password.encode() not in _raw(data)


def test_rescan_of_an_empty_agent_dir_creates_no_store(tmp_path: Path) -> None:
    data = tmp_path / "memory-bridge"
    data.mkdir()
    report = rescan.rescan(data)
    assert report.turns is None and report.outbox is None and report.changed == 0
    assert sorted(p.name for p in data.iterdir()) == ["redaction-rules.json"]


def test_rescan_redacts_wrapped_secrets_stored_before_the_rules_knew_them(tmp_path: Path) -> None:
    # issue 26: the second half of a wrapped AWS secret (and every other wrapped shape) was kept
    from wrapped_secrets import survivors, wrapped_cases

    data = tmp_path / "memory-bridge"
    cases = wrapped_cases(seed=77)
    backend = LocalBackend(data)
    backend.store.conversation.add(
        [ConversationTurn(f"t{i}", "s", f"zebracorn {case.text}", "ok", WHEN) for i, case in enumerate(cases)]
    )
    backend.store.memories.save(f"the deploy uses {cases[0].text}", "fact", "user")
    backend.notes.write_scenario("ops/aws.md", f"# AWS\n{cases[0].text}\n")
    asyncio.run(backend.close())
    assert survivors(cases[0], _raw(data).decode("utf-8", "replace"))  # stored as it was

    report = rescan.rescan(data)
    assert report.changed >= len(cases)
    raw = _raw(data).decode("utf-8", "replace")
    for case in cases:
        assert not survivors(case, raw), case.name  # rows, FTS segments, WAL, notes


@pytest.mark.parametrize(
    "shape",
    [
        "not json: {token}",  # clipped or damaged: redacted as text
        '{{"arguments": "token {token}"}}',  # JSON, but not the list the store writes
        '["token {token}"]',  # a list, but of text rather than tool calls
    ],
)
def test_tool_evidence_of_an_unexpected_shape_is_redacted_too(tmp_path: Path, shape: str) -> None:
    data = tmp_path / "memory-bridge"
    token = _token()
    backend = LocalBackend(data)
    backend.store.conversation.add([ConversationTurn("t-odd", "s", "the zebracorn deploy", "done", WHEN)])
    asyncio.run(backend.close())
    with sqlite3.connect(data / "memory.sqlite3") as conn:  # as a damaged or foreign row holds it
        conn.execute("UPDATE turns SET tools_json = ? WHERE turn_id = 't-odd'", (shape.format(token=token),))
    assert token.encode() in _raw(data)
    report = rescan.rescan(data)
    assert report.changed == 1
    assert token.encode() not in _raw(data)  # the row, and the WAL and free pages it left


def test_a_note_too_large_or_not_text_is_named_as_not_scanned_and_left_as_it_is(tmp_path: Path) -> None:
    from pi_memory_bridge.rescan import MAX_NOTE_BYTES

    data = tmp_path / "memory-bridge"
    (data / "l2").mkdir(parents=True)
    big = data / "l2" / "big.md"
    big.write_text("x" * (MAX_NOTE_BYTES + 1))
    latin1 = data / "l2" / "latin1.md"
    latin1.write_bytes(b"caf\xe9 password is " + _password().encode())
    before = latin1.read_bytes()
    report = rescan.rescan(data)
    assert f"l2/big.md: larger than {MAX_NOTE_BYTES >> 20} MiB, not scanned" in report.problems
    assert any(p.startswith("l2/latin1.md: not scanned (") for p in report.problems), report.problems
    assert big.stat().st_size == MAX_NOTE_BYTES + 1 and latin1.read_bytes() == before
