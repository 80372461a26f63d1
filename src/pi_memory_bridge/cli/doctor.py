"""`pi-memory-bridge doctor`: checks config, key files, data dir and disk, every file the bridge
owns (store, outbox, notes, profile, skill ledger, logs), the backend, and that Pi can load the
shim, without Pi.

Read-only: doctor creates, migrates and repairs nothing (not the data dir, not a store, not under
a fallback home when HOME is unset). Its one write is a temporary probe of real bytes in an
existing data dir, removed at once, because a full filesystem still lets an empty file be made;
with HOME unset (the agent dir is only a guess from the password database) it does not even do
that. Every problem names the file at fault; `pi-memory-bridge doctor` exits 1 on any.
"""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path

from pi_memory_bridge._version import __version__
from pi_memory_bridge.backends.base import BackendError
from pi_memory_bridge.cli.doctor_files import (
    Check,
    Finding,
    NewerSchema,
    check_data_dir,
    check_disk,
    fail,
    inspect_sqlite,
    loose_files,
    ok,
    warn,
)
from pi_memory_bridge.config import LoadedConfig, data_dir, default_agent_dir, global_config_path, load_config
from pi_memory_bridge.config._keyfile import read_key_file
from pi_memory_bridge.plural import counted
from pi_memory_bridge.sqlite_integrity import STORE_AFTER_MOVE

MIN_NODE = (22, 19)
_KEY_FILE_KEYS = ("memorycore.userKeyFile", "memorycore.gatewayApiKeyFile")
_BLOCKED_SUMMARY = "cannot start until the problems above are fixed"

__all__ = ["Check", "render", "run_checks"]


def _node_version(node: str) -> tuple[int, ...] | None:
    try:
        out = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=10).stdout.strip()
        return tuple(int(x) for x in out.lstrip("v").split(".")[:2])
    except (OSError, ValueError, subprocess.SubprocessError):
        return None


def run_checks(env: Mapping[str, str], cwd: Path) -> list[Check]:
    agent_dir = default_agent_dir(env)
    loaded = load_config(agent_dir=agent_dir, cwd=cwd, project_trusted=False, env=env)
    ddir = data_dir(agent_dir)
    checks: list[Check] = []
    key_checks = _check_key_files(loaded)
    checks.extend(_check_config(loaded, global_config_path(agent_dir), key_checks))
    checks.extend(key_checks)
    if not env.get("HOME") and not env.get("PI_CODING_AGENT_DIR"):
        checks.append(
            warn(
                "home",
                f"HOME is not set: Pi and the sidecar fall back to {agent_dir}; checked without writing",
                "set HOME (or PI_CODING_AGENT_DIR) to the directory Pi should use",
            )
        )
    checks.append(check_data_dir(ddir))
    may_write = bool(env.get("HOME") or env.get("PI_CODING_AGENT_DIR"))
    checks.append(check_disk(ddir, may_write=may_write))
    checks.append(_check_store(ddir / "memory.sqlite3", local=loaded.config.backend == "local"))
    checks.append(_check_outbox(ddir / "outbox.sqlite3"))
    checks.extend(_check_notes(ddir))
    checks.extend(_check_owned_dirs(ddir))
    if loaded.config.backend == "memorycore":
        checks.append(asyncio.run(_check_remote_backend(loaded, agent_dir)))
        from pi_memory_bridge.backends.memorycore import install_command, sdk_available

        if sdk_available():
            checks.append(ok("memorycore sdk", "installed"))
        else:
            checks.append(fail("memorycore sdk", "not installed", f"install it: {install_command()}"))
    from pi_memory_bridge.cli.doctor_pi import extension_checks, pi_check

    checkout = Path(__file__).resolve().parents[3]
    for found in [*extension_checks(agent_dir, cwd, env, checkout), pi_check(env)]:
        checks.append(Check(found.name, found.ok, found.detail, found.fix, found.warning))
    checks.append(_check_node(env))
    return checks


