"""The user's install, end to end and offline: the built wheel installed the way pipx does (not on
PATH), the built npm tarball installed with `pi install npm:pi-memory-bridge`, in a throw-away
home, on both Pi versions: Pi lists it, captures and recalls, doctor is all ok; without the
sidecar the footer and status name the install command; `pi install <repository root>` works;
README's venv route (no uv, no pipx) gives Pi with memory and a working inspector."""

from __future__ import annotations

import http.cookiejar
import os
import re
import shutil
import subprocess
import sys
import urllib.request
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from bridge import SIDECAR, stored_turns, write_config
from harness import REPO_ROOT, FakeModel, PiEnv, PiInstall, ScriptedDialogs, TextReply, pi_installs
from harness.tmux import TmuxPi
from install_kit import OFFLINE_PIP, PACKAGE, npm_pack, npm_wrapper, tool_install, wheelhouse

pytestmark = pytest.mark.slow
BASE_PATH = "/usr/bin:/bin"  # no checkout venv, no ~/.local/bin: the extension must find the sidecar


@dataclass(frozen=True)
class Kit:
    wheels: Path
    tarball: Path


@pytest.fixture(scope="session")
def kit(tmp_path_factory: pytest.TempPathFactory) -> Kit:
    """Built once for both Pi versions."""
    root = tmp_path_factory.mktemp("kit")
    node_dir = pi_installs()[0].node.parent
    npm_env = {
        "PATH": f"{node_dir}:{os.environ.get('PATH', BASE_PATH)}",
        "npm_config_offline": "true",
        "npm_config_cache": str(root / "npm-cache"),
    }
    return Kit(wheelhouse(root / "wheels"), npm_pack(root / "npm", npm_env))


@pytest.fixture
def home(pi_install: PiInstall, fake_model: FakeModel, tmp_path: Path) -> Iterator[PiEnv]:
    env = PiEnv(pi_install, tmp_path / "pi", fake_model.base_url)
    env.extra_env["PATH"] = f"{pi_install.node.parent}:{BASE_PATH}"
    try:
        yield env
    finally:
        env.close()


def _pi(env: PiEnv, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(env.install.node), str(env.install.cli), *args], cwd=env.work_dir, env=env.environ(),
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def _system_prompt_block(fake_model: FakeModel) -> str:
    system = fake_model.last_request().recalled_block
    return system[system.find("<recalled_memory") :] if "<recalled_memory" in system else ""


def test_the_metadata_is_one_pypi_accepts(kit: Kit) -> None:
    [wheel] = kit.wheels.glob("pi_memory_bridge-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        meta = zf.read(next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))).decode()
        names = zf.namelist()
    requires = [line for line in meta.splitlines() if line.startswith("Requires-Dist:")]
    assert requires and not any("@" in line for line in requires)  # no direct reference, even in an extra
    assert "pi_memory_bridge/py.typed" in names and not any(n.startswith(("tests/", "e2e/")) for n in names)
    listed = subprocess.run(
        ["tar", "tzf", str(kit.tarball)], capture_output=True, text=True, check=True
    ).stdout
    assert {"package/package.json", "package/index.ts", "package/extension-shim/src/locate.ts"} <= set(
        listed.split()
    )
    assert not any("/test/" in n or "node_modules" in n or ".venv" in n for n in listed.split())


def test_two_command_install_lists_captures_recalls_and_doctor_is_ok(
    home: PiEnv, fake_model: FakeModel, kit: Kit, tmp_path: Path
) -> None:
    sidecar = tool_install(home.home, kit.wheels)
    write_config(home, {"recall": {"deadlineMs": 15000}})  # a loaded machine must not drop a layer
    home.write_settings({"npmCommand": [str(npm_wrapper(tmp_path / "npm-bin", kit.tarball))]})
    installed = _pi(home, "install", f"npm:{PACKAGE}")
    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert (home.agent_dir / "npm" / "node_modules" / PACKAGE / "index.ts").is_file()
    listed = _pi(home, "list")
    assert f"npm:{PACKAGE}" in listed.stdout, listed.stdout

    fake_model.script(TextReply("Noted: Go backend, no magic numbers."), TextReply("Magic numbers."))
    first = home.run_print(["I do the backend in Go and I hate magic numbers."])
    assert first.returncode == 0, first.stderr
    assert any("magic numbers" in t["user_text"] for t in stored_turns(home))
    second = home.run_print(["What do I think about magic numbers?"])
    assert second.returncode == 0, second.stderr
    assert "I hate magic numbers" in _system_prompt_block(fake_model)

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "pi").symlink_to(home.install.cli)
    doctor_env = {**home.environ(), "PATH": f"{bin_dir}:{home.install.node.parent}:{BASE_PATH}"}
    doctor = subprocess.run([str(sidecar), "doctor"], env=doctor_env, cwd=home.work_dir, capture_output=True,
                            text=True, timeout=120, check=False)  # fmt: skip
    lines = [line for line in doctor.stdout.splitlines() if line.startswith("[")]
    assert doctor.returncode == 0 and lines and all(line.startswith("[ok  ]") for line in lines), (
        doctor.stdout
    )
    assert f"npm:{PACKAGE} in" in doctor.stdout and f"Pi {home.install.version}" in doctor.stdout

    # the sidecar uninstalled: Pi still answers, the footer and status say how to install it
    shutil.rmtree(home.home / ".local")
    rpc = home.start_rpc(dialogs=ScriptedDialogs())
    rpc.prompt_and_settle("/tdai-memory-status")
    rpc.wait_until(lambda: any("uv tool install" in n.message for n in rpc.ui.notifications), timeout=15)
    footer = rpc.ui.status("tdai-memory") or ""
    assert "not installed" in footer and "uv tool install pi-memory-bridge" in footer, footer
    fake_model.script(TextReply("still here"))
    answered = rpc.prompt_and_settle("hello without memory")
    assert answered.response.get("success"), answered.response
    assert rpc.close() == 0


