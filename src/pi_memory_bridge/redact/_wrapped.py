"""Secrets whose value a terminal, an editor or a mail client wrapped onto the next lines.

`aws_secret_access_key = <20 chars>` newline `<20 chars>`: the assignment rule sees a value that
ends at the line break and replaces it; the second half, alone on its line, looks like nothing
and stays. The rules here catch the rest of such a value as a whole:

- a value rule's placeholder that ends its line, followed by lines that continue the value (a
  run of token characters alone on its line, ending where a value ends: a line break, a quote,
  `;`, `@`, a blank...);
- a credential name with its value on the lines below (`client_secret: |`, `password:` then an
  indented base64 block);
- a JWT broken at its dots or inside a segment
(the password of a URL broken across lines is the URL rule's: `postgres://user:pa` newline `ss@host`).

A continuation line must look like key material (a digit or a base64 symbol, or mixed case that
is not camel-case words): an ordinary word or a name on the next line ("region = ...",
"Thanks", "run_tests") is never joined. After the first continuation line, a further one joins
only while the lines before it are all of one width (a wrapped block) and it is no wider.
"""

from __future__ import annotations

import re
from typing import Final

from ._assignment import trigger_alternation
from ._engine import (
    Decision,
    Finder,
    Groups,
    RegexRule,
    Scanner,
    Span,
    Tally,
    decode,
    scan_memoised,
)
from ._keys import classify_key
from ._shapes import is_camel_words, is_non_secret_literal
from ._syntax import BLANK, TOKEN_START
from ._token_rules import classify_token
from ._tokens import TOKEN_FORMATS

# A line break, real or escaped inside a JSON string, with a shell continuation backslash before
# it and the blanks and mail-quote marks around it.
LINE_BREAK: Final = r"[ \t]*(?:\\?\r?\n|\\r\\n|\\n)(?:[ \t]*>)*[ \t]*"
_LINE_BREAK_RE: Final = re.compile(LINE_BREAK.encode())
_PIECE: Final = r"[A-Za-z0-9+/_.~%!$*-]+={0,3}"
_MAX_LINES: Final = 40

# Vendor tokens have a known shape and the token rules found them whole; a line after one is
# its own (`ghp_...` newline `a1b2 deployed`). `api-key` is also what a name rule says.
_WHOLE_KINDS: Final = frozenset({token.kind for token in TOKEN_FORMATS} | {"private-key"}) - {"api-key"}

_MATERIAL_SYMBOLS: Final = frozenset("+/=%~$!*")
# What may follow the last piece of a value on its line.
_VALUE_ENDS: Final = frozenset(b"\"'`;,@)}]&<\\ \t\r\n")
# a version, a date, a port, a count
_NUMBERISH_RE: Final = re.compile(r"[vV]?[0-9.:-]+")


class _LookaheadRule:
    """A scan whose decision also reads a few bytes past its match (`_value_ends_at`), so it is
    memoised by both; past a rejected candidate the next search starts at `resume_group`, or at
    its end (a name whose lines below are no value, `credentials:` then `client_secret: |`: the
    next name may be among those lines)."""

    def __init__(self, name: str, pattern: str, find: Finder, resume_group: int | None = None) -> None:
        self.name, self.pattern = name, pattern
        self._find, self._resume_group = find, resume_group
        self._parser = Scanner(pattern)
        self._candidates = Scanner(pattern, capture=False)  # groups cost 4x a match

    def __call__(self, data: bytes, tally: Tally) -> bytes:
        # memoised by the candidate's bytes and what follows it (a long YAML file repeats a lot)
        return scan_memoised(
            data,
            tally,
            self._candidates,
            lambda start, end: data[start : end + _LOOKAHEAD],
            lambda _candidate, start, end: (self._decide(data, start, end), True),
        )

    def _decide(self, data: bytes, start: int, end: int) -> Decision:
        groups = self._parser.match_exactly(data, start, end)
        found = self._find(groups, data) if groups is not None else []
        if found:
            return ((found[0].start - start, found[0].end - start, found[0].kind),), found[0].end - start
        if groups is None or self._resume_group is None:
            return (), end - start
        return (), groups[self._resume_group][0] - start


class _Prefiltered:
    """A rule that only scans a text holding `needle` (most texts hold none)."""

    def __init__(self, needle: bytes, rule: RegexRule | _LookaheadRule) -> None:
        self.needle, self.rule = needle, rule
        self.name, self.pattern = rule.name, rule.pattern

    def __call__(self, data: bytes, tally: Tally) -> bytes:
        return self.rule(data, tally) if self.needle in data else data


def _material(piece: str) -> bool:
    """Could this run of token characters be part of a key? (See the module's docstring.)"""
    if len(piece) < 2 or is_non_secret_literal(piece):
        return False
    if _NUMBERISH_RE.fullmatch(piece) and len(piece) < 12:
        return False
    if any(char.isdigit() or char in _MATERIAL_SYMBOLS for char in piece):
        return True
    mixed = any(char.islower() for char in piece) and any(char.isupper() for char in piece[1:])
    return mixed and not is_camel_words(piece)


def _pieces(chunk: bytes) -> list[tuple[int, int]]:
    """Byte spans of the pieces of a run `LINE_BREAK piece LINE_BREAK piece ...`."""
    spans: list[tuple[int, int]] = []
    breaks = list(_LINE_BREAK_RE.finditer(chunk))
    for index, line_break in enumerate(breaks):
        end = breaks[index + 1].start() if index + 1 < len(breaks) else len(chunk)
        spans.append((line_break.end(), end))
    return spans


