"""How to install the pinned SDK into the Python that runs this sidecar, whoever installed it.

A checkout's venv and a pipx venv have pip; a `uv tool install` venv has none, but uv can install
into any interpreter (`uv pip install --python`). Neither: say how to reinstall with the SDK.
"""

from __future__ import annotations

import importlib.util
import shlex
import shutil
import sys
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class InstallPlan:
    argv: tuple[str, ...] | None  # the command to run, or None when there is none that would work
    note: str  # what to do instead when argv is None, else ""

    def shell(self) -> str:
        return shlex.join(self.argv) if self.argv else self.note


def plan_install(
    requirement: str, *, python: str | None = None, has_pip: bool | None = None, uv: str | None = ""
) -> InstallPlan:
    """The install command for `requirement` (`uv=""` means: look uv up on PATH)."""
    python = python or sys.executable
    if has_pip is None:
        has_pip = importlib.util.find_spec("pip") is not None
    if has_pip:
        return InstallPlan((python, "-m", "pip", "install", requirement), "")
    uv_path = shutil.which("uv") if uv == "" else uv
    if uv_path:
        return InstallPlan((uv_path, "pip", "install", "--python", python, requirement), "")
    quoted = shlex.quote(requirement)
    return InstallPlan(
        None,
        f"this Python ({python}) has no pip and uv is not on PATH; reinstall with the SDK: "
        f"uv tool install --reinstall pi-memory-bridge --with {quoted} "
        f"(or: pipx inject pi-memory-bridge {quoted})",
    )
