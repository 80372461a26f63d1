"""`pi-memory-bridge doctor`: read-only, finds full disks and damaged files, and its advice names
the file at fault, never moving the memory store unless the store itself is damaged.

Full and read-only filesystems are real: a 1 MiB tmpfs mounted for the test (root can mount;
without the privilege the tests that need one are skipped, saying so).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import pwd
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pi_memory_bridge.backends.base import ConversationTurn
from pi_memory_bridge.backends.local import LocalBackend
from pi_memory_bridge.cli.doctor import Check, render, run_checks
from pi_memory_bridge.outbox import Outbox
from sidecar_client import REPO

CLI = REPO / ".venv" / "bin" / "pi-memory-bridge"
WHEN = datetime(2026, 11, 1, tzinfo=UTC)


def _env(agent: Path, **extra: str) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", ""),
        "PI_CODING_AGENT_DIR": str(agent),
        "HOME": str(agent.parent),
        **extra,
    }


def _make_store(agent: Path) -> Path:
    data = agent / "memory-bridge"
    backend = LocalBackend(data)
    backend.store.conversation.add([ConversationTurn("t1", "s", "the billing cluster is blue", "ok", WHEN)])
    asyncio.run(backend.close())
    with Outbox.open(data) as box:
        box.enqueue([ConversationTurn("q1", "s", "queued turn", "ok", WHEN)])
    return data


def _by_name(checks: list[Check], name: str) -> Check:
    found = [c for c in checks if c.name == name]
    assert len(found) == 1, render(checks)
    return found[0]


def _failed(checks: list[Check]) -> list[str]:
    return [c.name for c in checks if not c.ok]


def _advises_moving_the_store(check: Check) -> bool:
    fix = check.fix.lower()
    return ("memory.sqlite3" in fix and ("mv " in fix or "move" in fix)) or "a new store is created" in fix


def _snapshot(root: Path) -> dict[str, str]:
    if not root.exists():
        return {}
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
        for p in sorted(root.rglob("*"))
    }


@contextmanager
def _tmpfs(path: Path, size: str) -> Iterator[Path]:
    path.mkdir(parents=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({mounted.stderr.decode().strip()}); run as root")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


# ---- read-only -----------------------------------------------------------------------------------


def test_doctor_creates_nothing_in_a_fresh_agent_dir(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    checks = run_checks(_env(agent), tmp_path)
    assert not agent.exists(), "doctor created the agent dir"
    # what is checked outside the data dir (Pi, Node, the extension) depends on this machine
    outside = {"shim", "extension", "pi", "node"}
    assert not set(_failed(checks)) - outside, render(checks)
    assert "not created yet" in _by_name(checks, "store").detail


def test_doctor_changes_no_byte_of_an_existing_store(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    data = _make_store(agent)
    before = _snapshot(data)
    checks = run_checks(_env(agent), tmp_path)
    assert _snapshot(data) == before
    assert "turns 1" in _by_name(checks, "store").detail
    assert "pending 1" in _by_name(checks, "outbox").detail


def test_with_home_unset_doctor_writes_nothing_under_the_fallback_home(tmp_path: Path) -> None:
    fallback = Path(pwd.getpwuid(os.getuid()).pw_dir) / ".pi" / "agent" / "memory-bridge"
    before = _snapshot(fallback), fallback.exists()
    done = subprocess.run(
        [str(CLI), "doctor"],
        env={"PATH": os.environ.get("PATH", "")},
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert (_snapshot(fallback), fallback.exists()) == before, done.stdout
    assert "[warn] home: HOME is not set" in done.stdout


# ---- the files we own ----------------------------------------------------------------------------


def test_a_garbage_outbox_fails_doctor_and_names_the_outbox(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    data = _make_store(agent)
    for suffix in ("-wal", "-shm"):
        (data / f"outbox.sqlite3{suffix}").unlink(missing_ok=True)
    (data / "outbox.sqlite3").write_bytes(b"this is not a database\n" * 100)
    done = subprocess.run(
        [str(CLI), "doctor"], env=_env(agent), capture_output=True, text=True, cwd=tmp_path, timeout=60
    )
    assert done.returncode == 1, done.stdout
    assert "[FAIL] outbox:" in done.stdout and "outbox.sqlite3 is damaged" in done.stdout
    checks = run_checks(_env(agent), tmp_path)
    outbox = _by_name(checks, "outbox")
    assert "keep a copy" in outbox.fix and f"mv {data / 'outbox.sqlite3'} " in outbox.fix
    assert "the memory store is not affected" in outbox.fix
    assert _by_name(checks, "store").ok
    assert not any(_advises_moving_the_store(c) for c in checks), render(checks)


def test_a_damaged_store_says_how_to_keep_a_copy(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    data = agent / "memory-bridge"
    data.mkdir(parents=True)
    (data / "memory.sqlite3").write_bytes(b"\x00garbage" * 1000)
    store = _by_name(run_checks(_env(agent), tmp_path), "store")
    assert not store.ok and "memory.sqlite3 is damaged" in store.detail
    assert (
        "keep a copy" in store.fix
        and f"mv {data / 'memory.sqlite3'} {data / 'memory.sqlite3'}.damaged-" in store.fix
    )


def test_a_bad_config_file_names_the_config_not_the_store(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    data = _make_store(agent)
    (data / "config.json").write_text('{"backend": "local",')
    checks = run_checks(_env(agent), tmp_path)
    config = _by_name(checks, "config")
    assert not config.ok and config.fix == f"edit {data / 'config.json'}"
    assert _by_name(checks, "store").ok  # intact, and said so
    assert not any(_advises_moving_the_store(c) for c in checks), render(checks)


def test_a_bad_key_file_names_the_key_file(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    data = _make_store(agent)
    key_dir = tmp_path / "keys"
    key_dir.mkdir()
    (key_dir / "user.key").symlink_to(tmp_path / "elsewhere.key")
    (data / "config.json").write_text(
        '{"backend": "memorycore", "memorycore": {"endpoint": "https://mc.example.com", "teamId": "t", '
        f'"agentId": "a", "userId": "u", "userKeyFile": "{key_dir / "user.key"}"}}}}'
    )
    checks = run_checks(_env(agent), tmp_path)
    key = _by_name(checks, "key file")
    assert not key.ok and str(key_dir / "user.key") in key.detail and str(key_dir / "user.key") in key.fix
    assert not _by_name(checks, "backend").ok or _by_name(checks, "backend").warning
    assert not any(_advises_moving_the_store(c) for c in checks), render(checks)


def test_a_world_readable_store_is_a_warning_with_the_chmod(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    data = _make_store(agent)
    os.chmod(data / "memory.sqlite3", 0o644)
    store = _by_name(run_checks(_env(agent), tmp_path), "store")
    assert store.warning and f"chmod 600 {data / 'memory.sqlite3'}" in store.fix


# ---- disks -----------------------------------------------------------------------------------------


def test_a_full_filesystem_fails_doctor_with_what_to_do(tmp_path: Path) -> None:
    with _tmpfs(tmp_path / "small", "1m") as mount:
        agent = mount / "agent"
        data = _make_store(agent)
        with (mount / "filler").open("wb") as filler:  # fill it up with real bytes
            try:
                while True:
                    filler.write(os.urandom(64 * 1024))
                    filler.flush()
            except OSError:
                pass
        empty = data / ".an-empty-file"
        empty.touch()  # what a full filesystem still allows, and why creating a file proves nothing
        empty.unlink()
        done = subprocess.run(
            [str(CLI), "doctor"], env=_env(agent), capture_output=True, text=True, cwd=tmp_path, timeout=60
        )
        assert done.returncode == 1, done.stdout
        disk = _by_name(run_checks(_env(agent), tmp_path), "disk")
        assert not disk.ok and "is full" in disk.detail and "No space left on device" in disk.detail
        assert "free some space" in disk.fix and str(mount) in disk.fix
        assert not list(data.glob(".doctor-probe-*"))  # the probe is gone


def test_a_nearly_full_filesystem_fails_doctor(tmp_path: Path) -> None:
    with _tmpfs(tmp_path / "small", "4m") as mount:
        agent = mount / "agent"
        _make_store(agent)
        checks = run_checks(_env(agent), tmp_path)
        disk = _by_name(checks, "disk")
        assert not disk.ok and "nearly full" in disk.detail and "MiB free" in disk.detail
        assert _by_name(checks, "store").ok


def test_a_read_only_data_dir_says_so_and_keeps_the_store(tmp_path: Path) -> None:
    with _tmpfs(tmp_path / "small", "4m") as mount:
        agent = mount / "agent"
        _make_store(agent)
        subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)
        checks = run_checks(_env(agent), tmp_path)
        ddir = _by_name(checks, "data dir")
        assert not ddir.ok and "read-only filesystem" in ddir.detail and "intact" in ddir.fix
        assert _by_name(checks, "store").ok
        assert not any(_advises_moving_the_store(c) for c in checks), render(checks)


# ---- a data dir or a database that is no such thing -------------------------------------------------


def test_a_data_dir_that_is_a_file_fails_doctor_and_is_left_as_it_is(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    agent.mkdir()
    (agent / "memory-bridge").write_text("not a directory")
    checks = run_checks(_env(agent), tmp_path)
    ddir = _by_name(checks, "data dir")
    assert not ddir.ok and ddir.detail.endswith("memory-bridge is not a directory")
    assert "remove or rename" in ddir.fix
    assert (agent / "memory-bridge").read_text() == "not a directory"


def test_a_data_dir_that_cannot_be_created_fails_doctor(tmp_path: Path) -> None:
    with _tmpfs(tmp_path / "small", "1m") as mount:
        subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)
        checks = run_checks(_env(mount / "agent"), tmp_path)
        ddir = _by_name(checks, "data dir")
        assert not ddir.ok and f"cannot be created: {mount} is not writable" in ddir.detail
        assert "PI_CODING_AGENT_DIR" in ddir.fix


def test_a_store_path_that_is_no_file_fails_doctor_without_calling_it_damaged(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    (agent / "memory-bridge" / "memory.sqlite3").mkdir(parents=True)  # a directory in the store's place
    checks = run_checks(_env(agent), tmp_path)
    store = _by_name(checks, "store")
    assert not store.ok and store.detail.endswith("memory.sqlite3 is not a file"), render(checks)
    assert "damaged" not in store.detail and ".recover" not in store.fix
