"""Writing the global config file: atomic, private, readable, and free of secrets by construction.

`BridgeConfig` has no field that can hold a key (keys live in `Secrets`), so whatever is written
here can only name key files, never contain keys.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path

from pi_memory_bridge.config._models import BridgeConfig
from pi_memory_bridge.config._paths import global_config_path


def write_global_config(agent_dir: Path, config: BridgeConfig) -> Path:
    """Replace the global config file with `config`; returns its path.

    Raises pydantic's ValidationError if `config` was built without validation and is invalid,
    and OSError if the file cannot be written; the previous file is then left untouched.
    """
    checked = BridgeConfig.model_validate(config.model_dump(), by_alias=True, by_name=False)
    text = json.dumps(checked.model_dump(mode="json", exclude_none=True), indent=2, ensure_ascii=False)
    target = global_config_path(agent_dir)
    _atomic_write(_write_through_symlink(target), text + "\n")
    return target


def _write_through_symlink(target: Path) -> Path:
    # A config file kept in a dotfiles repository and symlinked here stays a symlink: we replace
    # the file it points to, not the link.
    return target.resolve() if target.is_symlink() else target


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, temp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            os.fchmod(handle.fileno(), 0o600)
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp_name, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp_name)
        raise
    _fsync_directory(path.parent)


def _fsync_directory(directory: Path) -> None:
    # Makes the rename itself durable; without it a crash can bring back the old file.
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
