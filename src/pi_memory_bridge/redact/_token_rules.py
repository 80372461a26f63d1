"""Rules for self-identifying credentials: the vendor token table and AWS key pairs.

Each rule compiles its regexes the first time it runs, once: the token table alone takes tens of
milliseconds to compile, and importing redaction (the sidecar's engine does) must stay cheap.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Final

from ._engine import FormatSet, Groups, RegexRule, Rule, Span, Tally, decode
from ._shapes import looks_random
from ._syntax import BLANK, QUOTE, TOKEN_START
from ._tokens import TOKEN_FORMATS


def _needs_start_boundary(pattern: str) -> bool:
    return re.match(r"[A-Za-z0-9_]|\(\?i:|\(\?:[A-Za-z0-9_]", pattern) is not None


class _Tokens:
    """All vendor formats in one capture-free alternation, so the whole table costs one DFA scan.

    Extracting groups from a 110-way alternation is slow, so the scan only finds where a token
    is; one RE2 set match on that short slice then tells which format it is (the lowest-index
    format matching the same span is the alternative the scan took).
    """

    def __init__(self) -> None:
        alternatives = []
        self._formats = FormatSet()
        for token in TOKEN_FORMATS:
            start = TOKEN_START if _needs_start_boundary(token.pattern) else ""
            alternatives.append(f"{start}(?:{token.pattern})")
            self._formats.add(token.pattern)
        self._formats.compile()
        self.rule = RegexRule("tokens", "|".join(alternatives), self.find)

    def find(self, groups: Groups, data: bytes) -> list[Span]:
        start, end = groups[0]
        # Skip what TOKEN_START consumed: nothing, one separator, or an escape such as "\n".
        for skip in range(3):
            matched = self._formats.fullmatch(data[start + skip : end])
            if matched is not None:
                break
        else:
            return []
        token = TOKEN_FORMATS[matched]
        value = decode(data, (start + skip, end))
        if token.accept is not None and not token.accept(value):
            return []
        kind = "openai-key" if token.kind == "api-key" and "T3BlbkFJ" in value else token.kind
        return [Span(start + skip, end, kind)]

    def classify(self, value: str) -> str | None:
        """The kind of the vendor token that is exactly ``value``, or None."""
        matched = self._formats.fullmatch(value.encode())
        if matched is None:
            return None
        token = TOKEN_FORMATS[matched]
        if token.accept is not None and not token.accept(value):
            return None
        return "openai-key" if token.kind == "api-key" and "T3BlbkFJ" in value else token.kind


class _CompiledOnFirstUse:
    """A rule built by `build` when it first runs, then reused (a race builds it twice, harmlessly)."""

    __slots__ = ("_build", "_rule")

    def __init__(self, build: Callable[[], Rule]) -> None:
        self._build = build
        self._rule: Rule | None = None

    def __call__(self, data: bytes, tally: Tally) -> bytes:
        rule = self._rule
        if rule is None:
            rule = self._rule = self._build()
        return rule(data, tally)


@functools.cache
def _tokens() -> _Tokens:
    """The vendor token formats, compiled on first use: the handshake path never pays for them."""
    return _Tokens()


TOKEN_RULE: Final = _CompiledOnFirstUse(lambda: _tokens().rule)


def classify_token(value: str) -> str | None:
    """The kind of the vendor token that is exactly ``value``, or None."""
    return _tokens().classify(value)


_AWS_SECRET = r"[A-Za-z0-9/+]{40}"
_AWS_SECRET_END = r"(?:[^A-Za-z0-9/+=]|$)"


def _aws_secret_ok(value: str) -> bool:
    # Real secrets mix cases and digits; a git SHA (lowercase hex) or a word run does not.
    return looks_random(value, min_length=40) and any(char.isupper() for char in value)


def _aws_pair(groups: Groups, data: bytes) -> list[Span]:
    key_id, secret = groups[1], groups[2]
    spans = [Span(key_id[0], key_id[1], "aws-access-key-id")]
    if _aws_secret_ok(decode(data, secret)):
        spans.append(Span(secret[0], secret[1], "aws-secret"))
    return spans


# An access key id followed on the same line by a 40-character secret (CSV exports, pasted pairs).
AWS_PAIR_RULE: Final = _CompiledOnFirstUse(
    lambda: RegexRule(
        "aws-pair",
        TOKEN_START
        + r"((?:AKIA|ASIA)[A-Z0-9]{16})\b[^\r\n]{0,120}?(?:^|[^A-Za-z0-9/+])("
        + _AWS_SECRET
        + ")"
        + _AWS_SECRET_END,
        _aws_pair,
    )
)


def _aws_labelled(groups: Groups, data: bytes) -> list[Span]:
    start, end = groups[1]
    return [Span(start, end, "aws-secret")] if _aws_secret_ok(decode(data, (start, end))) else []


# "AWS Secret Access Key [None]: ..." (aws configure), "SecretAccessKey": "..." and friends.
AWS_LABELLED_RULE: Final = _CompiledOnFirstUse(
    lambda: RegexRule(
        "aws-labelled",
        r"(?i)secret[ _-]?access[ _-]?key\b[^\r\n:=]{0,30}[:=]"
        + BLANK
        + "*"
        + QUOTE
        + "?("
        + _AWS_SECRET
        + ")"
        + _AWS_SECRET_END,
        _aws_labelled,
    )
)
