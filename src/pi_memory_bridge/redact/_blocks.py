"""Multi-line secrets: PEM/PGP private key blocks and the data of Kubernetes Secret manifests.

Both need "from this header to the matching end" logic that a single regex would do with an
unbounded lazy scan per header (quadratic on many headers without an end). Here every header,
footer and document boundary is found in one RE2 pass each, and pairing them is a merge walk.
"""

from __future__ import annotations

import bisect
import re
from typing import Final

from ._engine import Scanner, Span, Tally, decode, replace_spans
from ._shapes import is_reference
from ._syntax import BLANK, QUOTE, TOKEN_START

# A key block larger than this is not a key; past it, only the base64 body right after the
# header is removed.
MAX_KEY_BLOCK_BYTES: Final = 64 * 1024

# A terminal may wrap the header itself ("-----BEGIN RSA PRIVATE" newline "KEY-----").
_HEADER_BLANK: Final = r"(?:[ \t]|\r?\n|\\r\\n|\\n)+"
_KEY_HEADER: Final = Scanner(
    r"(?i)-----BEGIN(?:[ A-Z0-9_-]|\r?\n|\\n){0,100}PRIVATE" + _HEADER_BLANK + r"KEY(?: BLOCK)?-----"
)
_KEY_FOOTER: Final = Scanner(r"(?i)KEY(?: BLOCK)?-----")
# The body of a key whose header is gone (cut off by the paste, or by a window): lines of base64
# ending in the key's footer.
_HEADLESS_BODY: Final = Scanner(
    r"(?:[A-Za-z0-9+/=]{16,}(?:[ \t]*(?:\r?\n|\\r\\n|\\n)(?:[ \t]*>)*[ \t]*))+"
    r"-----END[ A-Z0-9_-]{0,100}PRIVATE" + _HEADER_BLANK + r"KEY(?: BLOCK)?-----"
)
# Body of a truncated block: base64, blanks, JSON "\n" escapes, RFC 1421 headers. A single
# character class, so matching it with stdlib re cannot backtrack.
_KEY_BODY: Final = re.compile(rb"[A-Za-z0-9+/=\s\\:,._-]*")


def redact_private_keys(data: bytes, tally: Tally) -> bytes:
    lowered = data.lower()
    if b"private" not in lowered or (b"key-----" not in lowered and b"block-----" not in lowered):
        return data
    headers = [groups[0] for groups in _KEY_HEADER.scan(data)] if b"-----begin" in lowered else []
    if not headers:
        return _redact_headless_bodies(data, lowered, tally)
    header_ends = {end for _, end in headers}
    footers = [groups[0] for groups in _KEY_FOOTER.scan(data) if groups[0][1] not in header_ends]
    footer_starts = [start for start, _ in footers]
    spans: list[Span] = []
    covered_until = 0
    for index, (start, end) in enumerate(headers):
        if start < covered_until:
            continue
        next_header = headers[index + 1][0] if index + 1 < len(headers) else len(data)
        limit = min(next_header, start + MAX_KEY_BLOCK_BYTES)
        footer_index = bisect.bisect_left(footer_starts, end)
        if footer_index < len(footers) and footers[footer_index][1] <= limit:
            block_end = footers[footer_index][1]
        else:
            body = _KEY_BODY.match(data, end, limit)
            block_end = body.end() if body else end
        spans.append(Span(start, block_end, "private-key"))
        covered_until = block_end
    data = replace_spans(data, spans, tally)
    return _redact_headless_bodies(data, data.lower(), tally)


_FOOTER_WINDOW: Final = 120


def _ends_a_private_key(lowered: bytes) -> bool:
    """Is there an "-----END ... PRIVATE" footer? (Certificates and public keys have footers too.)"""
    position = lowered.find(b"-----end")
    while position >= 0:
        if b"private" in lowered[position : position + _FOOTER_WINDOW]:
            return True
        position = lowered.find(b"-----end", position + 1)
    return False


def _redact_headless_bodies(data: bytes, lowered: bytes, tally: Tally) -> bytes:
    if not _ends_a_private_key(lowered):
        return data
    spans = [Span(*groups[0], "private-key") for groups in _HEADLESS_BODY.scan(data)]
    return replace_spans(data, spans, tally) if spans else data


_SECRET_KIND: Final = Scanner(TOKEN_START + r"(?i)(kind):" + BLANK + "*" + QUOTE + r"?secret\b")
_DOC_SEPARATOR: Final = Scanner(r"\n---")
_DATA_SECTION: Final = Scanner(TOKEN_START + r"(?i)(?:string)?data:")
# "name: value" inside a data section; block scalar indicators (|, >-) allowed before the value.
_DATA_ITEM: Final = Scanner(
    r"(?:^|[\s\"'{,]|\\[nrt])[A-Za-z0-9_.-]+:(?:"
    + BLANK
    + r"*(?:\||>[-+]?)(?:\s|\\[tnr])+)?"
    + BLANK
    + "*"
    + QUOTE
    + r"?(?P<value>[A-Za-z0-9+/]{10,}={0,3})"
)
_DATA_VALUE: Final = _DATA_ITEM.groupindex["value"]


def _documents(data: bytes) -> list[tuple[int, int]]:
    starts = [0, *(groups[0][0] + 1 for groups in _DOC_SEPARATOR.scan(data))]
    return list(zip(starts, [*starts[1:], len(data)], strict=True))


def redact_kubernetes_secrets(data: bytes, tally: Tally) -> bytes:
    """Blank base64 values in the ``data:`` of documents that declare ``kind: Secret``."""
    if b"secret" not in data.lower():
        return data
    kinds = [groups[1][0] for groups in _SECRET_KIND.scan(data)]
    if not kinds:
        return data
    spans: list[Span] = []
    for doc_start, doc_end in _documents(data):
        position = bisect.bisect_left(kinds, doc_start)
        if position == len(kinds) or kinds[position] >= doc_end:
            continue
        document = data[doc_start:doc_end]
        section = next(_DATA_SECTION.scan(document), None)
        if section is None:
            continue
        offset = doc_start + section[0][1]
        body = document[section[0][1] :]
        for groups in _DATA_ITEM.scan(body):
            start, end = groups[_DATA_VALUE]
            if not is_reference(decode(body, (start, end))):
                spans.append(Span(offset + start, offset + end, "kubernetes-secret"))
    return replace_spans(data, spans, tally)
