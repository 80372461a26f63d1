"""Where config and data live, following Pi's own rules for its agent dir."""

from __future__ import annotations

import os
import pwd
from collections.abc import Mapping
from pathlib import Path

DATA_DIR_NAME = "memory-bridge"
GLOBAL_CONFIG_NAME = "config.json"
PROJECT_CONFIG_DIR = ".pi"
PROJECT_CONFIG_NAME = "memory-bridge.json"


def default_agent_dir(env: Mapping[str, str]) -> Path:
    """`$PI_CODING_AGENT_DIR` or `~/.pi/agent`, as Pi's getAgentDir() computes it."""
    configured = env.get("PI_CODING_AGENT_DIR")
    if configured:
        return expand_home(configured, env)
    return home_dir(env) / ".pi" / "agent"


def home_dir(env: Mapping[str, str]) -> Path:
    # Node's homedir(), which Pi uses, prefers $HOME and falls back to the password database.
    home = env.get("HOME")
    if home:
        return Path(home)
    return Path(pwd.getpwuid(os.getuid()).pw_dir)


def expand_home(value: str, env: Mapping[str, str]) -> Path:
    """Expand a leading `~` or `~/` against the given environment's home (like Pi does)."""
    if value == "~":
        return home_dir(env)
    if value.startswith("~/"):
        return home_dir(env) / value[2:]
    return Path(value)


def data_dir(agent_dir: Path) -> Path:
    return agent_dir / DATA_DIR_NAME


def global_config_path(agent_dir: Path) -> Path:
    return data_dir(agent_dir) / GLOBAL_CONFIG_NAME


def project_config_path(cwd: Path) -> Path:
    return cwd / PROJECT_CONFIG_DIR / PROJECT_CONFIG_NAME
