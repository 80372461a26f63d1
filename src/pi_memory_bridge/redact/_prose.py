"""Passwords said in plain language: "my password is hunter2x", "the wifi password for the
office is 'c0ffee-2024'", "数据库密码是 Abc12345", "我的密码为：abc123456".

A credential word, an optional "for/of/to <something>", then a verb ("is", "was", "will be",
"should be", "set to", 是, 为, 改成 ...) and the value. Prose is full of such sentences without a
secret in them ("the password field is required", "your password is incorrect", "密码是必填项"),
so a bare value must look like a password (digits, symbols or mixed case; not a plain word, a
null, a type, a code expression or a path); a quoted one must not be a null or a placeholder.
"=" and ":" are left to the assignment rule, which already knows code from secrets.
"""

from __future__ import annotations

from typing import Final

from ._engine import Groups, RegexRule, Span, decode
from ._shapes import (
    PLACEHOLDER_PREFIX,
    is_camel_words,
    is_code_reference,
    is_non_secret_literal,
    is_path,
    is_plain_word,
    is_type_name,
    is_url_without_credentials,
)

# "pin" alone is also a hardware pin ("the reset pin is GPIO4"); only "PIN code" counts.
_EN_WORD = r"(?:pass(?:word|wd|phrase|code)|pw|pwd|pin[ _-]?code)"
_EN_QUALIFIER = r"(?:[ \t]+(?:for|of|to|on)[ \t]+[^\r\n\"'`]{1,40}?)?"
# Longer phrases first: RE2 takes the first alternative that lets the whole pattern match.
_EN_VERB = (
    r"[ \t]+(?:is[ \t]+(?:now|still|just|set[ \t]+to|changed[ \t]+to)"
    r"|has[ \t]+been[ \t]+(?:set|changed)[ \t]+to|will[ \t]+be|should[ \t]+be"
    r"|(?:set|changed)[ \t]+to|is|was)[ \t]*:?"
)
_ZH_WORD = r"(?:密码|口令|暗码|登录密码|支付密码|开机密码|PIN码|pin码)"
_ZH_VERB = r"[ \t]*(?:是|为|改成了?|改为|设为|设置为|设成|换成了?)[ \t]*[:：]?"
_VALUE = (
    r"[ \t]*(?:\"(?P<double>[^\"\r\n]{1,100})\"|'(?P<single>[^'\r\n]{1,100})'"
    r"|“(?P<curly>[^”\r\n]{1,100})”|「(?P<corner>[^」\r\n]{1,100})」|`(?P<backtick>[^`\r\n]{1,100})`"
    r"|(?P<bare>[!-~]{1,100}))"
)
_PATTERN: Final = (
    r"(?i)(?:(?:^|[^A-Za-z0-9_])"
    + _EN_WORD
    + _EN_QUALIFIER
    + _EN_VERB
    + "|"
    + _ZH_WORD
    + _ZH_VERB
    + ")"
    + _VALUE
)
_QUOTED: Final = ("double", "single", "curly", "corner", "backtick")
# Sentence punctuation after a bare value decides nothing (the span still covers it).
_TRAILING: Final = ".,;:!?)]}>\"'，。；：！？）"
_MIN_CHARS: Final = 4


def _random_case(word: str) -> bool:
    """Capitals inside a run of letters that is not camel-cased words (``getUserName``)."""
    return any(char.isupper() for char in word[1:]) and not is_camel_words(word)


def _bare_is_password(value: str) -> bool:
    if PLACEHOLDER_PREFIX in value:
        return False  # already redacted (a pass after the first sees its own placeholder)
    core = value.rstrip(_TRAILING)
    if is_non_secret_literal(value) or len(core) < _MIN_CHARS or is_non_secret_literal(core):
        return False
    if is_type_name(core):
        return False
    if core.isalpha() and _random_case(core):
        return True  # "oekDcWdGNk": letters only, but no word
    if is_plain_word(core) or is_code_reference(core) or is_path(core) or is_url_without_credentials(core):
        return False
    if core.isdigit():
        return True  # a PIN or a numeric password: nothing in prose is a 4+ digit number after "is"
    has_digit = any(char.isdigit() for char in core)
    has_symbol = any(not char.isalnum() for char in core)
    mixed_case = any(char.isupper() for char in core) and any(char.islower() for char in core)
    return has_digit or has_symbol or mixed_case


def _quoted_is_password(value: str) -> bool:
    stripped = value.strip()
    if PLACEHOLDER_PREFIX in stripped:
        return False
    return len(stripped) >= _MIN_CHARS and not (is_non_secret_literal(stripped) or is_type_name(stripped))


class _Prose:
    def __init__(self) -> None:
        self.rule = RegexRule("prose-password", _PATTERN, self.find)
        self._quoted = [self.rule.groupindex[name] for name in _QUOTED]
        self._bare = self.rule.groupindex["bare"]

    def find(self, groups: Groups, data: bytes) -> list[Span]:
        for index in self._quoted:
            start, end = groups[index]
            if start >= 0:
                return (
                    [Span(start, end, "password")] if _quoted_is_password(decode(data, (start, end))) else []
                )
        start, end = groups[self._bare]
        if start < 0 or not _bare_is_password(decode(data, (start, end))):
            return []
        return [Span(start, end, "password")]


PROSE_PASSWORD_RULE: Final = _Prose().rule
