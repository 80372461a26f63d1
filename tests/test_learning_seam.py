"""`MemoryBackend.learning()`: the local store hands learning its store; a backend without one
(MemoryCore, or any other) gets a plain problem instead of a type check."""

from __future__ import annotations

from pathlib import Path

from fake_backend import FakeBackend
from pi_memory_bridge.backends.learning import LearnedMemories
from pi_memory_bridge.backends.local import LocalBackend
from pi_memory_bridge.config import LearningSettings
from pi_memory_bridge.engine.learning import Learning


def _learning(tmp_path: Path) -> Learning:
    return Learning(
        LearningSettings(), agent_dir=tmp_path / "agent", cwd=tmp_path, has_ui=False, peer=None, env={}
    )


async def test_learning_attaches_to_the_store_the_backend_offers(tmp_path: Path) -> None:
    backend = LocalBackend(tmp_path / "data")
    try:
        store = backend.learning()
        assert store is backend.learning()  # built once, on first use
        assert isinstance(store.memories, LearnedMemories) and store.root == tmp_path / "data"
        assert store.note_files is backend.note_files
        store.vectors_changed()  # no vectors without a model: nothing to wake, and no error
        learning = _learning(tmp_path)
        learning.attach(backend, schedule=False)
        assert learning.problem is None and learning.memories is store.memories
        assert learning.proposals is store.proposals
    finally:
        await backend.close()
    other = _learning(tmp_path)  # a backend without a learning store: a plain problem
    other.attach(FakeBackend())
    assert other.memories is None and other.proposals is None
    assert other.problem == "consolidation works on the local backend only (this one is fake)"
