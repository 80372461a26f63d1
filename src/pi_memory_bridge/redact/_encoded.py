"""Secrets in an encoding: a base64-wrapped PEM private key, a token written in hex, and raw key
material in hex (continuous, `0x`-prefixed, or bytes separated by spaces or colons) after a name
that says it is a key.

Decoding is the evidence for the first two: a base64 run is redacted when it decodes to a PEM
private-key header, a hex run when its bytes are text holding a vendor token or a private key.
Raw key material has no such tell (a SHA-256 digest is 64 hex digits too), so it needs the name.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Final

from ._blocks import redact_private_keys
from ._engine import Groups, RegexRule, Span, Tally, decode
from ._syntax import QUOTE, TOKEN_START
from ._token_rules import TOKEN_RULE

# --- base64 of a PEM private key ------------------------------------------------------------------

_B64_LINE_BREAK = r"(?:\r?\n|\\r\\n|\\n)[ \t]*"
# "-----BEGIN " in base64 starts "LS0tLS1CRUdJTi"; continuation lines of a wrapped encoding
# follow (each at least 16 characters, or the short last one ending in padding).
_BASE64_PEM_PATTERN: Final = (
    TOKEN_START
    + r"(LS0tLS1CRUdJTi[A-Za-z0-9+/]*={0,2}"
    + r"(?:"
    + _B64_LINE_BREAK
    + r"(?:[A-Za-z0-9+/]{16,}={0,2}|[A-Za-z0-9+/]{1,15}={1,2}))*)"
)
_B64_BREAKS_RE: Final = re.compile(rb"\\r\\n|\\n|\s")
_HEAD_CHARS: Final = 160  # enough base64 to decode "-----BEGIN ENCRYPTED PRIVATE KEY-----"


def _decoded_head(encoded: bytes) -> str:
    head = _B64_BREAKS_RE.sub(b"", encoded)[:_HEAD_CHARS].rstrip(b"=")
    head = head[: len(head) // 4 * 4]
    try:
        return base64.b64decode(head, validate=True).decode("ascii", "replace")
    except (binascii.Error, ValueError):
        return ""


def _base64_pem(groups: Groups, data: bytes) -> list[Span]:
    start, end = groups[1]
    head = _decoded_head(data[start:end]).upper()
    if head.startswith("-----BEGIN") and "PRIVATE KEY" in head:
        return [Span(start, end, "private-key")]
    return []


class _Prefiltered:
    """A rule that runs only on text holding a literal it needs: a substring test costs far less
    than a scan, and almost no text holds the base64 of "-----BEGIN"."""

    __slots__ = ("_literal", "_rule", "name", "pattern")

    def __init__(self, literal: bytes, rule: RegexRule) -> None:
        self._literal, self._rule = literal, rule
        self.name, self.pattern = rule.name, rule.pattern

    def __call__(self, data: bytes, tally: Tally) -> bytes:
        return self._rule(data, tally) if self._literal in data else data


BASE64_PEM_RULE: Final = _Prefiltered(
    b"LS0tLS1CRUdJTi", RegexRule("base64-pem", _BASE64_PEM_PATTERN, _base64_pem)
)


# --- a token written in hex --------------------------------------------------------------------------

# Each byte written as two hex digits must be printable text (0x20-0x7E, tab, LF, CR): digests,
# ids and random bytes fail this within a few bytes, so they cost the scan nothing.
_TEXT_BYTE = r"(?:[2-7][0-9a-fA-F]|0[9aAdD])"
_HEX_ENCODED_PATTERN: Final = (
    r"(?:^|[^0-9A-Za-z\\])("
    + f"{_TEXT_BYTE}{{16,}}"  # 6768705f...
    + f"|(?:{_TEXT_BYTE}[ :]){{15,}}{_TEXT_BYTE}"  # 67 68 70 5f ... / 67:68:70:...
    + f"|(?:\\\\x{_TEXT_BYTE}){{16,}}"  # \x67\x68\x70...
    + r")(?:[^0-9A-Za-z]|$)"
)
_NOT_HEX_RE: Final = re.compile(rb"\\x|[ :]")
_MIN_PRINTABLE_SHARE: Final = 0.95


def _hex_encoded(groups: Groups, data: bytes) -> list[Span]:
    start, end = groups[1]
    digits = _NOT_HEX_RE.sub(b"", data[start:end])
    try:
        raw = bytes.fromhex(digits.decode("ascii"))
    except ValueError:
        return []
    printable = sum(1 for byte in raw if 0x20 <= byte < 0x7F or byte in (0x09, 0x0A, 0x0D))
    if printable < _MIN_PRINTABLE_SHARE * len(raw):
        return []  # digests, ids and random bytes: not text, so not an encoded token
    tally = Tally()
    # Only the self-identifying rules: an encoding is evidence only when what it hides is one.
    TOKEN_RULE(redact_private_keys(raw, tally), tally)
    if not tally.count:
        return []
    return [Span(start, end, min(tally.kinds))]


HEX_ENCODED_RULE: Final = RegexRule("hex-encoded", _HEX_ENCODED_PATTERN, _hex_encoded)


# --- raw key material in hex after a key name ----------------------------------------------------

_KEY_NAME = (
    r"(?:private|priv|secret|signing|sign|encryption|decryption|master|wallet|hmac|session|"
    r"aes(?:[ _-]?(?:128|192|256))?|des|xts|api)[ _-]?key"
    r"|seed|私钥|密钥|秘钥"
)
# After the name: a few words ("(hex)", "for the vault", "is"), an operator or a verb, quotes.
_HEX_KEY_PATTERN: Final = (
    r"(?i)(?:^|[^A-Za-z0-9_])(" + _KEY_NAME + r")(?:[^A-Za-z0-9_\r\n]|$)"
    r"([^\r\n]{0,30}?)"
    + QUOTE
    + r"?(?:0x)?("
    + r"[0-9a-f]{32,}"
    + r"|(?:[0-9a-f]{2}[ :-]){15,}[0-9a-f]{2}"
    + r"|(?:[0-9a-f]{4,8}[ -]){3,}[0-9a-f]{4,8}"
    + r")(?:[^0-9a-z]|$)"
)
# Words between the name and the hex that say the hex describes the key instead of being it.
_DESCRIBES_KEY_RE: Final = re.compile(
    r"(?i)\b(?:fingerprint|id|ids|hash|hashes|sha|sha1|sha256|digest|checksum|hmac of|commit|"
    r"version|serial|length|size|public)\b"
)
_SEPARATORS_RE: Final = re.compile(r"[ :-]")
_MIN_DISTINCT_DIGITS: Final = 8


def _hex_key(groups: Groups, data: bytes) -> list[Span]:
    between = decode(data, groups[2])
    if _DESCRIBES_KEY_RE.search(between):
        return []
    start, end = groups[3]
    digits = _SEPARATORS_RE.sub("", decode(data, groups[3]))
    if len(set(digits.lower())) < _MIN_DISTINCT_DIGITS:
        return []  # 0000..., deadbeefdeadbeef...: a placeholder, not a key
    return [Span(start, end, "hex-key")]


HEX_KEY_RULE: Final = RegexRule("hex-key", _HEX_KEY_PATTERN, _hex_key)
