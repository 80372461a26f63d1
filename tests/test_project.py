"""One project rule for every room: pausing and learning agree on a checkout reached through a
symlink (they used to differ: pause resolved symlinks, learning did not)."""

from __future__ import annotations

from pathlib import Path

from pi_memory_bridge.config import LearningSettings
from pi_memory_bridge.engine.learning import Learning
from pi_memory_bridge.operations.pause import ProjectPause, paused_check, set_paused
from pi_memory_bridge.project import project_of


def _checkout(tmp_path: Path) -> tuple[Path, Path]:
    real = tmp_path / "real" / "repo"
    (real / ".git").mkdir(parents=True)
    (real / "src" / "deep").mkdir(parents=True)
    link = tmp_path / "link"
    link.symlink_to(real)
    return real, link


def test_the_git_root_else_the_folder_with_symlinks_resolved(tmp_path: Path) -> None:
    real, link = _checkout(tmp_path)
    assert project_of(real / "src" / "deep") == str(real)
    assert project_of(link / "src" / "deep") == str(real)
    plain = tmp_path / "plain"
    plain.mkdir()
    (tmp_path / "plain-link").symlink_to(plain)
    assert project_of(tmp_path / "plain-link") == str(plain)


def test_pause_and_learning_see_one_project_through_a_symlinked_checkout(tmp_path: Path) -> None:
    real, link = _checkout(tmp_path)
    agent = tmp_path / "agent"
    learning = Learning(
        LearningSettings(), agent_dir=agent, cwd=link / "src", has_ui=False, peer=None, env={}
    )
    pause = ProjectPause(agent, link / "src")
    assert learning.project == pause.project == str(real)
    assert set_paused(agent, learning.project, True).ok
    assert ProjectPause(agent, real).paused() and pause.paused()
    assert paused_check(agent)(str(link / "src" / "deep"))  # catch-up skips its session files too
