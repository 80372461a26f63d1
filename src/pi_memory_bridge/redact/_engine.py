"""Plumbing shared by the rules: RE2 scanning over UTF-8 bytes, spans, the per-call tally.

Rules work on the UTF-8 encoding of the text, which is what RE2 matches natively: offsets are
byte offsets and only the short slices a rule inspects are decoded. The ``re2`` package's
``finditer`` converts every group offset of every match back to str offsets in Python, which
costs more than the match itself on inputs with many candidates; the scanner below calls the
matcher directly instead.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Final

import re2
from re2 import _re2

# The token and assignment patterns are large alternations; RE2's default 8 MiB budget would
# make the DFA give up and fall back to the much slower NFA on long inputs.
_RE2_MAX_MEM: Final = 64 << 20
_UNANCHORED: Final = _re2.RE2.Anchor.UNANCHORED
_ANCHOR_BOTH: Final = _re2.RE2.Anchor.ANCHOR_BOTH

Groups = list[tuple[int, int]]  # (start, end) per group, (-1, -1) when the group did not match


def capture_free(pattern: str) -> str:
    """The same pattern with every group non-capturing, so RE2 needs only its DFA to match."""
    out: list[str] = []
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            out.append(pattern[index : index + 2])
            index += 2
        elif char == "[":
            end = index + 1
            if pattern[end : end + 1] == "^":
                end += 1
            if pattern[end : end + 1] == "]":
                end += 1
            while end < len(pattern) and pattern[end] != "]":
                end += 2 if pattern[end] == "\\" else 1
            out.append(pattern[index : end + 1])
            index = end + 1
        elif pattern.startswith("(?P<", index):
            out.append("(?:")
            index = pattern.index(">", index) + 1
        elif char == "(" and not pattern.startswith("(?", index):
            out.append("(?:")
            index += 1
        else:
            out.append(char)
            index += 1
    return "".join(out)


class Scanner:
    """A compiled RE2 pattern over UTF-8 bytes, returning group spans as byte offsets."""

    __slots__ = ("_regexp", "groupindex", "groups")

    def __init__(self, pattern: str, *, capture: bool = True) -> None:
        options = re2.Options()
        options.max_mem = _RE2_MAX_MEM
        self._regexp = _re2.RE2((pattern if capture else capture_free(pattern)).encode(), options)
        if not self._regexp.ok():
            raise re2.error(self._regexp.error())
        self.groupindex: dict[str, int] = {
            name.decode(): index for name, index in self._regexp.NamedCapturingGroups()
        }
        self.groups: int = self._regexp.NumberOfCapturingGroups()

    def search(self, data: bytes, position: int) -> Groups | None:
        groups: Groups = self._regexp.Match(_UNANCHORED, data, position, len(data))
        return None if groups[0][0] < 0 else groups

    def match_exactly(self, data: bytes, start: int, end: int) -> Groups | None:
        """Groups of the match spanning exactly ``data[start:end]``."""
        groups: Groups = self._regexp.Match(_ANCHOR_BOTH, data, start, end)
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


_PLACEHOLDER_BYTES_RE: Final = re.compile(rb"\[REDACTED:[a-z0-9-]+\]")


def _placeholders(data: bytes) -> list[tuple[int, int]]:
    if b"[REDACTED:" not in data:
        return []
    return [match.span() for match in _PLACEHOLDER_BYTES_RE.finditer(data)]


def _cuts_a_placeholder(span: Span, placeholders: list[tuple[int, int]], starts: list[int]) -> bool:
    """True if ``span`` starts or ends inside a placeholder (covering whole ones is fine)."""
    index = bisect.bisect_right(starts, span.start) - 1
    if index >= 0 and placeholders[index][0] < span.start < placeholders[index][1]:
        return True
    index = bisect.bisect_left(starts, span.end) - 1
    return index >= 0 and placeholders[index][0] < span.end < placeholders[index][1]


def replace_spans(data: bytes, spans: Sequence[Span], tally: Tally) -> bytes:
    """Replace each span by its placeholder; spans must be sorted, overlapping ones are dropped.

    A span that cuts into an existing placeholder is dropped too, so placeholders are never
    rewritten or nested (this is what keeps redaction idempotent whatever a rule matches).
    """
    placeholders = _placeholders(data)
    starts = [start for start, _ in placeholders]
    parts: list[bytes] = []
    position = 0
    for span in spans:
        if span.start < position or span.end <= span.start:
            continue
        if placeholders and _cuts_a_placeholder(span, placeholders, starts):
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
Rule = Callable[[bytes, Tally], bytes]

# Per call, decisions are memoised by candidate; past this many distinct candidates, new ones
# are decided without being remembered (bounded memory on large inputs).
MEMO_ENTRIES: Final = 4096


# What a scan decided for one candidate, relative to the candidate's start: the spans to replace,
# and where the next search starts.
Decision = tuple[tuple[tuple[int, int, str], ...], int]


def scan_memoised(
    data: bytes,
    tally: Tally,
    candidates: Scanner,
    memo_key: Callable[[int, int], Hashable],
    decide: Callable[[Groups, int, int], tuple[Decision, bool]],
) -> bytes:
    """The scan of a rule that decides each distinct candidate once per text. `decide` gets the
    candidate's match and bounds, and says whether its decision may be kept under the candidate's
    `memo_key` (not when it read bytes the key does not hold)."""
    spans: list[Span] = []
    memo: dict[Hashable, Decision] = {}
    position = 0
    while position <= len(data):
        candidate = candidates.search(data, position)
        if candidate is None:
            break
        start, end = candidate[0]
        key = memo_key(start, end)
        decision = memo.get(key)
        if decision is None:
            decision, keep = decide(candidate, start, end)
            if keep and len(memo) < MEMO_ENTRIES:
                memo[key] = decision
        found, resume = decision
        spans.extend(Span(start + first, start + last, kind) for first, last, kind in found)
        position = advance(data, start, start + resume)
    return replace_spans(data, spans, tally) if spans else data


class RegexRule:
    """One linear RE2 scan; ``find`` turns each match into the spans to replace (maybe none).

    ``find`` may only read the bytes of its match. Extracting groups costs RE2 about four times
    more than finding a match, so the scan is capture-free and groups are only extracted for a
    candidate not seen before in this text: decisions are memoised per call by the candidate's
    bytes (dense inputs, a long .env file or a hostile one, repeat a lot).
    """

    __slots__ = ("_candidates", "_find", "_parser", "groupindex", "name", "pattern")

    def __init__(self, name: str, pattern: str, find: Finder) -> None:
        self.name = name
        self.pattern = pattern
        self._parser = Scanner(pattern)
        self._candidates = Scanner(pattern, capture=False) if self._parser.groups else None
        self._find = find
        self.groupindex = self._parser.groupindex

    def __call__(self, data: bytes, tally: Tally) -> bytes:
        def decide(candidate: Groups, start: int, end: int) -> tuple[Decision, bool]:
            groups = candidate if self._candidates is None else self._parser.match_exactly(data, start, end)
            found = self._find(groups, data) if groups is not None else ()
            relative = tuple((span.start - start, span.end - start, span.kind) for span in found)
            return (relative, end - start), True  # `find` reads only its match: always kept

        def key(start: int, end: int) -> tuple[bytes, bool]:
            return data[start:end], start == 0

        return scan_memoised(data, tally, self._candidates or self._parser, key, decide)

    def __repr__(self) -> str:
        return f"RegexRule({self.name!r})"