def _tail(groups: Groups, group: int, data: bytes, used: int) -> int:
    start, end = groups[group]
    return start + _pieces(data[start:end])[used - 1][1]


# --- a value rule's placeholder, then the rest of the value on the next lines ---------------------

_CONTINUED_PLACEHOLDER: Final = (
    r"\[REDACTED:(?P<kind>[a-z0-9-]+)\](?P<rest>(?:" + LINE_BREAK + _PIECE + f"){{1,{_MAX_LINES}}})"
)


def _continued_placeholder(groups: Groups, data: bytes) -> list[Span]:
    kind = decode(data, groups[1])
    if kind in _WHOLE_KINDS:
        return []
    start, end = groups[2]
    used = _first_line_rule(data[start:end], data, end)
    if not used:
        return []
    return [Span(groups[0][0], _tail(groups, 2, data, used), kind)]


def _first_line_rule(chunk: bytes, data: bytes, end: int) -> int:
    # the first continuation line sets the block's width; later ones must keep to it
    pieces = _pieces(chunk)
    used = 0
    for index, (start, stop) in enumerate(pieces):
        piece = decode(chunk, (start, stop))
        if not _material(piece):
            break
        width = pieces[0][1] - pieces[0][0]
        if index >= 1 and (stop - start > width or any(b - a != width for a, b in pieces[:index])):
            break
        used = index + 1
    if used and used == len(pieces) and not _value_ends_at(data, end):
        used -= 1  # the last line goes on with something a value does not hold
    return used


_NEXT_KEY_RE: Final = re.compile(rb"[ \t]{0,4}[:=]")
# How far past a candidate its decision looks (`_value_ends_at`): part of the memo's key.
_LOOKAHEAD: Final = 6


def _value_ends_at(data: bytes, end: int) -> bool:
    if end >= len(data):
        return True
    if data[end] not in _VALUE_ENDS:
        return False
    return _NEXT_KEY_RE.match(data, end) is None  # `Key2 = value`, `host: x`: a key, not a value


CONTINUED_VALUE_RULE: Final = _Prefiltered(
    b"[REDACTED:", _LookaheadRule("continued-value", _CONTINUED_PLACEHOLDER, _continued_placeholder)
)


# --- a credential name with its value on the lines below ----------------------------------------

# Only a name holding a credential word is a candidate: a scan that stopped at every `else:`
# followed by an indented line cost a fifth of all redaction time on ordinary code.
_NAME_THEN_BLOCK: Final = (
    TOKEN_START
    + r"(?i)(?P<name>[A-Za-z0-9_.-]*(?:"
    + trigger_alternation()
    + r")[A-Za-z0-9_.-]*)[\"']?"
    + BLANK
    + r"*[:=]"
    + BLANK
    + r"*(?:\||>[-+]?)?(?P<block>(?:"
    + LINE_BREAK
    + _PIECE
    + f"){{1,{_MAX_LINES}}})"
)
_BLOCK_MIN_CHARS: Final = 8


def _name_then_block(groups: Groups, data: bytes) -> list[Span]:
    kind = classify_key(decode(data, groups[1]))
    if kind is None:
        return []
    start, end = groups[2]
    chunk = data[start:end]
    pieces = _pieces(chunk)
    if pieces[0][1] - pieces[0][0] < _BLOCK_MIN_CHARS:
        return []
    used = _first_line_rule(chunk, data, end)
    if not used:
        return []
    first = start + pieces[0][0]
    return [Span(first, _tail(groups, 2, data, used), kind)]


NAME_THEN_BLOCK_RULE: Final = _LookaheadRule(
    "name-then-block", _NAME_THEN_BLOCK, _name_then_block, resume_group=2
)


# --- a JWT broken at its dots or inside a segment -----------------------------------------------

_JWT_PIECE: Final = r"[A-Za-z0-9_.-]+"
_SPLIT_JWT: Final = (
    TOKEN_START + r"(?P<jwt>eyJ[A-Za-z0-9_.-]*(?:" + LINE_BREAK + _JWT_PIECE + f"){{1,{_MAX_LINES}}})"
)


def _split_jwt(groups: Groups, data: bytes) -> list[Span]:
    start, end = groups[1]
    chunk = data[start:end]
    first_break = _LINE_BREAK_RE.search(chunk)
    assert first_break is not None  # the pattern holds at least one
    spans = [(0, first_break.start()), *_pieces(chunk)]
    joined = decode(chunk, spans[0])
    used = 1
    while used < len(spans):
        if joined.count(".") >= 2 and not joined.endswith("."):
            # the signature has begun: only a line as wide as the one before continues it
            previous, before = spans[used - 1], spans[used - 2] if used >= 2 else None
            if before is None or previous[1] - previous[0] != before[1] - before[0]:
                break
        joined += decode(chunk, spans[used])
        used += 1
    if used == 1 or classify_token(joined) != "jwt":
        return []
    return [Span(start, start + spans[used - 1][1], "jwt")]


SPLIT_JWT_RULE: Final = _Prefiltered(b"eyJ", RegexRule("split-jwt", _SPLIT_JWT, _split_jwt))
