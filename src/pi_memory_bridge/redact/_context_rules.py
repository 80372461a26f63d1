"""Rules that recognise a secret by what surrounds it: URLs, HTTP auth, command lines, markup."""

from __future__ import annotations

import re
from typing import Final

from ._engine import Groups, RegexRule, Span, decode
from ._keys import classify_key, key_words
from ._shapes import (
    is_basic_credentials,
    is_non_secret_literal,
    is_path,
    is_placeholder_only,
    is_plain_word,
    is_reference,
    looks_like_bearer,
    looks_like_random_user,
    looks_random,
    without_placeholders,
)
from ._syntax import BLANK, QUOTE, TOKEN_START

# --- URLs ------------------------------------------------------------------------------------


def _url_userinfo(groups: Groups, data: bytes) -> list[Span]:
    user_span, password_span = groups[1], groups[2]
    user = decode(data, user_span)
    if password_span[0] < 0:
        # https://<token>@host: the user name is the credential.
        return [Span(*user_span, "url-credential")] if looks_random(user, min_length=16) else []
    password = decode(data, password_span)
    if not password or is_reference(password) or is_placeholder_only(password):
        return []
    if looks_like_random_user(user):
        return [Span(user_span[0], password_span[1], "url-credential")]
    return [Span(*password_span, "password")]


# scheme://user:password@host (database URLs, git remotes, proxies). The password may contain
# "@"; the greedy class backs off to the last "@" before the host. A terminal may have wrapped the
# password onto the next line (`postgres://app:pa` newline `ss@db`): the break is part of it.
_PASSWORD_CHAR: Final = r"[^\s/?#\[\]\"'<>\\]"
_WRAP: Final = r"[ \t]*(?:\r?\n|\\r\\n|\\n)[ \t]*"
URL_USERINFO_RULE: Final = RegexRule(
    "url-userinfo",
    TOKEN_START
    + r"(?i:[a-z][a-z0-9+.-]{1,30})://([^\s:@/?#\[\]\"'<>\\]*)(?::((?:"
    + _PASSWORD_CHAR
    + "|"
    + _WRAP
    + _PASSWORD_CHAR
    + r")*))?@",
    _url_userinfo,
)


# --- HTTP authentication -------------------------------------------------------------------------

_SCHEME_KINDS: Final = {"bearer": "bearer-token", "basic": "basic-auth"}
_SCHEME_RE: Final = re.compile(r"([A-Za-z][A-Za-z0-9_-]*)(?:[ \t]|\\t)+")


def _auth_header(groups: Groups, data: bytes) -> list[Span]:
    name = decode(data, groups[1]).lower()
    start = groups[2][0]
    value = decode(data, groups[2]).rstrip()
    end = start + len(value.encode())
    if name.endswith("cookie"):
        if is_non_secret_literal(value) or is_plain_word(value):
            return []
        return [Span(start, end, "cookie")]
    scheme = _SCHEME_RE.match(value)
    if scheme is not None and scheme.end() < len(value):
        credentials = value[scheme.end() :]
        if is_non_secret_literal(credentials):
            return []
        kind = _SCHEME_KINDS.get(scheme.group(1).lower(), "authorization")
        return [Span(start + len(value[: scheme.end()].encode()), end, kind)]
    if is_non_secret_literal(value) or is_plain_word(value):
        return []
    return [Span(start, end, "authorization")]


# Header lines, header dicts and JSON: the value runs to the end of the line or the quote.
AUTH_HEADER_RULE: Final = RegexRule(
    "auth-header",
    TOKEN_START
    + r"(?i)((?:proxy-)?authorization|(?:set-)?cookie)"
    + QUOTE
    + "?"
    + BLANK
    + "*[:=]"
    + BLANK
    + "*"
    + QUOTE
    + "?"
    + r"((?:[^\r\n\"'`\\]|\\t)+)",
    _auth_header,
)


def _bearer(groups: Groups, data: bytes) -> list[Span]:
    return [Span(*groups[1], "bearer-token")] if looks_like_bearer(decode(data, groups[1])) else []


BEARER_RULE: Final = RegexRule(
    "bearer", TOKEN_START + r"(?i)bearer" + BLANK + r"+([A-Za-z0-9._~+/=@-]{8,})", _bearer
)


def _basic(groups: Groups, data: bytes) -> list[Span]:
    return [Span(*groups[1], "basic-auth")] if is_basic_credentials(decode(data, groups[1])) else []


BASIC_RULE: Final = RegexRule(
    "basic", TOKEN_START + r"(?i)basic" + BLANK + r"+([A-Za-z0-9+/]{6,}={0,2})", _basic
)


# --- command lines -----------------------------------------------------------------------------

_SHELL_WORD = r"(?:\"[^\"\r\n]*\"|'[^'\r\n]*'|[^\s\"'])+"


