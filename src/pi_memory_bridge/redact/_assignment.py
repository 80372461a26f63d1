"""``name <op> value`` pairs: .env lines, YAML, JSON, code, query strings, headers.

One RE2 pattern finds candidates (a name containing a credential fragment or a service name, an
operator, a value); the decision is made per match from the name's tier (see ``_keys``) and the
shape of the value:

- credential names (``password``, ``api_key``...): any literal value, except references, nulls,
  masks, type annotations and code expressions;
- names mentioning a service (``HEROKU``): values shaped like a credential (long random tokens,
  hex, UUIDs, long digit ids);
- names merely containing a fragment (``xkeyy``): random-looking tokens only.
"""

from __future__ import annotations

import enum
import functools
import re
from collections.abc import Sequence
from typing import Final

from ._engine import Decision, Groups, Scanner, Span, Tally, scan_memoised
from ._keys import SERVICE_WORDS, WEAK_FRAGMENTS, KeyContext, KeyTier, classify_key, key_context, key_words
from ._shapes import (
    is_class_name,
    is_code_reference,
    is_identifier,
    is_non_secret_literal,
    is_path,
    is_plain_word,
    is_secretish,
    is_type_name,
    is_url_without_credentials,
    looks_like_generic_credential,
    looks_like_password,
    looks_like_service_credential,
    looks_random,
)
from ._syntax import BLANK, QUOTE

_KEY_CHARS = r"[A-Za-z0-9_.-]"
_VALUE_CHARS = r"[A-Za-z0-9_.~+/=:@%!*#^?$\x{00C0}-\x{024F}-]"
_FOREIGN_TRIGGERS: Final = (
    "密码",
    "口令",
    "密钥",
    "秘钥",
    "令牌",
    "凭证",
    "凭据",
    "contraseña",
    "contrasena",
)
# Operators after which any literal is a value; the others ("," ">" "||") also separate list
# items and comparisons, so the value must look like a secret there.
_ASSIGNING_OPERATORS: Final = frozenset({"=", ":", ":=", "::=", ":::=", "=>", "?=", "：", "是", "为"})
_COLON_OPERATORS: Final = frozenset({":", "："})
_HEADER_OWNED: Final = frozenset({"authorization", "proxy-authorization", "cookie", "set-cookie"})
# Blanks, quotes (plain or escaped) and '=' between an operator and its value. Each step is
# decided by one character, so this cannot backtrack.
_LEAD_RE: Final = re.compile(rb"(?:[ \t=\"'`]|\\[t\"'`])*")
_LINE_WINDOW: Final = 80
_TOKEN_PREFIX_RE: Final = re.compile(rb"[A-Za-z0-9_.~+/=:@%!*#^?$-]+")
_VALUE_GROUPS: Final = ("escaped", "double", "single", "backtick", "bare")


def trigger_alternation() -> str:
    """Words that make a name possibly a credential's, as one RE2 alternation."""
    fragments = [*WEAK_FRAGMENTS, "pass", "cookie", "bundle_", "pw"]
    services = [word.replace("_", "[_.-]?") for word in SERVICE_WORDS]
    # longest first, ties alphabetical: the same pattern (and rules fingerprint) in every process
    return "|".join(sorted({*fragments, *services, *_FOREIGN_TRIGGERS}, key=lambda w: (-len(w), w)))


_LEAD = "(?:" + BLANK + "|" + QUOTE + "|=)"
_PATTERN: Final = (
    r"(?i)(?P<key>" + _KEY_CHARS + r"*(?:" + trigger_alternation() + r")" + _KEY_CHARS + r"*"
    # up to two more words ("api key", "adobe client secret"), never an option such as "--x"
    r"(?:" + BLANK + "+[A-Za-z0-9_.]" + _KEY_CHARS + r"*){0,2})"
    r"(?:" + BLANK + "|" + QUOTE + ")*"
    r"(?P<op>:::=|::=|:=|=>|\?=|\|\||=|:|>|,|：|是|为)" + BLANK + "*"
    r"(?:\\\"(?P<escaped>(?:[^\"\\\r\n]|\\[^\"nr\r\n])*)"
    r"|\"(?P<double>(?:[^\"\\\r\n]|\\.)*)"
    r"|'(?P<single>(?:[^'\\\r\n]|\\.)*)"
    r"|`(?P<backtick>[^`\r\n]*)"
    r"|" + _LEAD + r"*(?P<bare>" + _VALUE_CHARS + r"+))"
)


def _line_start(data: bytes, window_start: int, position: int) -> int:
    """Index just after the last line break (real or JSON-escaped) before ``position``, or -1."""
    real = data.rfind(b"\n", window_start, position)
    escaped = data.rfind(b"\\n", window_start, position)
    return max(real + 1 if real >= 0 else -1, escaped + 2 if escaped >= 0 else -1)


