"""Which columns the local store's tables have, and how their rows become the pages' rows.

The L1 columns a newer schema adds (validity, supersede links, source turns, project, origin) are
found by name when the view opens, under any of the names a store may use for them, so the same
queries read the old schema and the new one. Pure: a column list in, SQL fragments and rows out.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from pi_memory_bridge.ui.views import MemoryRow, TurnRow

# view field -> column names a store may use for it, first match wins
OPTIONAL_L1: dict[str, tuple[str, ...]] = {
    "kind": ("kind", "type"),
    "project": ("project", "project_key", "project_path", "project_root"),
    "valid_from": ("valid_from", "valid_at", "said_at", "observed_at"),
    "valid_until": ("valid_until", "invalid_at", "valid_to", "expired_at", "superseded_at"),
    "status": ("status", "state"),
    "superseded_by": ("superseded_by", "successor_id", "replaced_by"),
    "source_turn_ids": ("source_turn_ids", "source_turns", "turn_ids"),
    "origin": ("origin",),
    "job_id": ("job_id",),
}
_TURN_COLUMNS = "turn_id, memory_session_id, pi_session_id, user_text, assistant_text, created_at, tools_json"
_L1_BASE = 6  # memory_id, kind, content, source, created_at, updated_at


def when(value: object) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def _ids(value: object) -> tuple[str, ...]:
    """Source turn ids as stored: a JSON list, or a comma/space separated string."""
    if not isinstance(value, str) or not value.strip():
        return ()
    text = value.strip()
    if text.startswith("["):
        try:
            parsed = json.loads(text)
        except ValueError:
            return ()
        return tuple(str(x) for x in parsed if isinstance(x, str | int)) if isinstance(parsed, list) else ()
    return tuple(p for p in text.replace(",", " ").split() if p)


def table_columns(conn: sqlite3.Connection, table: str) -> frozenset[str]:
    rows = conn.execute(f"PRAGMA table_info({table})").fetchall()
    return frozenset(str(r[1]) for r in rows)


@dataclass(frozen=True, slots=True)
class L1Columns:
    names: Mapping[str, str]  # view field -> this store's column, for the fields it has

    @classmethod
    def of(cls, present: frozenset[str]) -> L1Columns:
        found: dict[str, str] = {}
        for name, candidates in OPTIONAL_L1.items():
            column = next((c for c in candidates if c in present), None)
            if column is not None:
                found[name] = column
        return cls(found)

    @property
    def fields(self) -> frozenset[str]:
        """The optional L1 fields this store has (e.g. {"valid_until", "superseded_by"})."""
        return frozenset(self.names) - {"kind"}

    @property
    def kind(self) -> str:
        return self.names.get("kind", "type")

    @property
    def _extra(self) -> list[str]:
        return [n for n in OPTIONAL_L1 if n != "kind" and n in self.names]

    @property
    def select(self) -> str:
        cols = ["memory_id", self.kind, "content", "source", "created_at", "updated_at"]
        return ", ".join(cols + [self.names[name] for name in self._extra])

    @property
    def active_clause(self) -> str:
        parts = []
        if "valid_until" in self.names:
            parts.append(f"{self.names['valid_until']} IS NULL")
        if "superseded_by" in self.names:
            parts.append(f"({self.names['superseded_by']} IS NULL OR {self.names['superseded_by']} = '')")
        if "status" in self.names:
            parts.append(
                f"coalesce(lower({self.names['status']}), 'active') IN ('active', 'current', 'valid')"
            )
        return " AND ".join(parts) or "1"

    def row(self, row: Sequence[object]) -> MemoryRow:
        extra = {name: row[_L1_BASE + i] for i, name in enumerate(self._extra)}
        return MemoryRow(
            id=str(row[0]),
            kind=str(row[1]),
            content=str(row[2]),
            source=str(row[3] or ""),
            created_at=when(row[4]),
            updated_at=when(row[5]),
            project=str(extra["project"]) if extra.get("project") else None,
            valid_from=when(extra.get("valid_from")),
            valid_until=when(extra.get("valid_until")),
            status=str(extra["status"]) if extra.get("status") else None,
            superseded_by=str(extra["superseded_by"]) if extra.get("superseded_by") else None,
            source_turn_ids=_ids(extra.get("source_turn_ids")),
            origin=str(extra["origin"]) if extra.get("origin") else None,
            job_id=str(extra["job_id"]) if extra.get("job_id") else None,
        )


def turn_select(present: frozenset[str]) -> str:
    return _TURN_COLUMNS if "tools_json" in present else _TURN_COLUMNS.replace("tools_json", "'[]'")


def turn_row(row: Sequence[object]) -> TurnRow:
    return TurnRow(
        turn_id=str(row[0]),
        memory_session_id=str(row[1]),
        pi_session_id=str(row[2] or ""),
        user_text=str(row[3]),
        assistant_text=str(row[4]),
        created_at=when(row[5]),
        tools_json=str(row[6] or "[]"),
    )
