"""`pi-memory-bridge search --json` ranks what recall would rank for the same text as a prompt:
the query recall builds from it, the same searches of each layer. Real store, keyword search (the
model is off), a prompt longer than recall's query."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pi_memory_bridge.backends.base import ConversationTurn
from pi_memory_bridge.backends.local import LocalBackend
from pi_memory_bridge.cli import memory_cmds
from pi_memory_bridge.recall.engine import build_query
from pi_memory_bridge.recall.layers import LayerQuery, fetch_l0, fetch_l1

CLUSTER = "Deploys go through kestrel-west-kemub, the staging cluster."


async def test_search_json_returns_what_recall_would_for_the_same_long_prompt(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    backend = LocalBackend(tmp_path)
    try:
        await backend.memories.save(CLUSTER, "fact", "user")
        await backend.memories.save("The billing service is owned by Dana.", "fact", "user")
        turn = ConversationTurn(
            "t1", "s", "where is kestrel-west-kemub?", "in eu-west", datetime(2026, 1, 1, tzinfo=UTC)
        )
        await backend.conversation.add([turn])
        log = "ok " * 700  # pasted output before the question: recall reads the prompt for what it asks
        prompt = f"{log}\nDeploy the cache fix to kestrel-west-kemub: is that the staging cluster?"
        await memory_cmds._search(backend, prompt, 5, True)
        printed = json.loads(capsys.readouterr().out)
        query = LayerQuery(build_query(prompt), 5, frozenset())
        recalled = [f"L1:{i.source_id}" for i in await fetch_l1(backend, query)]
        recalled += [f"L0:{i.source_id}" for i in await fetch_l0(backend, query)]
        assert [item["ref"] for item in printed["items"]] == recalled  # including what it misses
        assert any(CLUSTER in item["text"] for item in printed["items"])  # found after the paste
        assert printed["query"] == prompt  # as the user gave it
    finally:
        await backend.close()
