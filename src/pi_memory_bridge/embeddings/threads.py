"""One thread for the numeric libraries the embedding model runs on.

The sidecar shares a small machine with Pi and other processes: on 2 cores, OpenBLAS/OpenMP
worker threads spin against each other and the model gets slower, not faster (research notes:
USE cold load 3.5 s -> 6.3 s and batch throughput 333/s -> 56/s with 2 threads). The variables
only work before numpy is first imported, so entry points call `pin_environment` first; the
loader also caps the libraries already loaded, in case something imported numpy earlier.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)


def pin_environment(env: MutableMapping[str, str] | None = None) -> None:
    """Default every numeric thread-count variable to 1 (a user's explicit value wins)."""
    target = os.environ if env is None else env
    for name in THREAD_VARIABLES:
        target.setdefault(name, "1")


def pin_loaded_libraries() -> None:
    """Cap the BLAS/OpenMP libraries numpy already loaded at one thread, process-wide."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1)
