"""The pieces of a turn that get a vector each: its user and assistant text apart, long texts cut.

One vector of a whole turn is a poor picture of it: the reply dilutes the question ("我家的猫叫团子"
scores 0.38 against "我养的宠物名字是什么？" alone and 0.24 as the stored turn), and the model reads
only the first `MAX_EMBED_CHARS` of a text, so the end of a long turn had no vector at all. So each
side of a turn is embedded on its own, a long side in pieces of about `PIECE_CHARS` cut at
paragraph, line or sentence ends, prose apart from pasted log or code, and a turn is ranked by
its best piece (backends/local/vectors).

At most `MAX_SIDE_PIECES` pieces a side: what a side holds beyond `PIECE_CHARS * MAX_SIDE_PIECES`
characters (a pasted file, a long generated answer) is found by its words only, which bounds the
vectors a turn costs (bench/bench_warm_recall.py measures the store and the search with them).
"""

from __future__ import annotations

import re

from pi_memory_bridge.embeddings.use_model import MAX_EMBED_CHARS
from pi_memory_bridge.prompt_focus import is_prose_line

# Short enough that one fact is a good part of its piece, long enough that a typical reply is one.
PIECE_CHARS = 700
MAX_SIDE_PIECES = 8
# Where a piece may end, best first: a paragraph, a line, a sentence, a clause, a word.
_BREAKS = (
    re.compile(r"\n\s*\n"),
    re.compile(r"\n"),
    re.compile(r"[.!?](\s|$)|[。！？]"),
    re.compile(r"[,;](\s|$)|[，；、]"),
)
_SPACE = re.compile(r"\s")
_PARAGRAPH = re.compile(r"\n\s*\n")

assert PIECE_CHARS <= MAX_EMBED_CHARS  # a piece is read whole


def _cut(text: str) -> int:
    """Where the first piece of `text` (longer than PIECE_CHARS) ends."""
    window = text[:PIECE_CHARS]
    for pattern in _BREAKS:
        ends = [m.end() for m in pattern.finditer(window) if m.end() >= PIECE_CHARS // 3]
        if ends:
            return ends[-1]
    spaces = [m.end() for m in _SPACE.finditer(window) if m.end() >= PIECE_CHARS // 3]
    return spaces[-1] if spaces else PIECE_CHARS


def _kind(paragraph: str) -> bool:
    """Prose (True) or pasted machine text: most of its lines decide."""
    lines = [line for line in paragraph.splitlines() if line.strip()]
    return 2 * sum(1 for line in lines if is_prose_line(line)) >= len(lines)


def _cut_long(text: str) -> list[str]:
    pieces: list[str] = []
    rest = text.strip()
    while len(rest) > PIECE_CHARS:
        end = _cut(rest)
        pieces.append(rest[:end].strip())
        rest = rest[end:].strip()
    return [*pieces, rest] if rest else pieces


def side_pieces(text: str) -> list[str]:
    """One side's pieces, in order (none for an empty side).

    Paragraphs are packed into pieces up to `PIECE_CHARS`, never prose with pasted log or code
    in one piece (a sentence after a paste is what a question asks about; packed with the paste
    its vector is the paste's). Over `MAX_SIDE_PIECES`, the prose pieces are kept first."""
    packed: list[tuple[str, bool]] = []
    for paragraph in _PARAGRAPH.split(text.strip()):
        if not paragraph.strip():
            continue
        kind = _kind(paragraph)
        if packed and packed[-1][1] == kind and len(packed[-1][0]) + len(paragraph) + 2 <= PIECE_CHARS:
            packed[-1] = (f"{packed[-1][0]}\n\n{paragraph.strip()}", kind)
            continue
        packed += [(piece, kind) for piece in _cut_long(paragraph)]
    if len(packed) > MAX_SIDE_PIECES:
        prose = [i for i, (_, kind) in enumerate(packed) if kind][:MAX_SIDE_PIECES]
        bulk = [i for i, (_, kind) in enumerate(packed) if not kind][: MAX_SIDE_PIECES - len(prose)]
        packed = [packed[i] for i in sorted(prose + bulk)]
    return [piece for piece, _ in packed if piece]


def turn_pieces(user_text: str, assistant_text: str) -> list[str]:
    """A turn's pieces: the user's, then the assistant's; one empty piece for an empty turn (its
    zero vector matches nothing, and the turn counts as embedded)."""
    return side_pieces(user_text) + side_pieces(assistant_text) or [""]


def pieces_beyond(whole: str, pieces: list[str]) -> list[bool]:
    """For each piece of `whole` (in order), whether it ends past the `MAX_EMBED_CHARS` that one
    vector of `whole` reads."""
    out: list[bool] = []
    cursor = 0
    for piece in pieces:
        start = whole.find(piece[:40], cursor)
        start = cursor if start < 0 else start
        out.append(start + len(piece) > MAX_EMBED_CHARS)
        cursor = start + 1
    return out
