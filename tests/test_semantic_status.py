"""The state of search by meaning reaches status and `search --json` from the one place the local
backend reports it (`LocalBackend.semantic_status`); a backend without it reports nothing there.
Real stores; the model is turned off so that its state is known."""

from __future__ import annotations

from pathlib import Path

import pytest

from fake_backend import FakeBackend
from pi_memory_bridge.backends.local import LocalBackend
from pi_memory_bridge.embeddings import disabled_handle
from pi_memory_bridge.engine.core import Engine
from pi_memory_bridge.sidecar.handshake import handshake
from pi_memory_bridge.tools.search_report import search_report
from pi_memory_bridge.wire import InitializeParams

OFF = "turned off by PI_MEMORY_BRIDGE_EMBEDDINGS"


async def test_search_json_says_the_local_models_state_and_nothing_for_other_backends(tmp_path: Path) -> None:
    handle = disabled_handle(OFF)
    handle.start()
    assert handle.wait(10) is None  # settled: unavailable
    local = LocalBackend(tmp_path / "a", embeddings=handle)
    keyword_only = LocalBackend(tmp_path / "b")  # built without a model at all
    try:
        semantic = search_report(local, "q", [], [])["semantic"]
        assert semantic["state"] == "unavailable" and semantic["reason"] == OFF
        assert semantic["vectors"] == {"done": 0, "total": 0}
        assert search_report(keyword_only, "q", [], [])["semantic"] is None
        assert search_report(FakeBackend(), "q", [], [])["semantic"] is None
    finally:
        await local.close()
        await keyword_only.close()


async def test_status_describes_search_by_meaning_from_the_local_backend(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PI_MEMORY_BRIDGE_EMBEDDINGS", "off")
    env = {"HOME": str(tmp_path), "PI_CODING_AGENT_DIR": str(tmp_path / "agent")}
    params = {"protocolVersion": "1.0", "client": {"name": "t", "version": "0"}, "cwd": str(tmp_path)}
    hs = handshake(InitializeParams.model_validate(params), env)
    engine = await Engine.open(hs.loaded, hs.agent_dir, hs.cwd, env=env)
    try:
        assert isinstance(engine.slot.backend, LocalBackend)
        report = await engine.status_report()
        assert report.embeddings.endswith(f"unavailable: {OFF}; vectors L0 0/0, L1 0/0")
        assert (
            report.embeddings_words
            == f"Search by meaning: off ({OFF}); memory is searched by its words only."
        )
    finally:
        await engine.shutdown()
