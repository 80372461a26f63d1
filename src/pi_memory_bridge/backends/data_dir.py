"""The local store's files under a data dir, for the tools that work on them without opening a
backend: `doctor` (the store's schema version, the notes), the re-scan (`pi_memory_bridge.rescan`:
the store's rows and the notes) and the note editor's size limit. Outside `backends/` these are
reached here and nowhere else in `backends/local/`, so one module lists what is used directly.
"""

from __future__ import annotations

from pathlib import Path

from pi_memory_bridge.backends.local.notes import MAX_NOTE_BYTES, NoteFiles
from pi_memory_bridge.backends.local.rescan import (
    RowsChanged,
    RowsListener,
    SecretsFound,
    StoreRescan,
    TableReport,
    redact_arguments,
    redact_counted,
)

__all__ = [
    "MAX_NOTE_BYTES",
    "NoteFiles",
    "RowsChanged",
    "RowsListener",
    "SecretsFound",
    "StoreRescan",
    "TableReport",
    "latest_schema_version",
    "redact_arguments",
    "redact_counted",
    "upgrade_store",
]


def latest_schema_version() -> int:
    """The newest store schema this version knows (a newer file was written by a newer bridge)."""
    from pi_memory_bridge.backends.local.schema import LATEST_VERSION

    return LATEST_VERSION


def upgrade_store(db: Path) -> None:
    """Open and close the store at `db`, which brings its schema (and the tokenizer) up to date."""
    from pi_memory_bridge.backends.local.store import SqliteMemoryStore

    SqliteMemoryStore(db).close()
