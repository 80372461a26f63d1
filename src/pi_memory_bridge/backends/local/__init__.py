"""The embedded local memory backend (SQLite for L0/L1, Markdown files for L2/L3)."""

from pi_memory_bridge.backends.local.backend import DB_FILENAME, LocalBackend

__all__ = ["DB_FILENAME", "LocalBackend"]
