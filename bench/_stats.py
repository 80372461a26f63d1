"""Percentiles and printing shared by the benches."""

from __future__ import annotations

import statistics
from collections.abc import Sequence


def pct(values: Sequence[float], p: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = (len(ordered) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def summary(name: str, values_ms: Sequence[float], target: str = "") -> str:
    med = statistics.median(values_ms) if values_ms else float("nan")
    line = (
        f"{name:<44} n={len(values_ms):<5} p50={med:8.2f} ms  p95={pct(values_ms, 95):8.2f} ms  "
        f"p99={pct(values_ms, 99):8.2f} ms  max={max(values_ms, default=float('nan')):8.2f} ms"
    )
    return f"{line}  [{target}]" if target else line
