"""Shared test settings."""

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from pi_memory_bridge.embeddings import ModelHandle, shared_handle
from pi_memory_bridge.embeddings.cache_dir import default_cache_root

# Property tests check behaviour, not speed: a busy 2-core CI machine must not turn a slow
# example into a failure (speed is measured in bench/).
settings.register_profile("pi-memory-bridge", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("pi-memory-bridge")

# The decoded embedding model is built once (seconds) and then shared by every test process and
# every sidecar the tests start, as a user's processes share it under ~/.cache.
_MODEL_CACHE = Path(tempfile.gettempdir()) / f"pi-memory-bridge-model-cache-{os.getuid()}"
os.environ.setdefault("PI_MEMORY_BRIDGE_CACHE_DIR", str(_MODEL_CACHE))


@pytest.fixture(scope="session")
def model_cache_root() -> Path:
    return default_cache_root(os.environ)


@pytest.fixture(scope="session")
def model_handle(model_cache_root: Path) -> ModelHandle:
    """The bundled embedding model, loaded once per test session (seconds the first time ever)."""
    handle = shared_handle(os.environ)  # the one the code under test gets from open_backend
    assert handle.wait(600) is not None, handle.describe()
    return handle