def _check_config(loaded: LoadedConfig, gpath: Path, key_checks: list[Check]) -> list[Check]:
    keys_failed = any(not c.ok for c in key_checks)
    errors = [
        p
        for p in loaded.errors
        if p.key not in _KEY_FILE_KEYS and not (keys_failed and _BLOCKED_SUMMARY in p.message)
    ]
    checks: list[Check] = []
    if errors:
        files = sorted({p.source for p in errors if p.source.startswith("/")})
        env_keys = sorted({p.key for p in errors if not p.source.startswith("/")})
        fixes = [f"edit {f}" for f in files] + (
            [f"fix the environment: {', '.join(env_keys)}"] if env_keys else []
        )
        checks.append(fail("config", "; ".join(str(p) for p in errors), "; ".join(fixes)))
    else:
        where = str(gpath) if gpath.exists() else f"defaults ({gpath} does not exist)"
        state = "on" if loaded.config.enabled else "off"
        checks.append(ok("config", f"{where}; backend {loaded.config.backend}, memory {state}"))
    checks.extend(warn("config", str(p)) for p in loaded.warnings if p.key not in _KEY_FILE_KEYS)
    loose = loose_files([gpath])
    if loose:
        checks.append(warn("permissions", f"{gpath} is readable by others", f"chmod 600 {gpath}"))
    return checks


def _check_key_files(loaded: LoadedConfig) -> list[Check]:
    settings = loaded.config.memorycore
    if loaded.config.backend != "memorycore" or settings is None:
        return []
    checks: list[Check] = []
    for key_file in (settings.user_key_file, settings.gateway_api_key_file):
        if key_file is None:
            continue
        read = read_key_file(Path(key_file))
        if read.error is not None:
            checks.append(fail("key file", read.error, f"fix {key_file}: a regular file, mode 600, one key"))
        elif read.warning is not None:
            checks.append(warn("key file", read.warning, f"chmod 600 {key_file}"))
        else:
            checks.append(ok("key file", f"{key_file} (readable, one key)"))
    return checks


def _store_detail(db: Path) -> Callable[[sqlite3.Connection], Finding]:
    from pi_memory_bridge.backends.data_dir import latest_schema_version

    latest = latest_schema_version()

    def read(conn: sqlite3.Connection) -> Finding:
        version = conn.execute("SELECT max(version) FROM schema_migrations").fetchone()[0] or 0
        if version > latest:
            raise NewerSchema(f"was written by a newer pi-memory-bridge (schema v{version} > v{latest})")
        turns = conn.execute("SELECT count(*) FROM turns").fetchone()[0]
        atomic = conn.execute("SELECT count(*) FROM atomic").fetchone()[0]
        return Finding(f"{db} (schema v{version}; turns {turns}, atomic {atomic})")

    return read


def _check_store(db: Path, *, local: bool) -> Check:
    if not local and not db.exists():
        return ok("store", f"{db} (none: the memorycore backend keeps memory on the server)")
    return inspect_sqlite(
        "store",
        db,
        what="store",
        after_move=STORE_AFTER_MOVE,
        read=_store_detail(db),
        missing="(not created yet; the first start creates it)",
    )


def _outbox_detail(db: Path) -> Callable[[sqlite3.Connection], Finding]:
    from pi_memory_bridge.outbox._schema import SCHEMA_VERSION

    def read(conn: sqlite3.Connection) -> Finding:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise NewerSchema(
                f"was written by a newer pi-memory-bridge (schema v{version} > v{SCHEMA_VERSION})"
            )
        states = dict(conn.execute("SELECT state, count(*) FROM records GROUP BY state").fetchall())
        names = ("pending", "in_flight", "dead", "quarantined")
        detail = f"{db} ({', '.join(f'{state} {states.get(state, 0)}' for state in names)})"
        if states.get("dead", 0) or states.get("quarantined", 0):
            return Finding(
                detail,
                "some turns could not be delivered",
                "see them with `pi-memory-bridge outbox list dead` (or `list quarantined`); requeue or purge",
            )
        return Finding(detail)

    return read


