"""The model cache's hash check begun early (embeddings.cache_check), on a small folder of its own."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from pi_memory_bridge.embeddings import cache_check
from pi_memory_bridge.embeddings.bundle import BundleFiles
from pi_memory_bridge.embeddings.cache_check import FileDigests


def _folder(tmp_path: Path, files: dict[str, bytes], listed: list[str] | None = None) -> Path:
    folder = tmp_path / "cache"
    folder.mkdir()
    for name, data in files.items():
        (folder / name).write_bytes(data)
    names = list(files) if listed is None else listed
    (folder / cache_check.MANIFEST).write_text(json.dumps({"files": {n: "not trusted here" for n in names}}))
    return folder


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_the_listed_files_are_hashed_in_the_background_and_match_their_contents(tmp_path: Path) -> None:
    folder = _folder(tmp_path, {"a.x.npy": b"a" * 5000, "p.y.npy": b"", "tokenizer.marshal": b"t"})
    digests = FileDigests(folder).start()
    assert digests.of(folder / "a.x.npy") == _sha(b"a" * 5000)
    assert digests.of(folder / "p.y.npy") == _sha(b"")
    assert digests.of(folder / "tokenizer.marshal") == _sha(b"t")


def test_a_file_replaced_after_it_was_hashed_is_hashed_again(tmp_path: Path) -> None:
    folder = _folder(tmp_path, {"a.x.npy": b"old contents"})
    digests = FileDigests(folder).start()
    assert digests.of(folder / "a.x.npy") == _sha(b"old contents")
    # another process rebuilt the cache meanwhile: a new file under the same name
    replacement = folder / "new"
    replacement.write_bytes(b"new contents")
    os.replace(replacement, folder / "a.x.npy")
    assert digests.of(folder / "a.x.npy") == _sha(b"new contents")


def test_a_missing_file_raises_as_reading_it_does(tmp_path: Path) -> None:
    folder = _folder(tmp_path, {}, listed=["a.gone.npy"])
    digests = FileDigests(folder).start()
    with pytest.raises(FileNotFoundError):
        digests.of(folder / "a.gone.npy")


def test_names_outside_the_folder_are_not_hashed_from_the_manifest(tmp_path: Path) -> None:
    (tmp_path / "outside").write_bytes(b"secret")
    folder = _folder(tmp_path, {"a.x.npy": b"x"}, listed=["a.x.npy", "../outside", "/etc/passwd", ".hidden"])
    digests = FileDigests(folder).start()
    digests.of(folder / "a.x.npy")  # waits for the background pass
    assert set(digests._done) == {"a.x.npy"}


def test_the_load_takes_over_the_hashing_begun_early_for_its_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    resources = tmp_path / "wheel" / "resources"
    resources.mkdir(parents=True)
    files = BundleFiles(weights=resources / "weights.npz", tokenizer=resources / "sp.model")
    monkeypatch.setattr(cache_check, "unchecked_files", lambda: files)
    root = tmp_path / "root"
    root.mkdir()
    _folder(root, {"a.x.npy": b"x"})
    os.rename(root / "cache", root / cache_check.cache_key(files))
    cache_check.start_early(root)
    early = cache_check._started[root / cache_check.cache_key(files)]
    assert cache_check.start_hashing(root, files) is early
    assert cache_check.start_hashing(root, files) is not early  # taken over once; a later load hashes anew
