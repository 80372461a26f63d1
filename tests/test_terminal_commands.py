"""`pi-memory-bridge forget` and `search` in a terminal, on a real local store."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pi_memory_bridge.backends.base import ConversationTurn
from pi_memory_bridge.backends.local import LocalBackend
from pi_memory_bridge.cli.terminal import forget, search


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    agent = tmp_path / "agent"
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(agent))
    monkeypatch.setenv("HOME", str(tmp_path))
    backend = LocalBackend(agent / "memory-bridge")
    when = datetime(2026, 11, 1, tzinfo=UTC)
    backend.store.conversation.add(
        [
            ConversationTurn("t1", "s", "the billing cluster is blue", "ok", when),
            ConversationTurn("t2", "s", "lunch is at noon", "ok", when),
        ]
    )
    backend.store.memories.save("billing owner is Dana", "fact", "user")
    asyncio.run(backend.close())
    yield agent / "memory-bridge"


def _count(root: Path) -> tuple[int, int]:
    backend = LocalBackend(root)
    counts = asyncio.run(backend.status()).counts
    asyncio.run(backend.close())
    return counts["turns"], counts["atomic"]


def test_forget_asks_and_deletes_only_after_yes(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    answers = iter(["2", "n"])  # "delete all" (second: one by one comes first), then "no" at the end
    assert forget("billing", ask=lambda _prompt: next(answers)) == 0
    assert "nothing was deleted" in capsys.readouterr().out
    assert _count(store) == (2, 1)
    answers = iter(["2", "y"])
    assert forget("billing", ask=lambda _prompt: next(answers)) == 0
    out = capsys.readouterr().out
    assert out.count("deleted ") == 2
    assert _count(store) == (1, 0)


def test_search_prints_both_layers(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert search("billing", 5) == 0
    out = capsys.readouterr().out
    assert "billing owner is Dana" in out and "billing cluster is blue" in out


def test_search_json_prints_the_ranked_results(
    store: Path, capsys: pytest.CaptureFixture[str], model_handle: object
) -> None:
    assert search("who owns billing?", 5, as_json=True) == 0
    report = json.loads(capsys.readouterr().out)
    assert set(report) == {"query", "backend", "semantic", "results"}
    assert report["query"] == "who owns billing?" and report["backend"] == "local"
    assert set(report["semantic"]) == {"model", "state", "reason", "vectors"}
    assert report["semantic"]["model"].startswith("use-multilingual-v3")
    assert report["semantic"]["vectors"]["total"] == 3
    layers = [(r["layer"], r["rank"]) for r in report["results"]]
    assert layers[0] == ("L1", 1) and ("L0", 1) in layers
    first = report["results"][0]
    assert set(first) == {"layer", "rank", "id", "text", "score", "type", "createdAt"}
    assert first["text"] == "billing owner is Dana" and isinstance(first["score"], float)
    turn = next(r for r in report["results"] if r["layer"] == "L0")
    assert set(turn) == {"layer", "rank", "id", "text", "score", "sessionId", "createdAt"}
    assert turn["id"] == "t1" and turn["text"].startswith("user: the billing cluster is blue")