def _curl_user(groups: Groups, data: bytes) -> list[Span]:
    word = decode(data, groups[1])
    unquoted = without_placeholders(word.replace('"', "").replace("'", ""))
    user, separator, password = unquoted.partition(":")
    # "-u key:" (empty password) is how Stripe-style APIs take a key, so it counts too.
    if not separator or all(not part or is_reference(part) for part in (user, password)):
        return []
    return [Span(*groups[1], "credential")]


# curl -u user:password / --user=user:password, continuation lines included.
CURL_USER_RULE: Final = RegexRule(
    "curl-user",
    TOKEN_START
    + r"curl\b(?:[^\r\n]|\\\r?\n)*?"
    + BLANK
    + "(?:-u|--user)(?:=|"
    + BLANK
    + "*)("
    + _SHELL_WORD
    + ")",
    _curl_user,
)


def _sensitive_header_name(name: str) -> str | None:
    kind = classify_key(name)
    if kind is not None:
        return kind
    words = key_words(name)
    return "api-key" if words and words[-1] in ("key", "token", "apikey") else None


def _header_option(groups: Groups, data: bytes) -> list[Span]:
    kind = _sensitive_header_name(decode(data, groups[1]))
    start = groups[2][0]
    value = decode(data, groups[2]).rstrip()
    if kind is None or kind in ("authorization", "cookie") or is_non_secret_literal(value):
        return []
    return [Span(start, start + len(value.encode()), kind)]


# -H "X-Api-Key: ..." / --header 'Token: ...' (curl, wget and friends).
HEADER_OPTION_RULE: Final = RegexRule(
    "header-option",
    r"(?:-H|--header)(?:=|" + BLANK + "*)" + QUOTE + "{1,2}([A-Za-z0-9_-]+):" + BLANK + r"*([^\"'\r\n\\]+)",
    _header_option,
)


def _cli_flag(groups: Groups, data: bytes) -> list[Span]:
    kind = classify_key(decode(data, groups[1]))
    value = decode(data, groups[2]).strip("\"'")
    if kind is None or is_non_secret_literal(value) or is_path(value) or is_plain_word(value):
        return []
    return [Span(*groups[2], kind)]


# --password hunter2, --api-key "..." (the --flag=value form is an assignment).
CLI_FLAG_RULE: Final = RegexRule(
    "cli-flag",
    r"(?:^|[\s\"'])--?([A-Za-z][A-Za-z0-9_-]*)[ \t]+"
    r"(\"(?:[^\"\\\r\n]|\\.)*\"|'[^'\r\n]*'|[^\s\"'`-][^\s\"'`]*)",
    _cli_flag,
)


def _sql_password(groups: Groups, data: bytes) -> list[Span]:
    return [] if is_non_secret_literal(decode(data, groups[1])) else [Span(*groups[1], "password")]


# CREATE USER ... IDENTIFIED BY '...', ALTER ROLE ... PASSWORD '...'.
SQL_PASSWORD_RULE: Final = RegexRule(
    "sql-password", r"(?i)\b(?:identified[ \t]+by|password)[ \t]+'([^'\r\n]+)'", _sql_password
)


# --- markup ----------------------------------------------------------------------------------


def _xml_element(groups: Groups, data: bytes) -> list[Span]:
    tag, closing = decode(data, groups[1]), decode(data, groups[3])
    kind = classify_key(tag)
    if tag != closing or kind is None or is_non_secret_literal(decode(data, groups[2])):
        return []
    return [Span(*groups[2], kind)]


# <password>...</password> (Maven settings.xml, Spring and .NET configs).
XML_ELEMENT_RULE: Final = RegexRule(
    "xml-element",
    r"<([A-Za-z_][A-Za-z0-9_.:-]*)>([^<\r\n]+)</([A-Za-z_][A-Za-z0-9_.:-]*)>",
    _xml_element,
)


def _key_value_attributes(groups: Groups, data: bytes) -> list[Span]:
    kind = classify_key(decode(data, groups[1]))
    if kind is None or is_non_secret_literal(decode(data, groups[2])):
        return []
    return [Span(*groups[2], kind)]


# <add key="Password" value="..." /> (.NET app.config, NuGet.config).
KEY_VALUE_ATTRIBUTES_RULE: Final = RegexRule(
    "key-value-attributes",
    TOKEN_START
    + r"(?i)key"
    + BLANK
    + "*="
    + BLANK
    + r"*\\?\"([^\"\\\r\n]{1,100})\\?\""
    + BLANK
    + r"*value"
    + BLANK
    + "*="
    + BLANK
    + r"*\\?\"([^\r\n]*?)\\?\""
    + BLANK
    + "*/?>",
    _key_value_attributes,
)
