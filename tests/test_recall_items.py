"""Recalled items: redaction holds whether a text's redacted form was remembered or not."""

from __future__ import annotations

from pi_memory_bridge.recall import items
from pi_memory_bridge.recall.items import Layer, make_item

KEY = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0"


def test_a_secret_is_redacted_at_every_recall_of_the_same_text() -> None:
    text = f"the deploy key is {KEY}"
    before = items._redacted_cached.cache_info().hits
    made = [make_item(Layer.L1, "fact", text) for _ in range(3)]
    assert items._redacted_cached.cache_info().hits >= before + 2  # the later ones remembered it
    for item in made:
        assert item is not None
        assert KEY not in item.body and KEY not in item.plain and "REDACTED" in item.body


def test_a_text_too_long_to_remember_is_redacted_too() -> None:
    text = "x " * items._CACHED_CHARS + KEY
    for _ in range(2):
        item = make_item(Layer.L0, "2026-06-01", text)
        assert item is not None and KEY not in item.body and "REDACTED" in item.body
