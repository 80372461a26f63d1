"""The bundled embedding model: pinned files, the hash check, the decoded-model cache, and
what search does when the model cannot be used."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pi_memory_bridge.backends.local import LocalBackend
from pi_memory_bridge.embeddings import ModelHandle, ModelState, bundle, cache, disabled_handle, load_use
from pi_memory_bridge.embeddings.prefix_table import PrefixTable, build_arrays
from pi_memory_bridge.embeddings.use_model import UseEncoder

SAMPLES = ["我讨厌魔法数字", "I hate magic numbers", "order_sync fails with ECONNRESET", "今天天气不错", " "]


def _copy_files(target: Path) -> bundle.BundleFiles:
    real = bundle.locate()
    target.mkdir(parents=True, exist_ok=True)
    shutil.copy2(real.weights, target / "weights.npz")
    shutil.copy2(real.tokenizer, target / "sp.model")
    return bundle.BundleFiles(weights=target / "weights.npz", tokenizer=target / "sp.model")


def _flip_byte(path: Path, offset: int = 1000) -> None:
    with path.open("r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0xFF]))


def _encoder(handle: ModelHandle) -> UseEncoder:
    encoder = handle.wait(600)
    assert encoder is not None, handle.describe()
    return encoder


def test_the_installed_files_have_the_pinned_hashes() -> None:
    bundle.verify(bundle.locate())


def test_vectors_are_unit_length_and_cross_lingual(model_handle: ModelHandle) -> None:
    vectors = _encoder(model_handle).embed(SAMPLES)
    assert vectors.shape == (5, bundle.DIMENSIONS) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors[:4], axis=1), 1.0, atol=1e-4)
    assert not vectors[4].any()  # blank text: a zero vector, similar to nothing
    same, unrelated = float(vectors[0] @ vectors[1]), float(vectors[0] @ vectors[3])
    assert same > 0.6 > unrelated


def test_a_tampered_weights_file_makes_the_model_unavailable(tmp_path: Path) -> None:
    files = _copy_files(tmp_path / "wheel")
    _flip_byte(files.weights)
    handle = ModelHandle(lambda: load_use(tmp_path / "cache", files))
    assert handle.wait(60) is None
    assert handle.state is ModelState.UNAVAILABLE
    assert "SHA-256" in handle.reason and "weights.npz" in handle.reason
    assert not (tmp_path / "cache" / cache.cache_key(files)).exists()  # nothing was cached from it


async def test_without_the_model_search_is_keyword_search_as_before(tmp_path: Path) -> None:
    keyword_only = LocalBackend(tmp_path / "a")
    unavailable = LocalBackend(tmp_path / "b", embeddings=disabled_handle("weights.npz has SHA-256 00…"))
    for backend in (keyword_only, unavailable):
        await backend.memories.save("The deploy script lives in scripts/deploy.sh", "fact", "test")
        await backend.memories.save("我讨厌魔法数字", "preference", "test")
    for query in ("deploy script", "魔法数字", "how do I ship to production"):
        expected = [(m.content, m.score) for m in await keyword_only.memories.search(query, 5)]
        assert [(m.content, m.score) for m in await unavailable.memories.search(query, 5)] == expected
    status = await unavailable.status()
    assert any("keyword search only" in p and "SHA-256" in p for p in status.problems)
    for backend in (keyword_only, unavailable):
        await backend.close()


def test_a_corrupt_cache_is_rebuilt_never_used(
    tmp_path: Path, model_handle: ModelHandle, model_cache_root: Path
) -> None:
    root = tmp_path / "cache"
    directory = root / cache.cache_key(bundle.locate())
    # this install's cache only: other checkouts may be writing theirs beside it
    shutil.copytree(model_cache_root / directory.name, directory)
    _flip_byte(directory / "a.table.npy", offset=40_000)
    with pytest.raises(cache.CacheInvalid, match="SHA-256"):
        cache.load(root, bundle.locate())
    older = root / cache.cache_key(bundle.locate()).replace(f"-f{cache.CACHE_FORMAT}", "-f0")
    older.mkdir()
    (older / "a.table.npy").write_bytes(b"an earlier format")
    rebuilt = load_use(root)
    assert rebuilt.source == "wheel"
    assert not older.exists()  # a rebuild clears caches of earlier formats
    again = load_use(root)
    assert again.source == "cache"
    # the rebuilt cache, a restored one and a fresh decode give the same vectors
    reference = _encoder(model_handle).embed(SAMPLES)
    assert np.array_equal(rebuilt.encoder.embed(SAMPLES), reference)
    assert np.array_equal(again.encoder.embed(SAMPLES), reference)
    assert (directory / cache.MANIFEST).stat().st_mode & 0o777 == 0o600
    assert directory.stat().st_mode & 0o777 == 0o700


@pytest.mark.parametrize(
    "damage",
    [
        "manifest-garbage",
        "manifest-missing",
        "tokenizer-truncated",
        "array-missing",
        "prefix-table-damaged",
        "source-changed",
        "manifest-too-large",
        "manifest-of-another-python",
        "manifest-lists-other-files",
        "manifest-lists-other-prefix-arrays",
        "tokenizer-of-another-shape",
    ],
)
def test_any_damage_to_the_cache_is_refused(
    tmp_path: Path, model_handle: ModelHandle, model_cache_root: Path, damage: str
) -> None:
    root = tmp_path / "cache"
    files = bundle.locate()
    directory = root / cache.cache_key(files)
    shutil.copytree(model_cache_root / directory.name, directory)
    if damage == "manifest-garbage":
        (directory / cache.MANIFEST).write_text('{"format": 1, "model": ')
    elif damage == "manifest-missing":
        (directory / cache.MANIFEST).unlink()
    elif damage == "tokenizer-truncated":
        blob = (directory / cache.TOKENIZER_FILE).read_bytes()
        (directory / cache.TOKENIZER_FILE).write_bytes(blob[: len(blob) // 2])
    elif damage == "array-missing":
        (directory / "a.proj_W.npy").unlink()
    elif damage == "prefix-table-damaged":
        _flip_byte(directory / "p.keys.npy", offset=5000)
    elif damage == "source-changed":
        files = _copy_files(tmp_path / "wheel")  # same bytes, another file: not what was cached
        shutil.copytree(directory, root / cache.cache_key(files))  # found under the new key
    else:
        _edit_manifest(directory, damage)
    with pytest.raises(cache.CacheInvalid, match=_REFUSAL.get(damage, "")):
        cache.load(root, files)


_REFUSAL = {
    "source-changed": "changed since the cache was built",
    "manifest-too-large": "manifest too large",
    "manifest-of-another-python": "another model, format or Python",
    "manifest-lists-other-files": "does not list the expected files",
    "manifest-lists-other-prefix-arrays": "does not list the prefix table's arrays",
    "tokenizer-of-another-shape": "tokenizer tables have an unexpected shape",
}


def _edit_manifest(directory: Path, damage: str) -> None:
    """A manifest that is well-formed JSON but does not describe this cache (every file's hash
    still matches what it lists, so only the check named by `damage` can refuse it)."""
    import hashlib
    import json
    import marshal

    path = directory / cache.MANIFEST
    manifest = json.loads(path.read_text())
    if damage == "manifest-too-large":
        path.write_text(json.dumps(manifest) + " " * cache.MAX_MANIFEST_BYTES)
        return
    if damage == "manifest-of-another-python":
        manifest["python"] = "2.7"
    elif damage == "manifest-lists-other-files":
        manifest["files"]["a.extra.npy"] = "0" * 64
    elif damage == "manifest-lists-other-prefix-arrays":
        manifest["prefix_table"] = manifest["prefix_table"][1:]
    else:
        blob = marshal.dumps(["not", "the", "tables"])
        (directory / cache.TOKENIZER_FILE).write_bytes(blob)
        manifest["files"][cache.TOKENIZER_FILE] = hashlib.sha256(blob).hexdigest()
    path.write_text(json.dumps(manifest))


def test_the_sidecar_can_name_the_model_without_importing_numpy() -> None:
    # the handshake handler starts the model; numpy (100-500 ms to import) must load off its path
    script = (
        "import sys; from pi_memory_bridge.embeddings import shared_handle;"
        "shared_handle({}); assert 'numpy' not in sys.modules, 'numpy imported'"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_two_installs_sharing_a_cache_dir_keep_a_cache_each(
    tmp_path: Path, model_handle: ModelHandle, model_cache_root: Path
) -> None:
    # e.g. a `uv tool` install and a project's venv: each used to find the other's cache stale
    # and discard it, so neither ever loaded from the cache
    root = tmp_path / "cache"
    first, second = bundle.locate(), _copy_files(tmp_path / "venv-b")
    assert cache.cache_key(first) != cache.cache_key(second)
    shutil.copytree(model_cache_root / cache.cache_key(first), root / cache.cache_key(first))
    assert load_use(root, second).source == "wheel"  # decoded once for the second install
    assert load_use(root, first).source == "cache"
    assert load_use(root, second).source == "cache"


def test_copies_left_by_killed_writers_are_removed_and_live_ones_kept(tmp_path: Path) -> None:
    # a sidecar ends with os._exit and may be SIGKILLed while the cache is written in the background
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True)  # fmt: skip
    dead_pid = int(gone.stdout)
    root = tmp_path / "cache"
    root.mkdir()
    abandoned = [root / f".k.tmp-{dead_pid}-ab12cd34", root / f".k.discard-{dead_pid}-ef56ab78"]
    alive = [root / ".k.tmp-1-11111111", root / f".k.tmp-{os.getpid()}-22222222"]  # pid 1, and us
    kept = [root / "use-multilingual-v3-cache", root / ".unrelated"]
    for directory in (*abandoned, *alive, *kept):
        directory.mkdir()
        (directory / "weights.npy").write_bytes(b"x" * 1024)
    assert cache.remove_abandoned(root) == 2
    assert not any(d.exists() for d in abandoned)
    assert all(d.exists() for d in (*alive, *kept))


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(st.text(min_size=1, max_size=12), st.integers(0, 2**31 - 1), max_size=300),
    st.lists(st.text(max_size=12), max_size=50),
)
def test_the_mapped_prefix_table_answers_as_the_dict_it_was_built_from(
    prefixes: dict[str, int], others: list[str]
) -> None:
    table = PrefixTable(build_arrays(prefixes))
    assert len(table) == len(prefixes)
    for key in [*prefixes, *others, "\ud800"]:  # a lone surrogate is a miss, not an error
        assert table.get(key) == prefixes.get(key)
    assert table.to_dict() == prefixes


def test_a_restored_encoder_embeds_as_a_fresh_one_before_and_after_bulk_preparation(
    tmp_path: Path, model_handle: ModelHandle, model_cache_root: Path
) -> None:
    root = tmp_path / "cache"
    directory = root / cache.cache_key(bundle.locate())
    shutil.copytree(model_cache_root / directory.name, directory)
    restored = load_use(root)
    assert restored.source == "cache"
    texts = [*SAMPLES, "deploy-staging 的 VPN ✓ \u00e9\u0301 ﬁ ＡＢＣ", "x" * 2000]
    fresh = use_model_build_vectors(texts)
    assert np.array_equal(restored.encoder.embed(texts), fresh)
    restored.encoder.prepare_bulk()  # the worker's switch to the dict
    assert np.array_equal(restored.encoder.embed(texts), fresh)


def use_model_build_vectors(texts: list[str]) -> np.ndarray:
    from pi_memory_bridge.embeddings import use_model

    encoder, _state = use_model.build(bundle.locate())
    return encoder.embed(texts)


_RACER = """
import os, sys, time
from pathlib import Path
from pi_memory_bridge.sidecar.logs import setup_logging
from pi_memory_bridge.embeddings import load_use

