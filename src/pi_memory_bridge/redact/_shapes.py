"""Predicates on candidate secret values: does this look like a credential, a word, a reference?

Every function here runs in time linear in the length of its argument (no backtracking regexes
with nested quantifiers), because values can be as long as the whole input.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections import Counter
from typing import Final

PLACEHOLDER_PREFIX: Final = "[REDACTED:"


def placeholder(kind: str) -> str:
    return f"{PLACEHOLDER_PREFIX}{kind}]"


# Linear: a sequence of placeholders separated by blanks, each a bounded character class.
_PLACEHOLDERS_ONLY_RE: Final = re.compile(r"\s*(?:\[REDACTED:[a-z0-9-]+\]\s*)+")


_PLACEHOLDER_RE: Final = re.compile(r"\[REDACTED:[a-z0-9-]+\]")


def is_placeholder_only(value: str) -> bool:
    return _PLACEHOLDERS_ONLY_RE.fullmatch(value) is not None


def without_placeholders(value: str) -> str:
    return _PLACEHOLDER_RE.sub("", value)


def shannon_entropy(value: str) -> float:
    if not value:
        return 0.0
    total = len(value)
    return -sum(n / total * math.log2(n / total) for n in Counter(value).values())


_NULLISH: Final = frozenset(
    """
    none null nil undefined true false yes no on off empty n/a na tbd todo redacted hidden
    secret password token xxx ... required optional unset default changeme changeit change_me
    change-me placeholder dummy example sample read write
    """.split()
)

# Annotations and type names that follow "password:" in code (Python, TypeScript, Go, Rust).
_TYPE_NAMES: Final = frozenset(
    """
    str string int integer float number bool boolean bytes bytearray any object optional dict
    list char text varchar secretstr secretbytes uuid void never unknown
    """.split()
)

# Values that point at a secret instead of holding it: $VAR, ${VAR}, $(cmd), %VAR%, {{ x }},
# <placeholder>, {name}, ${{ secrets.X }}.
_REFERENCE_RE: Final = re.compile(
    r"\$\{\{[^}]*\}\}|\$\{[^}]*\}|\$\([^)]*\)|\$[A-Za-z_][A-Za-z0-9_]*|%[A-Za-z_][A-Za-z0-9_]*%"
    r"|\{\{[^}]*\}\}|<[^<>]*>|\{[A-Za-z_][A-Za-z0-9_.]*\}"
)

_MASKED_RE: Final = re.compile(r"[*xX•#.\-_ ]{3,}|\*+")

_DOTTED_IDENTIFIER_RE: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
_IDENTIFIER_RE: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CLASS_NAME_RE: Final = re.compile(r"(?:[A-Z][a-z]+)+")
_CAMEL_WORDS_RE: Final = re.compile(r"[a-z]+(?:[A-Z][a-z]+)+|(?:[A-Z][a-z]+){2,}")
_CAMEL_HUMP_RE: Final = re.compile(r"[A-Z]?[a-z]+")


def is_camel_words(value: str) -> bool:
    """``getUserName``, ``HelloWorld``: every hump a word (random mixed case has humps like "Kczd")."""
    if _CAMEL_WORDS_RE.fullmatch(value) is None:
        return False
    return all(any(char in _VOWELS_Y for char in hump) for hump in _CAMEL_HUMP_RE.findall(value))


# Each suffix part starts with a character its body cannot hold, so matching never backtracks.
_VERSION_RE: Final = re.compile(r"[vV]?\d+(?:\.\d+)+(?:[-+~][0-9A-Za-z.]+)*")
_DATE_RE: Final = re.compile(r"\d{4}-\d{2}-\d{2}(?:[T ][0-9:.]+Z?)?")
_FLOAT_RE: Final = re.compile(r"[-+]?\d*\.\d+(?:[eE][-+]?\d+)?")
_URL_RE: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^@\s]*")
_PATH_RE: Final = re.compile(r"(?:~|\.{1,2})?/[^\s]*|[A-Za-z]:\\[^\s]*")
_UUID_RE: Final = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_HEX_RE: Final = re.compile(r"[0-9a-fA-F]+")
_TOKEN_CHARS_RE: Final = re.compile(r"[A-Za-z0-9_.~+/=:@%!*#^?$|-]+")


def is_reference(value: str) -> bool:
    """The whole value is a variable, template or placeholder reference."""
    stripped = value.strip()
    return _REFERENCE_RE.fullmatch(stripped) is not None


# Documentation examples: "sk-...", "ghp_…", "your-api-key", "your_token_here".
_ELIDED_RE: Final = re.compile(r"[A-Za-z0-9_-]{0,12}(?:\.\.\.|…)")
_YOUR_RE: Final = re.compile(r"(?i)your[-_ ]?[a-z_-]*")


def is_nullish(value: str) -> bool:
    """Null-like literals, placeholders and elided examples: no secret in them."""
    stripped = value.strip()
    lowered = stripped.lower()
    return lowered in _NULLISH or bool(_ELIDED_RE.fullmatch(stripped) or _YOUR_RE.fullmatch(stripped))


def is_masked(value: str) -> bool:
    return _MASKED_RE.fullmatch(value.strip()) is not None


def is_type_name(value: str) -> bool:
    return value.lower() in _TYPE_NAMES


def is_code_reference(value: str) -> bool:
    """A dotted name such as ``settings.API_KEY`` or ``os.environ``: code, not a literal.

    Every part must read as words (or be very short): ``Q.xCfRMAmnsPAPvQW0Vr`` is a token.
    """
    if _DOTTED_IDENTIFIER_RE.fullmatch(value) is None:
        return False
    return all(_is_name_part(part) for part in value.split("."))


# snake_case, UPPER_SNAKE, camelCase, PascalCase with at most two digits: names people write.
_NAME_PART_RE: Final = re.compile(
    r"[a-z_][a-z0-9_]*|[A-Z_][A-Z0-9_]*|[a-z]+(?:[A-Z][a-z0-9]+)+|(?:[A-Z][a-z0-9]+)+"
)


def _is_name_part(part: str) -> bool:
    if len(part) <= 3 or is_wordy(part):
        return True
    return _NAME_PART_RE.fullmatch(part) is not None and sum(char.isdigit() for char in part) <= 2


def is_identifier(value: str) -> bool:
    return _IDENTIFIER_RE.fullmatch(value) is not None


def is_class_name(value: str) -> bool:
    return _CLASS_NAME_RE.fullmatch(value) is not None


def is_url_without_credentials(value: str) -> bool:
    return _URL_RE.fullmatch(value) is not None


_PATH_SEPARATORS_RE: Final = re.compile(r"[/\\]+")


def is_path(value: str) -> bool:
    """A file path (``~/.ssh/id_ed25519``), not base64 that happens to start with "/"."""
    if _PATH_RE.fullmatch(value) is None:
        return False
    return not any(looks_random(part, min_length=12) for part in _PATH_SEPARATORS_RE.split(value))


def is_uuid(value: str) -> bool:
    return _UUID_RE.fullmatch(value) is not None


def is_hex(value: str) -> bool:
    return _HEX_RE.fullmatch(value) is not None


def is_token_chars(value: str) -> bool:
    return _TOKEN_CHARS_RE.fullmatch(value) is not None


_SEGMENT_SPLIT_RE: Final = re.compile(r"[-_./: ]+")
# One word, optionally with a short number before or after: "split", "Hello", "oauth2", "v1",
# "API", "2024". Random tokens mix cases and digits inside a segment instead.
_WORD_SEGMENT_RE: Final = re.compile(r"[0-9]{0,4}(?:[a-z]{2,}|[A-Z][a-z]+|[A-Z]{2,})[0-9]{0,4}|[0-9]+")
_VOWELS_Y: Final = frozenset("aeiouyAEIOUY")


def _word_segment(segment: str) -> bool:
    if _WORD_SEGMENT_RE.fullmatch(segment) is None:
        return False
    letters = [char for char in segment if char.isalpha()]
    if not letters:
        return True
    vowels = sum(1 for char in letters if char in _VOWELS_Y)
    # Long runs of letters and capitals need a plausible share of vowels ("QWHXKZBN" is not a
    # word); short ones need just one ("split", "sync").
    if len(letters) >= 8 or segment.isupper():
        return vowels >= 0.2 * len(letters)
    return vowels > 0


def is_wordy(value: str) -> bool:
    """Words joined by separators (``banana-split-2``, ``google-oauth2``, ``us-east-1``)."""
    segments = [segment for segment in _SEGMENT_SPLIT_RE.split(value) if segment]
    if not any(any(char.isalpha() for char in segment) for segment in segments):
        return False
    wordy = sum(len(segment) for segment in segments if _word_segment(segment))
    return wordy >= 0.8 * sum(len(segment) for segment in segments)


def entropy_floor(length: int) -> float:
    # Random strings of n symbols cannot exceed log2(n) bits, so short values get a lower bar.
    return min(3.0, 0.75 * math.log2(max(length, 2)))


def looks_random(value: str, *, min_length: int) -> bool:
    """A credential-like token: long enough, mixed characters, high entropy, not words."""
    if len(value) < min_length or not is_token_chars(value):
        return False
    has_digit = any(char.isdigit() for char in value)
    has_lower = any(char.islower() for char in value)
    has_upper = any(char.isupper() for char in value)
    mixed = (has_digit and (has_lower or has_upper)) or (has_lower and has_upper and len(value) >= 12)
    if not mixed or is_wordy(value) or is_camel_words(value):
        return False
    if (
        _VERSION_RE.fullmatch(value)
        or _DATE_RE.fullmatch(value)
        or is_code_reference(value)
        or is_path(value)
    ):
        return False
    return shannon_entropy(value) >= entropy_floor(len(value))


def looks_like_service_credential(value: str) -> bool:
    """Credential shapes accepted after a name that mentions a credential-issuing service.

    The name is strong evidence already, so the value only has to have a credential's shape:
    long, token characters, letters mixed with digits (or mixed case, or pure hex/digits such as
    UUIDs and numeric ids), and not words, a version, a path or a URL.
    """
    if len(value) < 14 or not is_token_chars(value) or shannon_entropy(value) < 2.0:
        return False
    if _VERSION_RE.fullmatch(value) or is_path(value) or is_url_without_credentials(value):
        return False
    if is_wordy(value) or is_code_reference(value) or is_camel_words(value):
        return False
    has_digit = any(char.isdigit() for char in value)
    has_alpha = any(char.isalpha() for char in value)
    mixed_case = any(char.isupper() for char in value) and any(char.islower() for char in value)
    return has_digit or (has_alpha and mixed_case)


def looks_like_password(value: str) -> bool:
    """A short secret: letters with digits or mixed case, no spaces, not words or code."""
    if len(value) < 6 or not is_token_chars(value) or is_wordy(value):
        return False
    if _VERSION_RE.fullmatch(value) or is_code_reference(value) or is_path(value):
        return False
    has_digit = any(char.isdigit() for char in value)
    has_lower = any(char.islower() for char in value)
    has_upper = any(char.isupper() for char in value)
    return (has_digit and (has_lower or has_upper)) or (has_lower and has_upper)


def looks_like_generic_credential(value: str) -> bool:
    """Credential shapes accepted after a name that only contains a fragment such as "key"."""
    if len(value) < 12 or is_uuid(value) or is_hex(value) or _FLOAT_RE.fullmatch(value):
        return False
    return looks_random(value, min_length=12)


def is_basic_credentials(encoded: str) -> bool:
    """Base64 of ``user:password`` (what an HTTP Basic header carries)."""
    try:
        decoded = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
    except (binascii.Error, ValueError):
        return False
    text = decoded.decode("utf-8", errors="replace")
    return ":" in text and text.isprintable()


def is_non_secret_literal(value: str) -> bool:
    """Values that never hold a secret whatever the name: empty, null, masks, references."""
    stripped = value.strip()
    return (
        not stripped
        or not any(char.isalnum() for char in stripped)
        or is_placeholder_only(stripped)
        or is_nullish(stripped)
        or is_masked(stripped)
        or is_reference(stripped)
    )


def is_plain_word(value: str) -> bool:
    """An identifier without digits (``email``, ``password_confirmation``, ``Hunter``)."""
    return is_identifier(value) and not any(char.isdigit() for char in value)


def is_secretish(value: str) -> bool:
    """Enough texture to be a password rather than a word in a list of names."""
    if " " in value.strip() or is_code_reference(value) or is_path(value):
        return False
    if is_url_without_credentials(value):
        return False
    if "=" in value.rstrip("=") or value.endswith(":"):  # "id=x", "maxTokens:": a next assignment
        return False
    has_texture = any(char.isdigit() or not char.isalnum() for char in value)
    return len(value) >= 4 and has_texture and not is_plain_word(value)


def looks_like_bearer(value: str) -> bool:
    """An opaque or JWT-like bearer token (dots allowed, unlike :func:`looks_random`)."""
    has_digit = any(char.isdigit() for char in value)
    mixed_case = any(char.isupper() for char in value) and any(char.islower() for char in value)
    if not (has_digit or mixed_case) or is_wordy(value):
        return False
    return shannon_entropy(value) >= entropy_floor(len(value))


def looks_like_random_user(user: str) -> bool:
    """A URL user name that is itself a key (hex ids, generated accounts), not ``admin``."""
    has_digit = any(char.isdigit() for char in user)
    has_alpha = any(char.isalpha() for char in user)
    return len(user) >= 8 and has_digit and has_alpha and not is_wordy(user)
