"""Which project a session works on: the git work tree's root, else the directory Pi runs in.

One rule for every room that keys on a project (pausing, learning's memories and notes, the
inspector): symlinks are resolved first, so a checkout reached through a symlink and through its
real path is one project, and a pause said in one is honoured in the other.
"""

from __future__ import annotations

import os
from pathlib import Path


def project_of(cwd: Path) -> str:
    """The nearest ancestor of `cwd` (itself included) holding `.git` (a directory, or the file a
    worktree or submodule has), else `cwd`; always an absolute path with symlinks resolved."""
    here = Path(os.path.realpath(cwd.expanduser()))
    for folder in (here, *here.parents):
        if (folder / ".git").exists():
            return str(folder)
    return str(here)


def project_name(project: str) -> str:
    """A short name for display and file names: the directory's last part."""
    return Path(project).name or project
