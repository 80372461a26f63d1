"""Line framing: one JSON object per `\\n`-terminated line, nothing else.

Only `\\n` ends a line (U+2028/U+2029 inside JSON strings are content, not separators). A line
longer than the cap is discarded up to its newline and reported once, so one bad message never
wedges the stream.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

DEFAULT_MAX_LINE_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Line:
    data: bytes


@dataclass(frozen=True, slots=True)
class OversizedLine:
    size: int  # bytes seen before the cut (at least the cap)


Frame = Line | OversizedLine


class LineFramer:
    def __init__(self, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> None:
        self._max = max_line_bytes
        self._buf = bytearray()
        self._discarding = False
        self._discarded = 0

    def feed(self, chunk: bytes) -> Iterator[Frame]:
        start = 0
        while True:
            nl = chunk.find(b"\n", start)
            if nl < 0:
                self._take(chunk[start:])
                if not self._discarding and len(self._buf) > self._max:
                    self._discarding = True
                    self._discarded = len(self._buf)
                    self._buf.clear()
                return
            piece = chunk[start:nl]
            start = nl + 1
            if self._discarding:
                size = self._discarded + len(piece)
                self._discarding = False
                self._discarded = 0
                yield OversizedLine(size)
                continue
            self._buf += piece
            data = bytes(self._buf)
            self._buf.clear()
            if len(data) > self._max:
                yield OversizedLine(len(data))
            elif data.strip():
                yield Line(data[:-1] if data.endswith(b"\r") else data)

    def _take(self, piece: bytes) -> None:
        if self._discarding:
            self._discarded += len(piece)
        else:
            self._buf += piece

    def finish(self) -> Iterator[Frame]:
        """At EOF: a final line without `\\n` is still a line (a writer may die mid-way)."""
        if self._discarding:
            yield OversizedLine(self._discarded)
        elif self._buf.strip():
            data = bytes(self._buf)
            if len(data) > self._max:
                yield OversizedLine(len(data))
            else:
                yield Line(data)
        self._buf.clear()
        self._discarding = False