def _line_end(data: bytes, position: int, window_end: int) -> int:
    ends = [
        index
        for index in (data.find(b"\n", position, window_end), data.find(b"\\n", position, window_end))
        if index >= 0
    ]
    return min(ends) if ends else -1


def _at_line_edges(data: bytes, key_start: int, value_end: int) -> bool:
    """``key: value`` alone on its line (YAML, headers), not inside a sentence."""
    window_start = max(0, key_start - _LINE_WINDOW)
    line_start = _line_start(data, window_start, key_start)
    if line_start < 0:
        if window_start > 0:
            return False
        line_start = 0
    if data[line_start:key_start].strip(b" \t-\"'") != b"":
        return False
    window_end = min(len(data), value_end + _LINE_WINDOW)
    line_end = _line_end(data, value_end, window_end)
    if line_end < 0 and window_end < len(data):
        return False
    rest = data[value_end : window_end if line_end < 0 else line_end].strip(b" \t\r\"',")
    return rest == b"" or rest.startswith(b"#")


_NAME_RE: Final = re.compile(r"[A-Za-z_$][A-Za-z0-9_$.:]*")


def _is_code_variable(value: str, key: str) -> bool:
    """``api_key=api_key``, ``credentials=creds``: passing a variable on, not a literal."""
    if not is_identifier(value):
        return False
    return "_" in value or classify_key(value) is not None or value.lower() in key_words(key)


class _Verdict(enum.Enum):
    REJECT = 0
    ACCEPT = 1
    IF_NOT_CALLED = 2  # a name: accept unless a call or an index follows it
    IF_ALONE_ON_LINE = 3  # a plain word after ":": accept only as a YAML-style line


# Words that start an expression after "=" in JavaScript, TypeScript and Python.
_EXPRESSION_KEYWORDS: Final = frozenset(
    {"await", "new", "yield", "typeof", "require", "import", "lambda", "not", "async", "function"}
)


def _is_code_expression(value: str) -> bool:
    """``req.headers.authorization?.split``, ``process.env.API_KEY!``: a dotted name with
    optional chaining or a non-null assertion is code too."""
    return value in _EXPRESSION_KEYWORDS or is_code_reference(value.replace("?.", ".").rstrip("!"))


@functools.lru_cache(maxsize=4096)
def _bare_verdict(value: str, key: str, operator: str) -> _Verdict:
    """What the value alone says; the caller looks at the surrounding bytes when asked to."""
    if len(value) < 3 or is_non_secret_literal(value) or is_type_name(value):
        return _Verdict.REJECT
    if _is_code_expression(value) or is_path(value) or is_url_without_credentials(value):
        return _Verdict.REJECT
    if _is_code_variable(value, key):
        return _Verdict.REJECT
    if operator in _COLON_OPERATORS and (is_plain_word(value) or is_class_name(value)):
        return _Verdict.IF_ALONE_ON_LINE
    if operator not in _ASSIGNING_OPERATORS and not is_secretish(value):
        return _Verdict.REJECT
    # getpass.getpass(), os.environ["X"]: a name followed by a call or an index.
    if _NAME_RE.fullmatch(value) is not None and not looks_random(value, min_length=8):
        return _Verdict.IF_NOT_CALLED
    return _Verdict.ACCEPT


@functools.lru_cache(maxsize=4096)
def _quoted_value_ok(value: str, operator: str) -> bool:
    if is_non_secret_literal(value) or is_url_without_credentials(value) or is_path(value):
        return False
    return operator in _ASSIGNING_OPERATORS or is_secretish(value)


def _token_after(data: bytes, position: int) -> tuple[int, int]:
    """The token after an operator, past a few blanks, quotes and '=' (gitleaks-style noise)."""
    lead = _LEAD_RE.match(data, position)
    start = lead.end() if lead else position
    token = _TOKEN_PREFIX_RE.match(data, start)
    return (start, token.end()) if token else (start, start)


_VALUE_CHECKS: Final = {
    KeyTier.SERVICE: functools.lru_cache(maxsize=4096)(looks_like_service_credential),
    KeyTier.EMBEDDED: functools.lru_cache(maxsize=4096)(looks_like_password),
    KeyTier.WEAK: functools.lru_cache(maxsize=4096)(looks_like_generic_credential),
}


@functools.lru_cache(maxsize=4096)
def _context(key: str) -> KeyContext | None:
    if key.strip().lower() in _HEADER_OWNED:  # the auth-header rule owns these
        return None
    context = key_context(key)
    return None if context.tier is KeyTier.NONE else context


