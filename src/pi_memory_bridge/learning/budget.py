"""The daily token budget: a rough estimate before a call, the counted usage after it."""

from __future__ import annotations

import re
from datetime import UTC, datetime

_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")


def budget_day(now: datetime) -> str:
    """The budget's day: the UTC date, so every process on the machine counts the same day."""
    return now.astimezone(UTC).date().isoformat()


def estimate_tokens(text: str) -> int:
    """Tokens a text will likely cost: about one per CJK character, one per four other characters.

    Only used to keep a call from starting when it would overrun the budget; the usage the model
    reports is what is counted.
    """
    cjk = len(_CJK.findall(text))
    return cjk + (len(text) - cjk + 3) // 4


def allows(used_today: int, estimate: int, daily_budget: int) -> bool:
    return daily_budget > 0 and used_today + estimate <= daily_budget
