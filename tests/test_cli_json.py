"""The terminal memory commands: each `--json` shape as README documents it, export and import,
and end of input or Ctrl-C ending a command with one line instead of a traceback."""

from __future__ import annotations

import asyncio
import json
import os
import re
import select
import signal
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from pi_memory_bridge.backends.base import ConversationTurn
from pi_memory_bridge.backends.local import LocalBackend
from pi_memory_bridge.cli.json_shapes import SHAPES
from waiting import wait_until

REPO = Path(__file__).resolve().parents[1]
EXE = REPO / ".venv" / "bin" / "pi-memory-bridge"
SECRET = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"


def _readme_shapes() -> dict[str, str]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    return dict(re.findall(r"```json cli-shape=(\w+)\n(.*?)```", text, flags=re.DOTALL))


def test_readme_documents_every_json_shape_and_each_example_fits_its_model() -> None:
    documented = _readme_shapes()
    assert set(documented) == set(SHAPES)
    for name, example in documented.items():
        model = SHAPES[name]
        model.model_validate_json(example, by_alias=True)  # strict: no extra or missing field
        aliases = {f.alias or n for n, f in model.model_fields.items()}
        assert set(json.loads(example)) == aliases, name  # every field shown, none left out


def _cli(
    agent: Path, *args: str, stdin: str | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PI_CODING_AGENT_DIR": str(agent), "HOME": str(agent.parent)}
    agent.parent.mkdir(parents=True, exist_ok=True)
    return subprocess.run(
        [str(EXE), *args], input=stdin, capture_output=True, text=True, env=env, cwd=cwd or agent.parent,
        timeout=60, check=False, stdin=None if stdin is not None else subprocess.DEVNULL,
    )  # fmt: skip


async def _seed(agent: Path) -> str:
    backend = LocalBackend(agent / "memory-bridge")
    try:
        saved = await backend.memories.save("hates magic numbers in Go code", "preference", "user")
        await backend.memories.save("the deploy runs on the blue cluster", "fact", "model")
        turn = ConversationTurn(
            "t-1", "mem-1", "I do the backend in Go", "Noted.", datetime(2026, 3, 2, tzinfo=UTC)
        )
        await backend.conversation.add([turn])
        backend.notes.write_scenario("backend/go-style.md", "# Go style\n- named constants\n")
        backend.notes.write_profile("Backend developer; Go.")
        return saved.id
    finally:
        await backend.close()


def _json(run: subprocess.CompletedProcess[str], shape: str) -> dict[str, Any]:
    assert run.returncode == 0, run.stderr
    SHAPES[shape].model_validate_json(run.stdout, by_alias=True)
    data: dict[str, Any] = json.loads(run.stdout)
    return data


def test_every_read_command_prints_its_documented_shape(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    memory_id = asyncio.run(_seed(agent))
    listed = _json(_cli(agent, "list", "--json"), "list")
    assert listed["profile"]["text"] == "Backend developer; Go."
    assert [m["kind"] for m in listed["memories"]] == ["fact", "preference"]  # newest first
    assert listed["conversation"][0]["ref"] == "L0:t-1" and listed["notes"][0]["id"] == "backend/go-style.md"
    only = _json(_cli(agent, "list", "memories", "--kind", "preference", "--json"), "list")
    assert only["profile"] is None and [m["id"] for m in only["memories"]] == [memory_id]
    shown = _json(_cli(agent, "show", f"L1:{memory_id}", "--json"), "show")
    assert shown["item"]["text"] == "hates magic numbers in Go code"
    assert _json(_cli(agent, "show", "L2:backend/go-style.md", "--json"), "show")["item"]["text"].startswith(
        "# Go"
    )
    found = _json(_cli(agent, "search", "magic numbers", "--json"), "search")
    assert not found["recent"] and found["items"][0]["id"] == memory_id
    assert found["semantic"]["vectors"] == {"done": 0, "total": 3}  # seeded without the model
    recent = _json(_cli(agent, "search", "", "--json"), "search")
    assert recent["recent"] and {i["layer"] for i in recent["items"]} == {
        "L1",
        "L0",
    }  # empty query: most recent
    status = _cli(agent, "status", "--json")
    assert json.loads(status.stdout)["counts"]["atomic"] == 2
    SHAPES["status"].model_validate_json(status.stdout, by_alias=True)
    exported = _json(_cli(agent, "export", "--json"), "export")
    assert len(exported["memories"]) == 2 and exported["profile"] == "Backend developer; Go."
    assert _cli(agent, "show", "L1:at-nope").returncode == 1


def test_edit_forget_by_id_and_export_import_round_trip(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    memory_id = asyncio.run(_seed(agent))
    edited = _cli(agent, "edit", f"L1:{memory_id}", f"hates magic numbers, token {SECRET}")
    assert edited.returncode == 0 and "edited" in edited.stdout and "1 secret redacted" in edited.stdout
    shown = _json(_cli(agent, "show", memory_id, "--json"), "show")["item"]
    assert SECRET not in shown["text"] and "REDACTED" in shown["text"]
    out = tmp_path / "backup.json"
    assert _cli(agent, "export", "--json", "-o", str(out)).returncode == 0
    assert out.stat().st_mode & 0o777 == 0o600
    markdown = _cli(agent, "export").stdout
    assert (
        "## Memories" in markdown
        and "hates magic numbers" in markdown
        and "### backend/go-style.md" in markdown
    )
    refused = _cli(agent, "forget", "--id", f"L1:{memory_id}")  # no --yes and no answer: nothing deleted
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    gone = _cli(agent, "forget", "--id", f"L1:{memory_id}", "--id", "L0:t-1", "--yes")
    assert gone.returncode == 0 and gone.stdout.count("deleted ") == 2, gone.stdout
    assert _cli(agent, "show", memory_id).returncode == 1

    other = tmp_path / "other" / "agent"
    first = _cli(other, "import", str(out), "--yes")
    assert first.returncode == 0, first.stdout + first.stderr
    assert "memories: 2 added" in first.stdout and "conversation: 1 added" in first.stdout
    assert "notes: 1 added" in first.stdout and "profile: added" in first.stdout
    again = _cli(other, "import", str(out), "--yes")
    assert (
        "memories: 0 added, 2 already known" in again.stdout
        and "conversation: 0 added, 1 already" in again.stdout
    )
    texts = [m["text"] for m in _json(_cli(other, "list", "--json"), "list")["memories"]]
    assert sorted(texts) == sorted(m["text"] for m in json.loads(out.read_text())["memories"])
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "something else"}')
    refused_file = _cli(other, "import", str(bad), "--yes")
    assert refused_file.returncode == 1 and "not a pi-memory-bridge export" in refused_file.stderr


def test_end_of_input_and_ctrl_c_end_with_one_line(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    asyncio.run(_seed(agent))
    out = tmp_path / "backup.json"
    assert _cli(agent, "export", "--json", "-o", str(out)).returncode == 0
    other = tmp_path / "other" / "agent"
    eof = _cli(other, "import", str(out))  # stdin closed: the question gets end of input
    assert eof.returncode == 1 and "Traceback" not in eof.stderr
    assert "end of input" in eof.stderr and len(eof.stderr.strip().splitlines()) == 1
    assert json.loads(_cli(other, "list", "--json").stdout)["memories"] == []  # nothing imported

    env = {**os.environ, "PI_CODING_AGENT_DIR": str(other), "HOME": str(other.parent)}
    proc = subprocess.Popen(
        [str(EXE), "import", str(out)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env=env,
    )  # fmt: skip
    assert proc.stdout is not None
    seen = bytearray()

    def asked() -> bool:  # the question has no newline: read bytes as they come
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 1.0)
        if ready:
            chunk = os.read(proc.stdout.fileno(), 4096)
            assert chunk, f"the command ended before asking: {bytes(seen)!r}"
            seen.extend(chunk)
        return b"[y/N]" in seen

    wait_until(asked, 30, "the [y/N] question", interval=0, detail=lambda: bytes(seen))
    proc.send_signal(signal.SIGINT)
    _out, err_bytes = proc.communicate(timeout=30)
    err = err_bytes.decode()
    assert proc.returncode == 130 and "Traceback" not in err and "interrupted" in err
    assert json.loads(_cli(other, "list", "--json").stdout)["memories"] == []


@pytest.mark.skipif(sys.platform != "linux", reason="paths")
def test_install_sdk_prints_the_pinned_command(tmp_path: Path) -> None:
    run = _cli(tmp_path / "agent", "install-sdk", "--print")
    assert run.returncode == 0
    assert "97f94654280b2932c35ba4806a491999ed244cc9" in run.stdout and "-m pip install" in run.stdout


def test_forget_and_outbox_purge_run_unattended_with_yes(tmp_path: Path) -> None:
    from pi_memory_bridge.outbox import Outbox

    agent = tmp_path / "agent"
    asyncio.run(_seed(agent))
    gone = _cli(agent, "forget", "blue cluster", "--yes")
    assert gone.returncode == 0 and "deleted " in gone.stdout, gone.stdout + gone.stderr
    assert "blue cluster" not in _cli(agent, "export").stdout
    nothing = _cli(agent, "forget", "zzzunmatched", "--yes")
    assert nothing.returncode == 0 and "Nothing to forget." in nothing.stdout

    box = Outbox.open(agent / "memory-bridge")
    box.enqueue([ConversationTurn("dead-1", "s", "refused turn", "ok", datetime.now(UTC))])
    for _ in range(3):
        claim = box.claims.claim(ignore_backoff=True)
        assert claim is not None
        box.claims.reject(claim, "400 Bad Request", max_rejections=3, delay_s=0)
    box.close()
    purged = _cli(agent, "outbox", "purge", "all", "--yes")
    assert purged.returncode == 0 and "purged 1 record" in purged.stdout, purged.stdout + purged.stderr
    with Outbox.open(agent / "memory-bridge") as box:
        assert box.admin.counts().dead == 0
