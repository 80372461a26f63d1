"""Prompts that carry no topic to recall for ("ok", "continue", a bare command)."""

from __future__ import annotations

import re

_TRIVIAL = frozenset(
    {
        "ok", "okay", "k", "yes", "y", "no", "n", "yep", "nope", "sure", "continue", "go", "go on",
        "next", "done", "thanks", "thank you", "thx", "ty", "lgtm", "retry", "again", "proceed",
        "do it", "please continue", "keep going", "sounds good", "great", "nice", "cool", "fine",
        "好", "好的", "继续", "谢谢", "嗯", "对", "是", "是的", "行", "可以", "没问题", "不", "不是", "重试",
        "はい", "いいえ", "続けて", "ありがとう",
    }
)  # fmt: skip
_EDGE_PUNCT = re.compile(r"^[\s\W_]+|[\s\W_]+$", re.UNICODE)
_BARE_COMMAND = re.compile(r"^/[\w:.-]+$")


def is_trivial_prompt(prompt: str, min_chars: int = 2) -> bool:
    text = prompt.strip()
    if _BARE_COMMAND.match(text):
        return True
    core = _EDGE_PUNCT.sub("", text).casefold()
    core = re.sub(r"\s+", " ", core)
    return len(core) < min_chars or core in _TRIVIAL
