"""Recall by meaning: the bundled multilingual embedding model and hybrid ranking.

`bundle` pins the model package and its files' hashes, `cache` keeps the decoded model for
later processes, `use_model` wraps the encoder behind a typed interface, `loader` loads it in
the background and reports its state, `fusion` merges vector and keyword rankings.
"""

from pi_memory_bridge.embeddings.bundle import DIMENSIONS, MODEL_ID, ModelUnavailable
from pi_memory_bridge.embeddings.loader import (
    LoadReport,
    ModelHandle,
    ModelState,
    disabled_handle,
    load_use,
    shared_handle,
)

__all__ = [
    "DIMENSIONS",
    "MODEL_ID",
    "LoadReport",
    "ModelHandle",
    "ModelState",
    "ModelUnavailable",
    "disabled_handle",
    "load_use",
    "shared_handle",
]
