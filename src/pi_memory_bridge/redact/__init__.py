"""Secret redaction for everything the bridge persists or prints.

``redact_text`` replaces credentials in free text with typed placeholders such as
``[REDACTED:github-token]``; ``redact_value`` does the same inside JSON-like values and blanks
whatever sits under a credential name (``password``, ``apiKey``, ``Authorization``...).

Guarantees:
- linear time: every pattern runs on RE2, checks only read their match (or a bounded window),
  and the stdlib regexes used on values cannot backtrack;
- idempotent: no replacement may cut into a placeholder, and passes repeat (at most three)
  until nothing changes, so redacting twice changes nothing;
- name rules work on words, so ``max_tokens`` or ``secretary`` are left alone.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Final

from pi_memory_bridge.surrogates import scrub

from ._assignment import ASSIGNMENT_RULE
from ._blocks import redact_kubernetes_secrets, redact_private_keys
from ._context_rules import (
    AUTH_HEADER_RULE,
    BASIC_RULE,
    BEARER_RULE,
    CLI_FLAG_RULE,
    CURL_USER_RULE,
    HEADER_OPTION_RULE,
    KEY_VALUE_ATTRIBUTES_RULE,
    SQL_PASSWORD_RULE,
    URL_USERINFO_RULE,
    XML_ELEMENT_RULE,
)
from ._encoded import BASE64_PEM_RULE, HEX_ENCODED_RULE, HEX_KEY_RULE
from ._engine import Rule, Tally, decode_text, encode_text
from ._keys import is_sensitive_key
from ._prose import PROSE_PASSWORD_RULE
from ._split_tokens import SPLIT_TOKEN_RULE
from ._structural import MAX_DEPTH, StructuralRedactor
from ._token_rules import AWS_LABELLED_RULE, AWS_PAIR_RULE, TOKEN_RULE
from ._tokens import TOKEN_FORMATS
from ._wrapped import CONTINUED_VALUE_RULE, NAME_THEN_BLOCK_RULE, SPLIT_JWT_RULE

__all__ = [
    "MAX_DEPTH",
    "RULES_VERSION",
    "Redacted",
    "is_sensitive_key",
    "redact_text",
    "redact_value",
    "rules_fingerprint",
]

# Bump when a rule starts finding something it did not before in a way the patterns below do not
# show (a decision in Python code): stored data is then re-scanned once (`rescan`).
# 1: the rules of c25255c. 2: issue 13 (split tokens, base64 PEM, hex, plain-language passwords).
# 3: issue 26 (values wrapped onto the next lines, split JWTs and URL passwords, PEM headers).
RULES_VERSION: Final = 3

# Order matters: whole blocks first, then self-identifying tokens (most specific kinds), then
# rules that need the surrounding context. Later rules skip text already replaced.
_RULES: Final[tuple[Rule, ...]] = (
    redact_private_keys,
    BASE64_PEM_RULE,
    redact_kubernetes_secrets,
    SPLIT_TOKEN_RULE,
    SPLIT_JWT_RULE,
    AWS_PAIR_RULE,
    TOKEN_RULE,
    HEX_ENCODED_RULE,
    URL_USERINFO_RULE,
    AWS_LABELLED_RULE,
    AUTH_HEADER_RULE,
    HEADER_OPTION_RULE,
    CURL_USER_RULE,
    BEARER_RULE,
    BASIC_RULE,
    SQL_PASSWORD_RULE,
    HEX_KEY_RULE,
    PROSE_PASSWORD_RULE,
    XML_ELEMENT_RULE,
    KEY_VALUE_ATTRIBUTES_RULE,
    CLI_FLAG_RULE,
    NAME_THEN_BLOCK_RULE,
    ASSIGNMENT_RULE,
    CONTINUED_VALUE_RULE,
)


@dataclass(frozen=True, slots=True)
class Redacted:
    text: str
    count: int  # number of secrets replaced
    kinds: tuple[str, ...]  # kinds found, sorted, e.g. ("aws-access-key-id", "aws-secret")


# A replacement can expose a match the first pass could not see (a token glued to a replaced
# one gains a word boundary). Passing again until nothing changes makes redaction idempotent;
# a pass only runs after one that replaced something, and the bound keeps it linear.
_MAX_PASSES: Final = 3


def redact_text(text: str) -> Redacted:
    """Replace every secret found in ``text`` with ``[REDACTED:<kind>]``; what comes out holds
    no lone UTF-16 surrogate (each became U+FFFD), so it can always be stored."""
    text = scrub(text)
    tally = Tally()
    data = encode_text(text)
    for _ in range(_MAX_PASSES):
        replaced_before = tally.count
        for rule in _RULES:
            data = rule(data, tally)
        if tally.count == replaced_before:
            break
    if not tally.count:
        return Redacted(text, 0, ())
    return Redacted(decode_text(data), tally.count, tuple(sorted(tally.kinds)))


def rules_fingerprint() -> str:
    """Identifies the rule set: `RULES_VERSION` and a digest of every pattern and token format,
    so a changed pattern triggers the re-scan even if nobody bumped the version."""
    digest = hashlib.sha256()
    for rule in _RULES:
        digest.update(str(getattr(rule, "pattern", getattr(rule, "__qualname__", ""))).encode())
        digest.update(b"\0")
    for token in TOKEN_FORMATS:
        digest.update(f"{token.kind}\0{token.pattern}\0".encode())
    return f"{RULES_VERSION}:{digest.hexdigest()[:16]}"


def _redact_text_counted(text: str) -> tuple[str, int]:
    redacted = redact_text(text)
    return redacted.text, redacted.count


def redact_value(value: object) -> tuple[object, int]:
    """Structural redaction of JSON-like values (dict/list/str/int/float/bool/None).

    Values under sensitive key names become ``"[REDACTED:<kind>]"`` wholesale (None, booleans
    and empty strings are kept: they hold no secret). Every string at any depth, keys included,
    also goes through :func:`redact_text`. Containers nested deeper than ``MAX_DEPTH`` become
    ``"[REDACTED:max-depth]"``. Returns the new value and the number of secrets replaced.
    """
    walker = StructuralRedactor(_redact_text_counted)
    return walker.walk(value), walker.count
