"""Recalled items: what each layer yields, made safe (redacted, escaped) and comparable (dedupe keys)."""

from __future__ import annotations

import enum
import functools
import hashlib
import re
import unicodedata
from dataclasses import dataclass

from pi_memory_bridge.recall.boundary import escape_field, escape_label
from pi_memory_bridge.redact import redact_text


class Layer(enum.StrEnum):
    L3 = "L3"
    L1 = "L1"
    L2 = "L2"
    L0 = "L0"
    SKILL = "Skill"


# Output order; dedupe keeps the first occurrence in this order.
LAYER_ORDER = (Layer.L3, Layer.L1, Layer.L2, Layer.L0, Layer.SKILL)
SECTION_TITLES = {
    Layer.L3: "[Profile (L3)]",
    Layer.L1: "[Facts and preferences (L1)]",
    Layer.L2: "[Scenario notes (L2)]",
    Layer.L0: "[Earlier conversation (L0)]",
    Layer.SKILL: "[Learned skills]",
}
# Shares of the character budget; what a layer leaves unused flows to the others.
LAYER_SHARES = {Layer.L3: 0.20, Layer.L1: 0.25, Layer.L2: 0.20, Layer.L0: 0.20, Layer.SKILL: 0.15}
# Which layers receive unused share first.
OVERFLOW_PRIORITY = (Layer.L1, Layer.L0, Layer.L2, Layer.L3, Layer.SKILL)
PLAIN_CHARS = 600  # how much of an item a recall trace keeps
# The same texts come back recall after recall (the profile every time, a project's memories
# and notes turn after turn): their redacted forms are kept, up to this many of this size.
_CACHED_TEXTS = 256
_CACHED_CHARS = 4096


@dataclass(frozen=True, slots=True)
class RecallItem:
    layer: Layer
    label: str  # already escaped, single line
    body: str  # already redacted and escaped
    dedupe_key: str
    # for recall traces only, never rendered into the block
    source_id: str = ""  # the memory id, turn id or note path the item came from
    score: float | None = None  # the backend's ranking score, when it gives one
    plain: str = ""  # redacted, not escaped: what a person reads in the trace

    @property
    def context_key(self) -> str:
        """A short digest of the dedupe key: what the shim keeps in Pi's session beside an injected
        block, so a later recall in the same branch knows this item is already in the context
        (a digest, not the text: the key would repeat the memory a second time)."""
        return context_key(self.dedupe_key)

    def render(self) -> str:
        """`- [label] first line`, continuation lines indented, so no item can forge a header."""
        lines = self.body.split("\n")
        head = f"- [{self.label}] {lines[0]}" if self.label else f"- {lines[0]}"
        return "\n".join([head, *("  " + line for line in lines[1:])])


_NON_WORD = re.compile(r"[\W_]+", re.UNICODE)


def dedupe_key(text: str) -> str:
    return _NON_WORD.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


def context_key(key: str) -> str:
    return hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


@functools.lru_cache(maxsize=_CACHED_TEXTS)
def _redacted_cached(text: str) -> str:
    return redact_text(text).text


def _redacted(text: str) -> str:
    """`redact_text(text).text`, remembered for short texts (redaction is a pure function)."""
    if len(text) > _CACHED_CHARS:
        return redact_text(text).text
    return _redacted_cached(text)


def make_item(
    layer: Layer,
    label: str,
    text: str,
    *,
    key_text: str | None = None,
    source_id: str = "",
    score: float | None = None,
) -> RecallItem | None:
    """Redact then escape; None when nothing is left to show."""
    clean = _redacted(text.strip()).strip()
    if not clean:
        return None
    safe_label = escape_label(_redacted(label))
    key = dedupe_key(_redacted(key_text) if key_text is not None else clean)
    if not key:
        return None
    return RecallItem(
        layer=layer,
        label=safe_label,
        body=escape_field(clean),
        dedupe_key=key,
        source_id=source_id,
        score=score,
        plain=clean[:PLAIN_CHARS],
    )
