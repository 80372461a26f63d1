"""Bounded, parallel, layered recall rendered inside one untrusted boundary."""

from pi_memory_bridge.recall.engine import LayerResult, RecallBudget, RecallOutcome, recall
from pi_memory_bridge.recall.items import Layer

__all__ = ["Layer", "LayerResult", "RecallBudget", "RecallOutcome", "recall"]
