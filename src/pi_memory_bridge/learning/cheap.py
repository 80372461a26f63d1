"""The cheap path: duplicates settled without a model call.

Exact: the store's duplicate key (case, spacing and punctuation folded) is equal. Near-exact:
the same search terms (stop words aside, so "for all services" = "for all its services"; in
Chinese the same character pairs, so 两个空格 is not 四个空格), in almost the same order ("tabs over
spaces" vs "spaces over tabs" is a contradiction, not a duplicate), with the same numbers (MySQL
5.7 vs 8.0) and the same negations (use vs don't use). Anything less certain goes to the model.
"""

from __future__ import annotations

import re
import unicodedata
from difflib import SequenceMatcher

from pi_memory_bridge import textsearch
from pi_memory_bridge.backends.learning import content_key

NEAR_DUPLICATE_RATIO = 0.9

_CJK = r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af"
_UNIT = re.compile(rf"[{_CJK}]|[^\W_{_CJK}]+", re.UNICODE)
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_NEGATIONS = frozenset(
    {
        "not", "no", "never", "none", "nor", "without", "don", "doesn", "didn", "isn", "aren", "wasn",
        "won", "shouldn", "t", "cannot", "avoid", "stop", "stopped", "dislike", "dislikes", "hate",
        "hates", "不", "没", "别", "无", "非", "勿", "禁", "讨", "厌",
    }
)  # fmt: skip


def units(text: str) -> list[str]:
    """Words (and single CJK characters), folded: the sequence the comparison runs on."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return _UNIT.findall(folded)


def is_exact_duplicate(a: str, b: str) -> bool:
    key = content_key(a)
    return bool(key) and key == content_key(b)


def is_near_duplicate(a: str, b: str) -> bool:
    if is_exact_duplicate(a, b):
        return True
    ua, ub = units(a), units(b)
    if not ua or not ub:
        return False
    if _NUMBER.findall(unicodedata.normalize("NFKC", a)) != _NUMBER.findall(unicodedata.normalize("NFKC", b)):
        return False
    if {u for u in ua if u in _NEGATIONS} != {u for u in ub if u in _NEGATIONS}:
        return False
    if set(textsearch.index_tokens(a)) != set(textsearch.index_tokens(b)):
        return False
    return SequenceMatcher(None, ua, ub, autojunk=False).ratio() >= NEAR_DUPLICATE_RATIO


# Words nearly every memory has ("The user prefers ..."): sharing only these is not similarity.
_BOILERPLATE = frozenset(
    {"user", "users", "project", "projects", "team", "prefer", "prefers", "preferred", "用户", "项目", "喜欢"}
)


def shares_a_topic(candidate: str, memory: str) -> bool:
    """Whether the two share a search term beyond the words every memory is made of; keyword hits
    that share nothing else are not worth a reconcile call."""
    wanted = {t for t in textsearch.query_terms(candidate, max_terms=64) if t not in _BOILERPLATE}
    return bool(wanted & set(textsearch.index_tokens(memory)))