# A rejected candidate may hide a real one in its value ("TOKEN>password=..."): when the value
# holds an operator, the scan resumes right after the candidate's own operator. Only for short
# values, so each byte is rescanned a bounded number of times and the scan stays linear.
_RESCAN_VALUE_BYTES: Final = 256
_BACKSLASH: Final = ord("\\")
_ESCAPE_LETTERS: Final = b"nrt"
# Bytes around a candidate that a decision may read: the one before the name (an escape?), a
# few after the match (a call? an operator?). Decisions reading further are not memoised.
_CONTEXT_BEFORE: Final = 1
_CONTEXT_AFTER: Final = 4


class _Assignment:
    """The assignment rule.

    Extracting groups costs RE2 about four times more than finding a match, and a dense input
    (a long .env file, or a hostile one) is all candidates. So the scan is capture-free, and the
    groups are only extracted for candidates not seen before in this text: decisions are
    memoised per call, keyed by the candidate and the few bytes around it that they read.
    """

    name = "assignment"
    pattern = _PATTERN

    def __init__(self) -> None:
        self._candidates = Scanner(_PATTERN, capture=False)
        self._parser = Scanner(_PATTERN)
        index_of = self._parser.groupindex
        self._key = index_of["key"]
        self._op = index_of["op"]
        self._quoted = [index_of[name] for name in _VALUE_GROUPS if name != "bare"]
        self._bare = index_of["bare"]

    def __call__(self, data: bytes, tally: Tally) -> bytes:
        return scan_memoised(
            data,
            tally,
            self._candidates,
            lambda start, end: (data[max(0, start - _CONTEXT_BEFORE) : end + _CONTEXT_AFTER], start == 0),
            lambda _candidate, start, end: self._decide(data, start, end),
        )

    def _decide(self, data: bytes, start: int, end: int) -> tuple[Decision, bool]:
        """The decision for the candidate at ``data[start:end]``, and whether it may be memoised
        (not when it read bytes beyond the memo window)."""
        groups = self._parser.match_exactly(data, start, end)
        if groups is None:  # cannot happen: both patterns match the same language
            return ((), end - start), True
        found, read_far = self.find(groups, data)
        resume = self.resume(groups, found, data)
        relative = tuple((span.start - start, span.end - start, span.kind) for span in found)
        return (relative, resume - start), not read_far

    def resume(self, groups: Groups, found: Sequence[Span], data: bytes) -> int:
        match_end = groups[0][1]
        if found:
            # Right after the replaced value: a quoted value may run on past the token that the
            # service and weak tiers looked at, and what follows must still be examined.
            return found[-1].end
        operator_end = groups[self._op][1]
        if match_end - operator_end > _RESCAN_VALUE_BYTES:
            return match_end
        # The value may itself be the next name: it holds an operator ("password=x") or one
        # follows it ('"api_key": ...').
        value = data[operator_end:match_end]
        following = data[match_end : match_end + _CONTEXT_AFTER].lstrip(b" \t\\\"'`")[:1]
        if b":" in value or b"=" in value.rstrip(b"=") or (following and following in b":=,>"):
            return operator_end
        return match_end

    def find(self, groups: Groups, data: bytes) -> tuple[list[Span], bool]:
        key_start, key_end = groups[self._key]
        # "...\npassword=..." inside a JSON string: the "n" belongs to the escape, not the name.
        if key_start > 0 and data[key_start - 1] == _BACKSLASH and data[key_start] in _ESCAPE_LETTERS:
            key_start += 1
        context = _context(data[key_start:key_end].decode("utf-8", "replace"))
        if context is None:
            return [], False
        operator_start, operator_end = groups[self._op]
        if context.tier is not KeyTier.STRONG:
            start, end = _token_after(data, operator_end)
            token = data[start:end].decode("ascii")
            accepted = bool(token) and _VALUE_CHECKS[context.tier](token)
            return ([Span(start, end, context.kind)] if accepted else []), end > groups[0][1]
        operator = data[operator_start:operator_end].decode("utf-8")
        for index in self._quoted:
            start, end = groups[index]
            if start >= 0:
                accepted = _quoted_value_ok(data[start:end].decode("utf-8", "replace"), operator)
                return ([Span(start, end, context.kind)] if accepted else []), False
        start, end = groups[self._bare]
        value = data[start:end].decode("utf-8", "replace")
        key = data[key_start:key_end].decode("utf-8", "replace")
        verdict = _bare_verdict(value, key, operator)
        read_far = verdict is _Verdict.IF_ALONE_ON_LINE
        if verdict is _Verdict.IF_NOT_CALLED:
            accepted = data[end : end + 1] not in (b"(", b"[")
        elif read_far:
            accepted = _at_line_edges(data, key_start, end)
        else:
            accepted = verdict is _Verdict.ACCEPT
        return ([Span(start, end, context.kind)] if accepted else []), read_far


ASSIGNMENT_RULE: Final = _Assignment()
