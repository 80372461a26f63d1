"""One release version everywhere, and the handshake refusing an extension of another release."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

from pi_memory_bridge._version import __version__
from pi_memory_bridge.sidecar.versions import SHIM_CLIENT_NAME, version_mismatch
from sidecar_client import SidecarProcess

REPO = Path(__file__).resolve().parents[1]


def _ts_constant(name: str) -> str:
    text = (REPO / "extension-shim" / "src" / "protocol.ts").read_text(encoding="utf-8")
    found = re.search(rf'export const {name} = "([^"]+)";', text)
    assert found, f"{name} not found in protocol.ts"
    return found.group(1)


def test_every_manifest_carries_the_same_version() -> None:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    package = json.loads((REPO / "package.json").read_text(encoding="utf-8"))
    shim_package = json.loads((REPO / "extension-shim" / "package.json").read_text(encoding="utf-8"))
    versions = {
        "pyproject.toml": pyproject["project"]["version"],
        "_version.py": __version__,
        "package.json": package["version"],
        "extension-shim/package.json": shim_package["version"],
        "protocol.ts CLIENT_VERSION": _ts_constant("CLIENT_VERSION"),
    }
    assert len(set(versions.values())) == 1, versions
    assert _ts_constant("CLIENT_NAME") == SHIM_CLIENT_NAME


def test_same_release_patch_differences_and_other_clients_pass() -> None:
    assert version_mismatch(SHIM_CLIENT_NAME, "0.1.0", "0.1.0") is None
    assert version_mismatch(SHIM_CLIENT_NAME, "0.1.3", "0.1.0") is None
    assert version_mismatch(SHIM_CLIENT_NAME, "1.2.0", "1.0.5") is None
    assert version_mismatch("test", "0", "0.1.0") is None  # only our own extension is held to it


def test_another_release_names_both_versions_and_the_fix() -> None:
    reason = version_mismatch(SHIM_CLIENT_NAME, "0.2.0", "0.1.0")
    assert reason is not None
    assert "extension 0.2.0" in reason and "sidecar 0.1.0" in reason
    assert "uv tool upgrade pi-memory-bridge" in reason and "pi update" in reason
    assert len(f"memory: unavailable ({reason})") <= 140  # fits Pi's footer
    assert version_mismatch(SHIM_CLIENT_NAME, "2.0.0", "1.9.0") is not None


def test_the_handshake_refuses_an_extension_of_another_release(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    agent.mkdir()
    proc = SidecarProcess(agent)
    try:
        answer = proc.initialize(tmp_path, client={"name": SHIM_CLIENT_NAME, "version": "0.99.0"})
        assert answer["error"]["code"] == -32003
        assert "extension 0.99.0" in answer["error"]["message"]
        assert answer["error"]["data"] == {"extension": "0.99.0", "sidecar": __version__}
    finally:
        proc.close()
    proc = SidecarProcess(agent)
    try:
        ok = proc.initialize(tmp_path, client={"name": SHIM_CLIENT_NAME, "version": __version__})
        assert "result" in ok, ok
    finally:
        proc.close()
