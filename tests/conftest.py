"""Shared test settings."""

import os
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings

# Property tests check behaviour, not speed: a busy 2-core CI machine must not turn a slow
# example into a failure (speed is measured in bench/).
settings.register_profile("pi-memory-bridge", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("pi-memory-bridge")

# The decoded embedding model is built once (seconds) and then shared by every test process and
# every sidecar the tests start, as a user's processes share it under ~/.cache.
_MODEL_CACHE = Path(tempfile.gettempdir()) / f"pi-memory-bridge-model-cache-{os.getuid()}"
os.environ.setdefault("PI_MEMORY_BRIDGE_CACHE_DIR", str(_MODEL_CACHE))
