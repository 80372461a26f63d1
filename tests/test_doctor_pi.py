"""`doctor` finds the extension where Pi's settings say it is, and checks `pi` itself."""

from __future__ import annotations

import json
from pathlib import Path

from pi_memory_bridge.cli.doctor import render, run_checks
from pi_memory_bridge.cli.doctor_pi import INSTALL_HINT, extension_checks, pi_check

REPO = Path(__file__).resolve().parents[1]


def _package(folder: Path, *, with_entry: bool = True) -> Path:
    folder.mkdir(parents=True)
    manifest = {"name": "pi-memory-bridge", "pi": {"extensions": ["./index.ts"]}}
    (folder / "package.json").write_text(json.dumps(manifest))
    if with_entry:
        (folder / "index.ts").write_text("export {};\n")
    return folder


def _settings(path: Path, **data: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def test_npm_git_local_and_project_sources_are_found(tmp_path: Path) -> None:
    agent, work = tmp_path / "agent", tmp_path / "work"
    npm = _package(agent / "npm" / "node_modules" / "pi-memory-bridge")
    git = _package(agent / "git" / "github.com" / "me" / "pi-memory-bridge")
    local = _package(tmp_path / "clone")
    project = _package(work / ".pi" / "npm" / "node_modules" / "pi-memory-bridge")
    _settings(agent / "settings.json", packages=[
        "npm:pi-memory-bridge@0.1.0", {"source": "git:github.com/me/pi-memory-bridge@v1"}, "../clone",
        "npm:some-other-package",
    ])  # fmt: skip
    _settings(work / ".pi" / "settings.json", packages=["npm:pi-memory-bridge"])
    checks = extension_checks(agent, work, {"HOME": str(tmp_path)}, checkout=None)
    assert all(c.ok and not c.warning for c in checks)
    found = {c.detail.split(" (")[0] for c in checks}
    assert found == {str(npm), str(git), str(local.resolve()), str(project)}
    assert any("npm:pi-memory-bridge@0.1.0 in" in c.detail for c in checks)
    # the name in Pi's start-up box: a package's source, a local install's folder (and why)
    shown = {c.detail.split(" (")[0]: c.detail.partition("; Pi shows it as ")[2] for c in checks}
    assert shown == {
        str(npm): "pi-memory-bridge@0.1.0",
        str(git): "me/pi-memory-bridge",
        str(local.resolve()): "clone (Pi names a local install after its folder)",
        str(project): "pi-memory-bridge",
    }


def test_extensions_entries_and_auto_discovery_count_too(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    ext = _package(tmp_path / "ext")
    auto = _package(agent / "extensions" / "memory")
    _settings(agent / "settings.json", extensions=[str(ext / "index.ts")])
    checks = extension_checks(agent, tmp_path, {}, checkout=None)
    assert {c.detail.split(" (")[0] for c in checks} == {str(ext), str(auto)}


def test_a_broken_install_and_a_missing_one_say_what_to_run(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    _package(agent / "npm" / "node_modules" / "pi-memory-bridge", with_entry=False)
    _settings(agent / "settings.json", packages=["npm:pi-memory-bridge"])
    [broken] = extension_checks(agent, tmp_path, {}, checkout=None)
    assert not broken.ok and "missing files" in broken.detail and INSTALL_HINT in broken.fix
    _settings(agent / "settings.json", packages=[])
    [missing] = extension_checks(agent, tmp_path, {}, checkout=None)
    assert not missing.ok and not missing.warning and INSTALL_HINT in missing.fix
    [dev] = extension_checks(agent, tmp_path, {}, checkout=REPO)  # a checkout can be run with -e
    assert dev.ok and dev.warning and f"pi -e {REPO}" in dev.detail


def _fake_pi(folder: Path, version: str, code: int = 0) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    exe = folder / "pi"
    exe.write_text(f"#!/bin/sh\necho {version}\nexit {code}\n")
    exe.chmod(0o755)
    return str(folder)


def test_pi_on_path_and_its_version(tmp_path: Path) -> None:
    assert pi_check({"PATH": str(tmp_path / "empty")}).warning
    ok = pi_check({"PATH": _fake_pi(tmp_path / "new", "1.6.0")})
    assert ok.ok and "Pi 1.6.0" in ok.detail
    old = pi_check({"PATH": _fake_pi(tmp_path / "old", "0.70.1")})
    assert not old.ok and old.warning and "0.80.4" in old.detail
    broken = pi_check({"PATH": _fake_pi(tmp_path / "broken", "oops", code=1)})
    assert not broken.ok and "Node >= 22.19" in broken.fix


def test_doctor_is_all_ok_with_an_installed_package_and_pi(tmp_path: Path) -> None:
    agent = tmp_path / "home" / ".pi" / "agent"
    _package(agent / "npm" / "node_modules" / "pi-memory-bridge")
    _settings(agent / "settings.json", packages=["npm:pi-memory-bridge"])
    env = {"HOME": str(tmp_path / "home"), "PI_CODING_AGENT_DIR": str(agent),
           "PATH": _fake_pi(tmp_path / "bin", "1.6.0")}  # fmt: skip
    checks = run_checks(env, tmp_path)
    text = render(checks)
    assert "[ok  ] extension:" in text and "[ok  ] pi:" in text, text
    assert all(c.ok for c in checks if c.name not in ("node",)), text
