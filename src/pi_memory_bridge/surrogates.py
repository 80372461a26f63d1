"""Lone UTF-16 surrogates become U+FFFD at every boundary where outside text comes in.

JavaScript strings are UTF-16, and slicing one (a tool argument cut at a length, a streamed
chunk) easily leaves half of a surrogate pair. JSON carries such a half as a `"\\ud83d"` escape,
and Python decodes it into a str that cannot be encoded as UTF-8: SQLite, pydantic's JSON
serializer and every file write then raise. So text is normalised where it arrives (the RPC
line, a line of a Pi session file) and again where a turn is prepared, before parsing,
redaction, storage or recall see it; afterwards no code has to think about surrogates.

Valid pairs are never split: `json.loads` joins an escaped high+low pair into one code point,
so every surrogate left in a decoded str is a lone one.
"""

from __future__ import annotations

import json
import re
from typing import Final

REPLACEMENT: Final = "\ufffd"
_SURROGATE: Final = re.compile("[\ud800-\udfff]")
# What a JSON line must contain to decode to a surrogate: a `\uD800`-`\uDFFF` escape, or the
# UTF-8-style bytes of one (json.loads decodes bytes with "surrogatepass").
_SURROGATE_IN_JSON: Final = re.compile(rb"\\u[dD][89a-fA-F]|\xed[\xa0-\xbf]")


def scrub(text: str) -> str:
    """`text` with each lone surrogate replaced by U+FFFD (the same object when there is none)."""
    if text.isascii():
        return text
    return _SURROGATE.sub(REPLACEMENT, text)


def scrub_json(value: object) -> object:
    """A JSON-like value with every string in it (keys included) scrubbed."""
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        return {scrub(k) if isinstance(k, str) else k: scrub_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub_json(item) for item in value]
    if isinstance(value, tuple):
        return tuple(scrub_json(item) for item in value)
    return value


def may_hold_surrogates(line: bytes) -> bool:
    """Cheap pre-check on raw JSON: False means decoding it cannot yield a surrogate."""
    return _SURROGATE_IN_JSON.search(line) is not None


def loads(line: bytes | str) -> object:
    """`json.loads` with lone surrogates normalised (for RPC lines and session-file lines).

    Raises what `json.loads` raises for text that is not JSON.
    """
    value: object = json.loads(line)
    raw = line if isinstance(line, bytes) else line.encode("utf-8", "surrogatepass")
    return scrub_json(value) if may_hold_surrogates(raw) else value
