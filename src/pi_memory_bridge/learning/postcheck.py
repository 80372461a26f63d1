"""The check every extracted memory passes after the model, whatever the model was told.

The extract prompt tells the model that the conversation is data; a model can still be talked
round by text in it (a pasted README, a tool's output, a line forging "SYSTEM:"), and a memory it
writes is recalled into every later session. So after the model, with no model:

1. `instruction_rules.instruction_in`: a memory that is an instruction to the agent is refused:
   a destructive or remote-code shell command, "ignore previous instructions" and forged role
   markers, acting "without asking", turning off confirmations or safety checks, sending files,
   keys or data somewhere, hiding what is done from the user (English and Chinese).
2. `support_of`: a memory must be said in the user's text of the turns it cites: enough of its
   words (CJK by character) are there. A memory the user's text does not support is refused;
   one that draws on what the user pasted (`provenance`) rather than their own words is marked so.
3. `changes_how_agent_acts`: constraints, preferences and memories about running things; those
   drawn from pasted text are held as proposals for /tdai-memory-review, never applied (`plan`).

Refusals are counted by reason (status, and the job record's reason).

The rules of 1. hold for every write a model makes: the model's save tool
and the MCP server's `memory_remember` (`tools.memory.save_refusal`), and the tags and questions
of an enrichment job. What the user saves by hand is their own words and is not checked.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pi_memory_bridge import textsearch
from pi_memory_bridge.learning.provenance import split_user_text

_RUNNING = re.compile(
    r"`|\b(?:run|runs|running|ran|execut\w*|invok\w*|install\w*|launch\w*|deploy\w*|commit\w*|push\w*|"
    r"delet\w*|remov\w*|command\w*|scripts?|shell|terminal|bash|zsh|sudo|make|npm|npx|pnpm|yarn|pip|"
    r"uv|cargo|go (?:run|build|test)|git|docker|kubectl|curl|wget|build\w*|before (?:each|every)|"
    r"after (?:each|every)|automatic\w*|always)\b"
    r"|运行|执行|跑一下|安装|调用|命令|脚本|部署|提交|推送|删除|终端|构建|每次|总是|自动",
    re.IGNORECASE,
)

# words every memory is phrased with: they say nothing about where its content came from
_FRAMING = frozenset(
    "user users project projects prefer prefers preferred preference want wants wanted like likes "
    "always never must should need needs use uses used wish wishes ask asks require requires "
    "team teams thing things way ways work works".split()
)
_FRAMING_CJK = frozenset("用户项目喜欢希望总是永远不要需要必须偏好想要使用始终要求")
_CJK_CHAR = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
_MIN_SUPPORT = 0.3

Source = Literal["own", "pasted"]


def changes_how_agent_acts(kind: str, text: str) -> bool:
    """Constraints and preferences (rules for the agent, as a planted one would be), and any other
    memory about running things."""
    return kind in ("constraint", "preference") or bool(_RUNNING.search(text))


def _cjk_chars(text: str) -> set[str]:
    return set(_CJK_CHAR.findall(unicodedata.normalize("NFKC", text)))


def _content_terms(text: str) -> set[str]:
    """Words (ASCII) and characters (CJK) that carry what a memory says.

    CJK is compared by character, not by the search index's character pairs: a memory paraphrases
    ("一律使用 pnpm" for "只用 pnpm"), and pairs across word borders (律使) would never match."""
    words = {t for t in textsearch.query_terms(text, 200) if t.isascii() and t not in _FRAMING}
    chars = {c for c in _cjk_chars(text) if not textsearch.is_stop_word(c) and c not in _FRAMING_CJK}
    return words | chars


def _turn_terms(text: str) -> set[str]:
    return {t for t in textsearch.index_tokens(text) if t.isascii()} | _cjk_chars(text)


def _matches(term: str, tokens: set[str]) -> bool:
    if term in tokens:
        return True
    if not (term.isascii() and term.isalpha() and len(term) >= 4):
        return False
    # one English word in another's form: "lint" / "linting", "migration" / "migrated"
    stem = term[:5]
    return any(
        t.startswith(stem) or (len(t) >= 4 and term.startswith(t))
        for t in tokens
        if t.isascii() and len(t) >= 4 and (len(term) >= 5 or t.startswith(term))
    )


@dataclass(frozen=True, slots=True)
class Support:
    supported: bool
    source: Source  # meaningful when supported
    share: float  # of the memory's content words found in the user's text


def support_of(memory_text: str, user_texts: Sequence[str]) -> Support:
    """How far the user's text of the cited turns says what the memory says, and in whose words."""
    terms = _content_terms(memory_text)
    if not terms:
        return Support(False, "pasted", 0.0)
    parts = [split_user_text(t) for t in user_texts]
    own = _turn_terms("\n".join(p.own for p in parts))
    pasted = _turn_terms("\n".join(p.pasted for p in parts))
    found = {t for t in terms if _matches(t, own) or _matches(t, pasted)}
    in_own = {t for t in terms if _matches(t, own)}
    share = len(found) / len(terms)
    supported = share >= _MIN_SUPPORT and len(found) >= (1 if len(terms) <= 2 else 2)
    drawn_from_paste = bool(found - in_own) or len(in_own) / len(terms) < _MIN_SUPPORT
    return Support(supported, "pasted" if drawn_from_paste else "own", share)
