"""README followed literally: on a clean copy of the checkout, `bash scripts/setup.sh`, then the
commands of README's `readme-test` block, run as written, give Pi with memory (the second
prompt's request carries what the first one said)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from harness import REPO_ROOT, FakeModel, PiEnv, TextReply, pi_installs
from install_kit import OFFLINE_PIP, repack, source_copy, wheelhouse
from install_kit import _closure as dependency_closure

pytestmark = pytest.mark.slow
README_PI = "1.6.0"  # the Pi the README's run commands put on PATH


def readme_block(tag: str) -> str:
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    found = re.findall(rf"```bash {tag}\n(.*?)```", text, flags=re.DOTALL)
    assert len(found) == 1, f"README must have exactly one ```bash {tag} block"
    return found[0]


def _dev_wheels(out: Path) -> Path:
    """Offline stand-in for PyPI: our wheel, the runtime and dev dependencies, pip itself."""
    wheelhouse(out)
    import importlib.metadata

    from packaging.requirements import Requirement

    dev = [
        Requirement(r).name for r in importlib.metadata.requires("pi-memory-bridge") or [] if "extra ==" in r
    ]
    names = {d.metadata["Name"] for name in dev for d in [importlib.metadata.distribution(name)]}
    for name in sorted(names | {"pip"}):
        repack(importlib.metadata.distribution(name), out)
        for dep in dependency_closure(name):
            repack(dep, out)
    return out


def test_readme_setup_and_run_commands_give_pi_with_memory(tmp_path: Path, fake_model: FakeModel) -> None:
    install = next(i for i in pi_installs() if i.version == README_PI)
    checkout = source_copy(tmp_path / "checkout")
    (checkout / ".tools").symlink_to(REPO_ROOT / ".tools")  # the downloaded Node and Pi, as a cache
    wheels = _dev_wheels(tmp_path / "wheels")
    offline = {
        **OFFLINE_PIP,
        "PIP_FIND_LINKS": str(wheels),
        "npm_config_offline": "true",
        "npm_config_cache": str(Path.home() / ".npm"),  # what this machine's setup already fetched
        "PATH": f"{install.node.parent}:/usr/bin:/bin",
    }
    setup = subprocess.run(["bash", "scripts/setup.sh"], cwd=checkout, env={**os.environ, **offline},
                           capture_output=True, text=True, timeout=900, check=False)  # fmt: skip
    assert setup.returncode == 0, setup.stdout + setup.stderr
    assert (checkout / ".venv" / "bin" / "pi-memory-bridge").is_file()

    env = PiEnv(install, tmp_path / "pi", fake_model.base_url)
    try:
        env.write_settings({"defaultProvider": "fake", "defaultModel": "fake-model"})  # the user's own model
        config = env.agent_dir / "memory-bridge" / "config.json"
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(json.dumps({"schemaVersion": 1, "recall": {"deadlineMs": 15000}}))
        fake_model.script(TextReply("Noted: Go backend, named constants."), TextReply("You hate them."))
        run_env = env.environ({"PATH": "/usr/bin:/bin"})  # only what the README's commands put on PATH
        commands = readme_block("readme-test")
        run = subprocess.run(["bash", "-euo", "pipefail", "-c", commands], cwd=checkout, env=run_env,
                             capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
        assert run.returncode == 0, run.stdout + run.stderr
        assert "You hate them." in run.stdout
        system = fake_model.last_request().recalled_block
        assert "<recalled_memory" in system and "I hate magic numbers" in system
    finally:
        env.close()
