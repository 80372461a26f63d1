"""Vendor tokens broken across lines or into space-separated groups.

A terminal or an editor wraps a long token, a mail client breaks it at 76 columns, a person
pastes it in groups to read it out: `AKIAIOSFOD` / `NN7EXAMPLE` on two lines is still a key, and
redacting only the half that happens to look like one keeps the other half in memory.

Only tokens with a distinctive prefix are joined (a head below), because each candidate joins
words that otherwise stand apart. The first piece must be shorter than the token (a complete
token is the token rule's business), the join must reach the token's length exactly (for the
fixed-length formats) or at least its shortest real length, and the joined text must be exactly
one of the vendor formats. Space-separated groups are joined only for fixed-length formats: there
the length says where the token ends, so no following word is swallowed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from ._engine import Groups, RegexRule, Span, decode
from ._syntax import TOKEN_START
from ._token_rules import classify_token


@dataclass(frozen=True, slots=True)
class _Head:
    pattern: str  # RE2, matched at the start of the first piece
    length: int  # the token's length (exact) or its shortest real length
    exact: bool


_HEADS: Final = (
    _Head(r"(?:AKIA|ASIA|ABIA|ACCA)", 20, True),  # AWS access key id
    _Head(r"gh[pousr]_", 40, True),  # GitHub classic tokens
    _Head(r"github_pat_", 93, True),  # GitHub fine-grained tokens
    _Head(r"AIza", 39, True),  # Google API keys
    _Head(r"hf_", 37, True),  # Hugging Face
    _Head(r"npm_", 40, True),  # npm
    _Head(r"gsk_", 56, True),  # Groq
    _Head(r"dop_v1_", 71, True),  # DigitalOcean
    _Head(r"glpat-", 26, False),  # GitLab (newer tokens are longer)
    _Head(r"sk-ant-", 100, False),  # Anthropic
    _Head(r"sk-proj-", 100, False),  # OpenAI project keys
    _Head(r"xox[abposer]-", 40, False),  # Slack
    _Head(r"(?:sk|rk)_live_", 32, False),  # Stripe
    _Head(r"pypi-AgE", 100, False),  # PyPI
)
_HEAD_RES: Final = tuple(re.compile(head.pattern) for head in _HEADS)

_PIECE = r"[A-Za-z0-9_-]"
# A line break (real, or escaped inside a JSON string) with the blanks and mail-quote marks
# around it; or one space.
_LINE_BREAK = r"[ \t]*(?:\r?\n|\\r\\n|\\n)(?:[ \t]*>)*[ \t]*"
_SEPARATOR = f"(?:{_LINE_BREAK}| )"
_SEPARATOR_RE: Final = re.compile(rb"[ \t]*(?:\r?\n|\\r\\n|\\n)(?:[ \t]*>)*[ \t]*| ")
_MAX_PIECES: Final = 12
# A run of this many token characters filling a line is no word: the line after it continues
# the token too (the last line of a wrapped block is shorter).
_WRAPPED_LINE_CHARS: Final = 40

_PATTERN: Final = (
    TOKEN_START
    + "((?:"
    + "|".join(head.pattern for head in _HEADS)
    + f"){_PIECE}*(?:{_SEPARATOR}{_PIECE}+){{1,{_MAX_PIECES - 1}}})"
)


def _head_of(first: str) -> _Head | None:
    for head, head_re in zip(_HEADS, _HEAD_RES, strict=True):
        if head_re.match(first):
            return head
    return None


def _wrapped_on(head: _Head, pieces: list[tuple[int, int]], line_breaks: list[bool], used: int) -> bool:
    """Past its shortest length, does a variable-length token go on to the next piece? Only when
    the last piece joined ended a long line of a wrapped block (and, after the first line, when
    the next one is long too: a short word under a complete token is not part of it)."""
    if head.exact or used >= len(pieces) or not line_breaks[used - 1]:
        return False
    start, end = pieces[used - 1]
    if end - start < _WRAPPED_LINE_CHARS:
        return False
    if used == 1:
        start, end = pieces[1]
        return end - start >= _WRAPPED_LINE_CHARS
    return True


def _find(groups: Groups, data: bytes) -> list[Span]:
    start, end = groups[1]
    chunk = data[start:end]
    pieces: list[tuple[int, int]] = []  # byte offsets of each piece inside `chunk`
    line_breaks: list[bool] = []  # separator before pieces[i + 1] is a line break
    position = 0
    for separator in _SEPARATOR_RE.finditer(chunk):
        pieces.append((position, separator.start()))
        line_breaks.append(separator.group() != b" ")
        position = separator.end()
    pieces.append((position, len(chunk)))
    first = decode(chunk, pieces[0])
    head = _head_of(first)
    if head is None:
        return []
    if len(first) >= head.length and not _wrapped_on(head, pieces, line_breaks, 1):
        return []  # a complete token: the token rule's business
    joined, used = first, 1
    while used < len(pieces) and (len(joined) < head.length or _wrapped_on(head, pieces, line_breaks, used)):
        if not line_breaks[used - 1] and not head.exact:
            break
        joined += decode(chunk, pieces[used])
        used += 1
    if len(joined) < head.length or (head.exact and len(joined) != head.length):
        return []
    kind = classify_token(joined)
    if kind is None:
        return []
    return [Span(start, start + pieces[used - 1][1], kind)]


SPLIT_TOKEN_RULE: Final = RegexRule("split-token", _PATTERN, _find)
