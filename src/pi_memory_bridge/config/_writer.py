"""Writing the global config file: atomic, private, readable, and free of secrets by construction.

`BridgeConfig` has no field that can hold a key (keys live in `Secrets`), so whatever is written
here can only name key files, never contain keys.
"""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

from pi_memory_bridge.config._models import BridgeConfig
from pi_memory_bridge.config._paths import global_config_path
from pi_memory_bridge.private_files import write_atomically


def write_global_config(agent_dir: Path, config: BridgeConfig) -> Path:
    """Replace the global config file with `config`; returns its path.

    Raises pydantic's ValidationError if `config` was built without validation and is invalid,
    and OSError if the file cannot be written; the previous file is then left untouched.
    """
    checked = BridgeConfig.model_validate(config.model_dump(), by_alias=True, by_name=False)
    text = json.dumps(checked.model_dump(mode="json", exclude_none=True), indent=2, ensure_ascii=False)
    target = global_config_path(agent_dir)
    write_atomically(_write_through_symlink(target), text + "\n")
    return target


def _write_through_symlink(target: Path) -> Path:
    # A config file kept in a dotfiles repository and symlinked here stays a symlink: we replace
    # the file it points to, not the link.
    if not target.is_symlink():
        return target
    try:
        return target.resolve()
    except RuntimeError as exc:  # a symlink loop, as Python before 3.13 says it: the OSError promised
        raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), str(target)) from exc