def test_the_readme_venv_route_gives_pi_with_memory_and_a_working_inspector(
    home: PiEnv, fake_model: FakeModel, kit: Kit, tmp_path: Path
) -> None:
    """A machine with neither uv nor pipx: README's venv lines, run as written (offline: pip reads
    the built wheels, npm the built tarball), give a `pi` with memory and a working inspector."""
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    [lines] = re.findall(r"```bash venv-install\n(.*?)```", readme, flags=re.DOTALL)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(getattr(sys, "_base_executable", sys.executable))
    (bin_dir / "pi").write_text(f'#!/bin/sh\nexec "{home.install.node}" "{home.install.cli}" "$@"\n')
    (bin_dir / "pi").chmod(0o755)
    home.write_settings({"npmCommand": [str(npm_wrapper(tmp_path / "npm-bin", kit.tarball))]})
    shell_env = {**home.environ(), **OFFLINE_PIP, "PIP_FIND_LINKS": str(kit.wheels)}
    shell_env["PATH"] = f"{bin_dir}:{home.install.node.parent}:{BASE_PATH}"
    ran = subprocess.run(["bash", "-euc", lines], env=shell_env, cwd=home.work_dir, capture_output=True,
                         text=True, timeout=600, check=False)  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr
    program = home.home / ".local" / "share" / PACKAGE / "bin" / PACKAGE
    assert program.is_file()
    # what README tells the user to put in ~/.profile
    home.extra_env["PI_MEMORY_BRIDGE_CMD"] = f"{program} serve"
    write_config(home, {"recall": {"deadlineMs": 15000}})  # a loaded machine must not drop a layer

    fake_model.script(TextReply("Noted."), TextReply("Postgres."))
    first = home.run_print(["Our billing database is Postgres on port 6543."])
    assert first.returncode == 0, first.stderr
    assert any("6543" in t["user_text"] for t in stored_turns(home))
    second = home.run_print(["Which port does the billing database use?"])
    assert second.returncode == 0, second.stderr
    assert "6543" in _system_prompt_block(fake_model)

    inspector = subprocess.Popen(
        [str(program), "ui", "--no-open", "--idle-minutes", "1"], env=home.environ(), cwd=home.work_dir,
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        assert inspector.stdout is not None
        url = inspector.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), url
        # the start address sets the session cookie and sends the browser on: keep the cookie
        browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
        with browser.open(url, timeout=30) as page:
            body = page.read().decode("utf-8", "replace")
            assert page.status == 200, body[:300]
        assert "Pi memory inspector" in body, body[:300]
    finally:
        inspector.terminate()
        inspector.wait(timeout=30)


def test_pi_install_of_the_repository_root_works(home: PiEnv, fake_model: FakeModel) -> None:
    installed = _pi(home, "install", str(REPO_ROOT))
    assert installed.returncode == 0, installed.stdout + installed.stderr
    fake_model.script(TextReply("Noted: pnpm only."))
    run = home.run_print(
        ["In this repository we always use pnpm."]
    )  # the checkout's .venv is found by itself
    assert run.returncode == 0, run.stderr
    assert "Cannot find module" not in run.stderr
    assert any("pnpm" in t["user_text"] for t in stored_turns(home))


def test_doctor_names_a_local_install_as_pi_shows_it(home: PiEnv, fake_model: FakeModel) -> None:
    """Pi names a local install after its folder (`pi list` prints its path): doctor says which
    name the start-up box shows, and the interactive TUI shows exactly that."""
    installed = _pi(home, "install", str(REPO_ROOT))
    assert installed.returncode == 0, installed.stdout + installed.stderr
    listed = _pi(home, "list")
    assert str(REPO_ROOT) in listed.stdout, listed.stdout
    doctor = subprocess.run([str(SIDECAR), "doctor"], env=home.environ(), cwd=home.work_dir,
                            capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    [line] = [line for line in doctor.stdout.splitlines() if "Pi shows it as" in line]
    shown = line.partition("Pi shows it as ")[2].partition(" (")[0]
    assert shown == REPO_ROOT.name and "after its folder" in line, line
    tui = TmuxPi(home.argv(), env=home.environ(), cwd=home.work_dir)
    try:
        box = tui.wait_for(lambda text: "[Extensions]" in text and "memory: " in text, scrollback=False)
    finally:
        tui.close()
    extensions = box.partition("[Extensions]")[2].strip().splitlines()[0].strip()
    assert extensions == shown, box
