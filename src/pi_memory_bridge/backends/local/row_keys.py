"""Keys of rows in a fused ranking (pure): a keyword hit is keyed by its public id, a row found
by its vector alone by its row id, whose text is read only if it makes the cut."""

from __future__ import annotations

ROW_KEY = "\x00row:"  # no public id starts with a NUL


def row_key(rowid: int) -> str:
    return f"{ROW_KEY}{rowid}"


def rowid_of(key: str) -> int:
    return int(key.removeprefix(ROW_KEY))


def by_public_id(rowids: dict[str, int]) -> dict[str, int]:
    """Keyword hits' row ids in the order of their public ids. A row's cosine from one
    matrix-vector product depends in its last bits on its place among the rows multiplied
    (BLAS kernels), so the rows go in one fixed order: the one the lookup by public id gave them
    when the fusion's parameters were chosen (SQLite walks an IN list in sorted order)."""
    return {key: rowids[key] for key in sorted(rowids)}