def _check_outbox(db: Path) -> Check:
    return inspect_sqlite(
        "outbox",
        db,
        what="outbox",
        after_move=(
            "turns still waiting in it have not reached the memory store; the next start creates an "
            "empty outbox (the memory store is not affected), and"
        ),
        read=_outbox_detail(db),
        missing="(not created yet; the first capture creates it)",
    )


def _check_notes(ddir: Path) -> list[Check]:
    from pi_memory_bridge.backends.data_dir import NoteFiles

    notes = NoteFiles(ddir)
    checks: list[Check] = []
    listing = notes.list_scenarios()
    if listing.problems:
        checks.extend(
            warn("notes", problem, "fix or remove that note; the others are used")
            for problem in listing.problems
        )
    elif notes.l2_dir.is_dir():
        checks.append(ok("notes", f"{notes.l2_dir} ({counted(len(listing.entries), 'note')})"))
    try:
        notes.read_profile()
    except BackendError as exc:
        checks.append(
            fail("profile", str(exc), f"fix {notes.profile_path} (your own file; the store is unaffected)")
        )
    return checks


def _check_owned_dirs(ddir: Path) -> list[Check]:
    owned = [ddir, ddir / "l2", ddir / "logs", ddir / "skill-capture", ddir / "profile.md"]
    owned += sorted((ddir / "logs").glob("sidecar.log*")) if (ddir / "logs").is_dir() else []
    loose = loose_files(owned)
    checks: list[Check] = []
    if loose:
        checks.append(
            warn("permissions", f"readable by others: {', '.join(loose)}", f"chmod go-rwx {' '.join(loose)}")
        )
    ledger = ddir / "skill-capture"
    if ledger.is_dir():
        stuck = len(list(ledger.glob("*.dead"))) + len(list(ledger.glob("*.uncertain")))
        detail = f"{ledger} ({stuck} captures dead or uncertain)" if stuck else str(ledger)
        checks.append(ok("skill ledger", detail))
    return checks


async def _check_remote_backend(loaded: LoadedConfig, agent_dir: Path) -> Check:
    if not loaded.backend_ready:
        return warn("backend", "memorycore: not checked until the problems above are fixed")
    from pi_memory_bridge.backends.factory import open_backend

    try:
        backend = await asyncio.to_thread(open_backend, loaded, agent_dir)
        try:
            status = await backend.status()
        finally:
            await backend.close()
    except (BackendError, OSError) as exc:
        return fail(
            "backend",
            f"memorycore: {exc}",
            "check the endpoint, ids and keys (`pi-memory-bridge doctor` after each change)",
        )
    counts = ", ".join(f"{k} {v}" for k, v in sorted(status.counts.items()))
    detail = f"memorycore: {status.detail}" if status.detail else "memorycore"
    return Check(
        "backend", status.ok, f"{detail} ({counts})" if counts else detail, "; ".join(status.problems)
    )


def _check_node(env: Mapping[str, str]) -> Check:
    node = shutil.which("node", path=env.get("PATH"))
    version = _node_version(node) if node else None
    if version is None or version < MIN_NODE:
        shown = ".".join(map(str, version)) if version else "not found"
        return warn(
            "node",
            f"node on PATH: {shown}; Pi needs >= {'.'.join(map(str, MIN_NODE))}",
            "scripts/setup.sh installs Node 22 under .tools/node22",
        )
    return ok("node", f"{node} v{'.'.join(map(str, version))}")


def render(checks: list[Check]) -> str:
    lines = [f"pi-memory-bridge {__version__} doctor"]
    for c in checks:
        mark = "ok  " if c.ok and not c.warning else ("warn" if c.ok or c.warning else "FAIL")
        lines.append(f"[{mark}] {c.name}: {c.detail}")
        if c.fix and not (c.ok and not c.warning):
            lines.append(f"       fix: {c.fix}")
    return "\n".join(lines)
