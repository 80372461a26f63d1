"""Store-wide work finishes without a Pi (real Pi, both versions): after `pi-memory-bridge import` of
200+ turns that it could not embed itself, and one `pi -p` through the background sidecar, every
row has its vector within 60 s with no Pi running, and `search --json` ranks by them (a question in
other words finds the turn that no keyword of it matches). Before, the store's work lived and died
with the Pi's connection: 0 vectors five minutes later (issue 23, item 4)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bridge import SHIM, SIDECAR, data_dir, use_bridge
from harness import REPO_ROOT, PiEnv
from harness.procs import environ_of, pid_alive

RECORDED = REPO_ROOT / "tests" / "data" / "pi_sessions"
IDLE_S = 6  # the daemon's idle time: it stays longer only for the store's work
VECTORS_WITHIN_S = 60.0
PET = "My cat is called Tuanzi and she sleeps on the radiator all day."
PARAPHRASE = "what is my pet's name?"  # no word of it is in the stored turn
TOPICS = ("the billing service", "the login page", "the CI pipeline", "the database migration",
          "the search index", "the mobile app", "the payment webhook", "the release notes",
          "the cache layer")  # fmt: skip
ASKS = ("refactor", "speed up", "add tests for", "document", "fix a flaky test in", "review the PR for",
        "profile", "clean up logging in")  # fmt: skip


@pytest.fixture
def runtime_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="pmb-e2e-", dir="/tmp"))  # a socket path holds ~100 bytes
    path.chmod(0o700)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _texts() -> list[tuple[str, str]]:
    said = [(f"Can you {ask} {topic}? (part {k})", f"Done: {ask} {topic}, part {k}.")
            for topic in TOPICS for ask in ASKS for k in range(3)]  # fmt: skip
    said.insert(100, (PET, "What a cosy cat!"))
    return said


def _write_sessions(env: PiEnv, said: list[tuple[str, str]], files: int = 6) -> None:
    """Session files as this Pi version writes them: the recorded file's header and set-up lines,
    then the turns (`said`) spread over `files` sessions."""
    template = [
        json.loads(line)
        for line in (RECORDED / f"tree-{env.install.version}.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    setup = [e for e in template[1:] if e["type"] != "message" or e["message"]["role"] == "system"][:3]
    answer = next(e for e in template if e["type"] == "message" and e["message"]["role"] == "assistant")
    start = datetime(2026, 11, 1, tzinfo=UTC)
    for n in range(files):
        header = {**template[0], "id": str(uuid.uuid4()), "cwd": str(env.work_dir)}
        lines: list[dict[str, Any]] = [header, *setup]
        parent = setup[-1]["id"]
        for i, (user, assistant) in enumerate(said[n::files]):
            when = start + timedelta(days=n, minutes=2 * i)
            ids = (uuid.uuid4().hex[:8], uuid.uuid4().hex[:8])
            ms = int(when.timestamp() * 1000)
            stamp = when.isoformat(timespec="milliseconds").replace("+00:00", "Z")
            user_entry = {"role": "user", "content": [{"type": "text", "text": user}], "timestamp": ms}
            reply = {
                **answer["message"],
                "content": [{"type": "text", "text": assistant}],
                "timestamp": ms + 1,
            }
            lines.append({"type": "message", "id": ids[0], "parentId": parent, "timestamp": stamp,
                          "message": user_entry})  # fmt: skip
            lines.append({"type": "message", "id": ids[1], "parentId": ids[0], "timestamp": stamp,
                          "message": reply})  # fmt: skip
            parent = ids[1]
        dest = env.sessions_dir / "--imported--" / f"{start.date()}_{header['id']}.jsonl"
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")


def _cli(env: PiEnv, *args: str, extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SIDECAR), *args],
        env={**env.environ(), **(extra or {})},
        cwd=env.work_dir,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def _rows(env: PiEnv) -> tuple[int, int]:
    """(turns, turns with their vector), read straight from the store."""
    con = sqlite3.connect(f"file:{data_dir(env) / 'memory.sqlite3'}?mode=ro", uri=True)
    try:
        turns = con.execute("SELECT count(*) FROM turns").fetchone()[0]
        try:
            vectors = con.execute("SELECT count(DISTINCT row_id) FROM turn_vectors").fetchone()[0]
        except sqlite3.OperationalError:  # no process with the model opened the store yet
            vectors = 0
        return int(turns), int(vectors)
    finally:
        con.close()


def _pis(env: PiEnv) -> list[int]:
    """This test's processes other than the background sidecar (Pis, their own sidecars)."""
    return [p for p in env.marked_pids() if "PI_MEMORY_BRIDGE_SOCKET" not in environ_of(p)]


