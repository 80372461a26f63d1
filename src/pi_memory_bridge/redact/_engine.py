"""Plumbing shared by the rules: RE2 scanning over UTF-8 bytes, spans, the per-call tally.

Rules work on the UTF-8 encoding of the text, which is what RE2 matches natively: offsets are
byte offsets and only the short slices a rule inspects are decoded. The ``re2`` package's
``finditer`` converts every group offset of every match back to str offsets in Python, which
costs more than the match itself on inputs with many candidates; the scanner below calls the
matcher directly instead.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Final

import re2
from re2 import _re2

# The token and assignment patterns are large alternations; RE2's default 8 MiB budget would
# make the DFA give up and fall back to the much slower NFA on long inputs.
_RE2_MAX_MEM: Final = 64 << 20
_UNANCHORED: Final = _re2.RE2.Anchor.UNANCHORED

Groups = list[tuple[int, int]]  # (start, end) per group, (-1, -1) when the group did not match
NO_MATCH: Final = (-1, -1)


class Scanner:
    """A compiled RE2 pattern yielding the group spans of successive non-overlapping matches."""

    __slots__ = ("_regexp", "groupindex")

    def __init__(self, pattern: str) -> None:
        options = re2.Options()
        options.max_mem = _RE2_MAX_MEM
        self._regexp = _re2.RE2(pattern.encode(), options)
        if not self._regexp.ok():
            raise re2.error(self._regexp.error())
        self.groupindex: dict[str, int] = {
            name.decode(): index for name, index in self._regexp.NamedCapturingGroups()
        }

    def search(self, data: bytes, position: int) -> Groups | None:
        groups: Groups = self._regexp.Match(_UNANCHORED, data, position, len(data))
        return None if groups[0][0] < 0 else groups

    def scan(self, data: bytes) -> Iterator[Groups]:
        position = 0
        while position <= len(data):
            groups = self.search(data, position)
            if groups is None:
                return
            yield groups
            position = advance(data, position, groups[0][1])


class FormatSet:
    """Several patterns matched at once against a whole string (RE2::Set, anchored both ends)."""

    __slots__ = ("_set",)

    def __init__(self) -> None:
        options = re2.Options()
        options.max_mem = _RE2_MAX_MEM
        self._set = _re2.Set(_re2.RE2.Anchor.ANCHOR_BOTH, options)

    def add(self, pattern: str) -> int:
        index: int = self._set.Add(pattern.encode())
        if index < 0:
            raise re2.error(f"cannot add {pattern!r} to a set")
        return index

    def compile(self) -> None:
        if not self._set.Compile():
            raise re2.error("cannot compile the set")

    def fullmatch(self, data: bytes) -> int | None:
        """Index of the first added pattern matching all of ``data``, or None."""
        matched: list[int] = self._set.Match(data)
        return min(matched) if matched else None


def advance(data: bytes, position: int, target: int) -> int:
    """Where the next search starts: ``target``, but always past ``position`` and on a character
    boundary (our patterns never match empty; this only guards the loop)."""
    if target > position:
        return target
    position += 1
    while position < len(data) and 0x80 <= data[position] < 0xC0:
        position += 1
    return position


def decode(data: bytes, span: tuple[int, int]) -> str:
    return data[span[0] : span[1]].decode("utf-8", "replace")


def encode_text(text: str) -> bytes:
    # Lone surrogates (invalid in UTF-8) survive the round trip through "surrogatepass".
    return text.encode("utf-8", "surrogatepass")


def decode_text(data: bytes) -> str:
    try:
        return data.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return data.decode("utf-8", "replace")


@dataclass(frozen=True, slots=True)
class Span:
    start: int
    end: int
    kind: str


@dataclass(slots=True)
class Tally:
    count: int = 0
    kinds: set[str] = field(default_factory=set)


def placeholder_bytes(kind: str) -> bytes:
    return f"[REDACTED:{kind}]".encode()


def replace_spans(data: bytes, spans: Sequence[Span], tally: Tally) -> bytes:
    """Replace each span by its placeholder; spans must be sorted, overlapping ones are dropped."""
    parts: list[bytes] = []
    position = 0
    for span in spans:
        if span.start < position or span.end <= span.start:
            continue
        parts.append(data[position : span.start])
        parts.append(placeholder_bytes(span.kind))
        position = span.end
        tally.count += 1
        tally.kinds.add(span.kind)
    if not parts:
        return data
    parts.append(data[position:])
    return b"".join(parts)


Finder = Callable[[Groups, bytes], Sequence[Span]]
# Where to search next after a match, given the spans found in it (default: the match end).
Resumer = Callable[[Groups, Sequence[Span]], int]
Rule = Callable[[bytes, Tally], bytes]


class RegexRule:
    """One linear RE2 scan; ``find`` turns each match into the spans to replace (maybe none)."""

    __slots__ = ("_find", "_resume", "_scanner", "groupindex", "name")

    def __init__(self, name: str, pattern: str, find: Finder, resume: Resumer | None = None) -> None:
        self.name = name
        self._scanner = Scanner(pattern)
        self._find = find
        self._resume = resume
        self.groupindex = self._scanner.groupindex

    def __call__(self, data: bytes, tally: Tally) -> bytes:
        if self._resume is None:
            spans = [span for groups in self._scanner.scan(data) for span in self._find(groups, data)]
        else:
            spans = self._scan_resuming(data, self._resume)
        return replace_spans(data, spans, tally) if spans else data

    def _scan_resuming(self, data: bytes, resume: Resumer) -> list[Span]:
        spans: list[Span] = []
        position = 0
        while position <= len(data):
            groups = self._scanner.search(data, position)
            if groups is None:
                break
            found = self._find(groups, data)
            spans.extend(found)
            position = advance(data, groups[0][0], resume(groups, found))
        return spans

    def __repr__(self) -> str:
        return f"RegexRule({self.name!r})"
