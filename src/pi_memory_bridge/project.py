"""Which project a session works on: the git work tree's root, else the directory Pi runs in."""

from __future__ import annotations

from pathlib import Path

MAX_DEPTH = 64


def project_of(cwd: Path) -> str:
    """The nearest ancestor of `cwd` (itself included) holding `.git` (a directory, or the file a
    worktree or submodule has), else `cwd`; always an absolute path."""
    start = cwd.expanduser().absolute()
    here = start
    for _ in range(MAX_DEPTH):
        if (here / ".git").exists():
            return str(here)
        if here.parent == here:
            break
        here = here.parent
    return str(start)


def project_name(project: str) -> str:
    """A short name for display and file names: the directory's last part."""
    return Path(project).name or project
