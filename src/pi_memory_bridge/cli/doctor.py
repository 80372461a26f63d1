"""`pi-memory-bridge doctor`: checks config, backend, data dir and that Pi can load the shim, without Pi."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pi_memory_bridge._version import __version__
from pi_memory_bridge.backends.base import BackendError
from pi_memory_bridge.backends.factory import open_backend
from pi_memory_bridge.config import LoadedConfig, data_dir, default_agent_dir, global_config_path, load_config

MIN_NODE = (22, 19)


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""
    warning: bool = False


def _node_version(node: str) -> tuple[int, ...] | None:
    try:
        out = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=10).stdout.strip()
        return tuple(int(x) for x in out.lstrip("v").split(".")[:2])
    except (OSError, ValueError, subprocess.SubprocessError):
        return None


def run_checks(env: Mapping[str, str], cwd: Path) -> list[Check]:
    agent_dir = default_agent_dir(env)
    checks: list[Check] = []
    loaded = load_config(agent_dir=agent_dir, cwd=cwd, project_trusted=False, env=env)
    gpath = global_config_path(agent_dir)
    if loaded.ok:
        where = str(gpath) if gpath.exists() else f"defaults ({gpath} does not exist)"
        checks.append(
            Check(
                "config",
                True,
                f"{where}; backend {loaded.config.backend}, "
                f"memory {'on' if loaded.config.enabled else 'off'}",
            )
        )
    else:
        checks.append(
            Check(
                "config",
                False,
                "; ".join(str(p) for p in loaded.problems if p.severity == "error"),
                f"edit {gpath}",
            )
        )
    for warn in (p for p in loaded.problems if p.severity == "warning"):
        checks.append(Check("config", True, str(warn), warning=True))
    ddir = data_dir(agent_dir)
    try:
        ddir.mkdir(parents=True, exist_ok=True, mode=0o700)
        probe = ddir / f".doctor-{os.getpid()}"
        probe.write_text("ok")
        probe.unlink()
        checks.append(Check("data dir", True, str(ddir)))
    except OSError as exc:
        checks.append(Check("data dir", False, f"{ddir}: {exc}", "check permissions and free space"))
    checks.append(asyncio.run(_check_backend(loaded, agent_dir)))
    if loaded.config.backend == "memorycore":
        from pi_memory_bridge.backends.memorycore import install_command, sdk_available

        if sdk_available():
            checks.append(Check("memorycore sdk", True, "installed"))
        else:
            checks.append(Check("memorycore sdk", False, "not installed", f"install it: {install_command()}"))
    from pi_memory_bridge.cli.doctor_pi import extension_checks, pi_check

    checkout = Path(__file__).resolve().parents[3]
    for found in [*extension_checks(agent_dir, cwd, env, checkout), pi_check(env)]:
        checks.append(Check(found.name, found.ok, found.detail, found.fix, found.warning))
    node = shutil.which("node", path=env.get("PATH"))
    version = _node_version(node) if node else None
    if version is None or version < MIN_NODE:
        shown = ".".join(map(str, version)) if version else "not found"
        checks.append(
            Check(
                "node",
                False,
                f"node on PATH: {shown}; Pi needs >= {'.'.join(map(str, MIN_NODE))}",
                "scripts/setup.sh installs Node 22 under .tools/node22",
                warning=True,
            )
        )
    else:
        checks.append(Check("node", True, f"{node} v{'.'.join(map(str, version))}"))
    return checks


async def _check_backend(loaded: LoadedConfig, agent_dir: Path) -> Check:
    name = loaded.config.backend
    try:
        backend = await asyncio.to_thread(open_backend, loaded, agent_dir)
        try:
            status = await backend.status()
        finally:
            await backend.close()
    except (BackendError, OSError) as exc:
        fix = (
            "move the damaged file aside; a new store is created on the next start"
            if name == "local"
            else "check the endpoint, ids and keys (`pi-memory-bridge doctor` after each change)"
        )
        return Check("backend", False, f"{name}: {exc}", fix)
    counts = ", ".join(f"{k} {v}" for k, v in sorted(status.counts.items()))
    detail = f"{name}: {status.detail}" if status.detail else name
    return Check(
        "backend", status.ok, f"{detail} ({counts})" if counts else detail, "; ".join(status.problems)
    )


def render(checks: list[Check]) -> str:
    lines = [f"pi-memory-bridge {__version__} doctor"]
    for c in checks:
        mark = "ok  " if c.ok and not c.warning else ("warn" if c.ok or c.warning else "FAIL")
        lines.append(f"[{mark}] {c.name}: {c.detail}")
        if c.fix and not (c.ok and not c.warning):
            lines.append(f"       fix: {c.fix}")
    return "\n".join(lines)
