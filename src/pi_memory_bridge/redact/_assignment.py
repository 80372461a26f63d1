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

import re
from collections.abc import Sequence
from typing import Final

from ._engine import Groups, RegexRule, Span, decode
from ._keys import SERVICE_WORDS, WEAK_FRAGMENTS, KeyTier, classify_key, key_context, key_words
from ._syntax import BLANK, QUOTE
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

_KEY_CHARS = r"[A-Za-z0-9_.-]"
_VALUE_CHARS = r"[A-Za-z0-9_.~+/=:@%!*#^?$\x{00C0}-\x{024F}-]"
_FOREIGN_TRIGGERS: Final = ("密码", "口令", "密钥", "秘钥", "令牌", "凭证", "凭据", "contraseña", "contrasena")
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


def _trigger_alternation() -> str:
    fragments = [*WEAK_FRAGMENTS, "pass", "cookie", "bundle_"]
    services = [word.replace("_", "[_.-]?") for word in SERVICE_WORDS]
    return "|".join(sorted({*fragments, *services, *_FOREIGN_TRIGGERS}, key=len, reverse=True))


_LEAD = "(?:" + BLANK + "|" + QUOTE + "|=)"
_PATTERN: Final = (
    r"(?i)(?P<key>" + _KEY_CHARS + r"*(?:" + _trigger_alternation() + r")" + _KEY_CHARS + r"*"
    # up to two more words ("api key", "adobe client secret"), never an option such as "--x"
    r"(?:" + BLANK + "+[A-Za-z0-9_.]" + _KEY_CHARS + r"*){0,2})"
    r"(?:" + BLANK + "|" + QUOTE + ")*"
    r"(?P<op>:::=|::=|:=|=>|\?=|\|\||=|:|>|,|：|是|为)"
    + BLANK + "*"
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
    ends = [index for index in (data.find(b"\n", position, window_end), data.find(b"\\n", position, window_end)) if index >= 0]
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


_NAME_RE: Final = re.compile(r"[A-Za-z_$][A-Za-z0-9_$.]*")


def _calls_or_indexes(value: str, data: bytes, value_end: int) -> bool:
    """``getpass.getpass()``, ``os.environ["X"]``: a name followed by a call or an index."""
    if data[value_end : value_end + 1] not in (b"(", b"["):
        return False
    return _NAME_RE.fullmatch(value) is not None and not looks_random(value, min_length=8)


def _is_code_variable(value: str, key: str) -> bool:
    """``api_key=api_key``, ``credentials=creds``: passing a variable on, not a literal."""
    if not is_identifier(value):
        return False
    return "_" in value or classify_key(value) is not None or value.lower() in key_words(key)


def _bare_value_ok(value: str, key: str, operator: str, data: bytes, key_start: int, value_end: int) -> bool:
    if len(value) < 3 or is_non_secret_literal(value) or is_type_name(value):
        return False
    if is_code_reference(value) or is_path(value) or is_url_without_credentials(value):
        return False
    if _calls_or_indexes(value, data, value_end):
        return False
    if _is_code_variable(value, key):
        return False
    if operator in _COLON_OPERATORS and (is_plain_word(value) or is_class_name(value)):
        return _at_line_edges(data, key_start, value_end)
    if operator not in _ASSIGNING_OPERATORS:
        return is_secretish(value)
    return True


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
    KeyTier.SERVICE: looks_like_service_credential,
    KeyTier.EMBEDDED: looks_like_password,
    KeyTier.WEAK: looks_like_generic_credential,
}


# A rejected candidate may hide a real one in its value ("TOKEN>password=..."): the scan then
# resumes right after the operator. Only for short values, so each byte is rescanned a bounded
# number of times and the whole scan stays linear.
_RESCAN_VALUE_BYTES: Final = 256


class _Assignment:
    def __init__(self) -> None:
        self.rule = RegexRule("assignment", _PATTERN, self.find, self.resume)
        index_of = self.rule.groupindex
        self._key = index_of["key"]
        self._op = index_of["op"]
        self._values = [(name, index_of[name]) for name in _VALUE_GROUPS]

    def resume(self, groups: Groups, found: Sequence[Span]) -> int:
        match_end = groups[0][1]
        if found:
            return max(match_end, found[-1].end)
        operator_end = groups[self._op][1]
        return operator_end if match_end - operator_end <= _RESCAN_VALUE_BYTES else match_end

    def _name(self, groups: Groups, data: bytes) -> tuple[str, int]:
        start, end = groups[self._key]
        # "...\npassword=..." inside a JSON string: the "n" belongs to the escape, not the name.
        if start > 0 and data[start - 1 : start] == b"\\" and data[start : start + 1] in (b"n", b"r", b"t"):
            start += 1
        return decode(data, (start, end)), start

    def find(self, groups: Groups, data: bytes) -> list[Span]:
        key, key_start = self._name(groups, data)
        if key.strip().lower() in _HEADER_OWNED:
            return []
        context = key_context(key)
        if context.tier is KeyTier.NONE:
            return []
        operator = decode(data, groups[self._op])
        if context.tier is KeyTier.STRONG:
            group, span = next((name, groups[index]) for name, index in self._values if groups[index][0] >= 0)
            value = decode(data, span)
            if group == "bare":
                accepted = _bare_value_ok(value, key, operator, data, key_start, span[1])
            else:
                accepted = _quoted_value_ok(value, operator)
            return [Span(*span, context.kind)] if accepted else []
        start, end = _token_after(data, groups[self._op][1])
        token = decode(data, (start, end))
        return [Span(start, end, context.kind)] if token and _VALUE_CHECKS[context.tier](token) else []


ASSIGNMENT_RULE: Final = _Assignment().rule
