"""The background sidecar's start-up contract is defined once (daemon_contract.py): the
shim reads it from its generated table (the staleness test is in test_shim_tables.py), the
sidecar's start-up code from the module, and neither keeps a copy of its own."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from pi_memory_bridge import daemon_contract as contract
from pi_memory_bridge.runtime_dir import runtime_dir
from pi_memory_bridge.sidecar import quick_start, tables
from pi_memory_bridge.sidecar.daemon_start import take_lock

DAEMON_TS = Path(__file__).resolve().parents[1] / "extension-shim" / "src" / "daemon.ts"


def _keyed(name: str) -> bool:
    """The shim hashes `name` into the socket's name (daemon.ts, `socketPath`)."""
    return name not in contract.PER_RUN_VARS and (
        name in contract.SIDECAR_ENV_NAMES or name.startswith(contract.SIDECAR_ENV_PREFIXES)
    )


def test_what_the_stored_answer_reads_is_part_of_what_keys_the_daemon() -> None:
    # else two Pis that share a daemon could be told a stored answer meant for another environment
    for prefix in contract.ANSWER_ENV_PREFIXES:
        assert _keyed(prefix + "ANY"), prefix
    for name in contract.ANSWER_ENV_NAMES:
        assert _keyed(name), name


def test_the_shim_takes_every_value_from_the_generated_table() -> None:
    # the code without its comments (which may name a variable in backticks)
    source = re.sub(r"/\*.*?\*/|//[^\n]*", "", DAEMON_TS.read_text(encoding="utf-8"), flags=re.DOTALL)
    assert 'from "./generated/tables.ts"' in source
    values = [v for v in tables.daemon_contract_row().values() if isinstance(v, str)]
    values += [v for v in tables.daemon_contract_row().values() if isinstance(v, list) for v in v]
    copies = [v for v in values if f'"{v}"' in source or f"`{v}" in source]
    assert copies == [], f"daemon.ts spells these itself: {copies}"


def test_quick_start_fingerprints_the_contracts_answer_environment(tmp_path: Path) -> None:
    params = {"agentDir": str(tmp_path / "agent"), "cwd": str(tmp_path)}
    base = {"HOME": str(tmp_path)}
    first = quick_start.fingerprint(params, base)
    assert first is not None
    for name in ("PI_MEMORY_BRIDGE_BACKEND", "XDG_CONFIG_HOME", "TDAI_MEMORY_ENDPOINT"):
        assert quick_start.fingerprint(params, {**base, name: "x"}) != first, name
    for name in contract.PER_RUN_VARS:  # set per run: a stored answer still matches
        assert quick_start.fingerprint(params, {**base, name: "x"}) == first, name


def test_the_lock_holds_the_pid_as_the_contract_says(tmp_path: Path) -> None:
    sock = tmp_path / f"abc{contract.SOCKET_SUFFIX}"
    fd = take_lock(sock, wait_s=0)
    assert fd is not None
    try:
        lock = Path(f"{sock}{contract.LOCK_SUFFIX}")
        text = lock.read_text()
        assert text == contract.lock_text(os.getpid())
        assert contract.read_lock_pid(text) == os.getpid()
    finally:
        os.close(fd)


@pytest.mark.parametrize("text", ["", "\n", "1\n", "12ab\n", "-5\n"])
def test_a_lock_naming_no_process_of_ours_reads_as_none(text: str) -> None:
    assert contract.read_lock_pid(text) is None


def test_the_runtime_dir_follows_the_contracts_order(tmp_path: Path) -> None:
    folder = f"{contract.SOCKET_DIR_PREFIX}{os.getuid()}"
    both = {"XDG_RUNTIME_DIR": str(tmp_path / "xdg"), "TMPDIR": str(tmp_path / "tmp")}
    assert runtime_dir(both) == tmp_path / "xdg" / folder
    assert runtime_dir({**both, "XDG_RUNTIME_DIR": ""}) == tmp_path / "tmp" / folder
    assert runtime_dir({}) == Path(contract.RUNTIME_DIR_FALLBACK) / folder