def _daemons(runtime_dir: Path) -> list[int]:
    locks = (runtime_dir / f"pi-memory-bridge-{os.getuid()}").glob("*.sock.lock")
    return [pid for pid in (int(p.read_text() or 0) for p in locks) if pid and pid_alive(pid)]


def _search(env: PiEnv, query: str) -> dict[str, Any]:
    run = _cli(env, "search", query, "--json")
    assert run.returncode == 0, run.stderr
    found: dict[str, Any] = json.loads(run.stdout)
    return found


def test_an_import_is_embedded_by_the_background_sidecar_after_its_one_pi_left(
    pi_env: PiEnv, runtime_dir: Path
) -> None:
    use_bridge(pi_env, config={"learning": {"enabled": False}})
    pi_env.extra_env.update(
        {
            "PI_MEMORY_BRIDGE_DAEMON": "1",
            "PI_MEMORY_BRIDGE_DAEMON_IDLE_S": str(IDLE_S),
            "XDG_RUNTIME_DIR": str(runtime_dir),
        }
    )
    said = _texts()
    assert len(said) >= 200
    _write_sessions(pi_env, said)
    # this import cannot embed (its model is off): it leaves the rows to the background sidecar
    imported = _cli(pi_env, "import", "--yes", extra={"PI_MEMORY_BRIDGE_EMBEDDINGS": "off"})
    assert imported.returncode == 0, imported.stderr
    assert f"imported {len(said)} turns" in imported.stdout, imported.stdout
    assert f"{len(said)} still to embed" in imported.stdout, imported.stdout
    assert _rows(pi_env) == (len(said), 0)
    status = _cli(pi_env, "status")
    assert f"Search by meaning: {len(said)} turns still to embed" in status.stdout, status.stdout
    before = _search(pi_env, PARAPHRASE)
    assert before["semantic"]["vectors"]["done"] == 0
    assert all(PET not in item["text"] for item in before["items"])  # by its words: not found

    run = pi_env.run_print(["hello after the import"], extensions=[SHIM])
    assert run.returncode == 0, run.stderr
    left = time.monotonic()
    assert _daemons(runtime_dir), "the background sidecar left with its Pi"
    while _rows(pi_env)[1] < len(said) + 1 and time.monotonic() - left < VECTORS_WITHIN_S:
        assert _pis(pi_env) == []  # nothing but the background sidecar works on it
        time.sleep(0.5)
    took = time.monotonic() - left
    turns, vectors = _rows(pi_env)
    assert turns == len(said) + 1 and vectors == turns, (turns, vectors, f"{took:.1f} s")

    after = _search(pi_env, PARAPHRASE)
    assert after["semantic"]["state"] == "loaded", after["semantic"]
    assert after["semantic"]["vectors"]["done"] == after["semantic"]["vectors"]["total"]
    assert any(PET in item["text"] for item in after["items"] if item["layer"] == "L0"), after["items"]
    assert "everything remembered is indexed" in _cli(pi_env, "status").stdout
    # with its work done it leaves by itself, after its idle time
    gone = time.monotonic() + IDLE_S + 30
    while _daemons(runtime_dir) and time.monotonic() < gone:
        time.sleep(0.2)
    assert _daemons(runtime_dir) == []