setup_logging(None)  # warnings to stderr, as the sidecar and the CLI show them
root, gate = Path(sys.argv[1]), Path(sys.argv[2])
(gate / str(os.getpid())).touch()
deadline = time.monotonic() + 120
while len(list(gate.iterdir())) < 2 and time.monotonic() < deadline:
    time.sleep(0.01)
report = load_use(root)
print(report.source, len(report.encoder.embed_one("ready")))
"""


def test_two_processes_decoding_the_model_at_once_share_the_cache_silently(tmp_path: Path) -> None:
    # a CLI command beside the background sidecar on a fresh machine: both find no cache, both
    # decode, both write; the one that renames second used to warn "[Errno 39] Directory not empty"
    root, gate = tmp_path / "cache", tmp_path / "gate"
    gate.mkdir()
    command = [sys.executable, "-c", _RACER, str(root), str(gate)]
    pipe = subprocess.PIPE
    racers = [subprocess.Popen(command, stdout=pipe, stderr=pipe, text=True) for _ in "ab"]
    outcomes = [racer.communicate(timeout=600) for racer in racers]
    assert [racer.returncode for racer in racers] == [0, 0], outcomes
    assert [err for _, err in outcomes] == ["", ""]
    assert sorted(out.split()[0] for out, _ in outcomes) == ["wheel", "wheel"]  # both decoded: a race
    assert all(out.split()[1] == "512" for out, _ in outcomes)
    assert [entry.name for entry in root.iterdir()] == [cache.cache_key(bundle.locate())]  # no leftovers
    assert load_use(root).source == "cache"  # the winner's cache is whole
