"""What the shim and the background sidecar agree on before any handshake: the variables that
switch the daemon on and name its socket, the environment families that key the socket (and,
narrower, the stored handshake answer), and where the socket and its lock file live.

Defined here once and rendered into the shim's generated tables (`sidecar/tables.py`, checked by
`tests/test_shim_tables.py`), which `extension-shim/src/daemon.ts` reads. Standard library only
and nothing but constants: the sidecar's `quick_start` and `daemon_start` import it before the
heavy imports, and `runtime_dir` (the socket folder) too.
"""

from __future__ import annotations

DAEMON_VAR = "PI_MEMORY_BRIDGE_DAEMON"  # 1/true/yes/on or 0/false/no/off (the shim decides)
SOCKET_VAR = "PI_MEMORY_BRIDGE_SOCKET"  # set by the shim on the daemon it spawns: serve that socket
TIMINGS_VAR = "PI_MEMORY_BRIDGE_TIMINGS"  # the shim's own hook timings file
# Everything a sidecar reads from its environment (config, embeddings, keys, Python itself): two
# Pis share a daemon only when these are equal, so a shared one behaves as an own child would.
SIDECAR_ENV_PREFIXES = ("PI_MEMORY_BRIDGE_", "PI_CODING_AGENT_", "TDAI_", "PYTHON", "XDG_", "UV_", "PIPX_")
SIDECAR_ENV_NAMES = (
    "HOME",
    "PATH",
    "TMPDIR",
    "VIRTUAL_ENV",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
)
# Set per run (the socket itself) or read by the shim only: in neither key.
PER_RUN_VARS = (SOCKET_VAR, TIMINGS_VAR)
# What the handshake's answer reads (`quick_start`'s fingerprint): the config's variables and
# whatever moves the agent dir or home; a part of the families above.
ANSWER_ENV_PREFIXES = ("PI_MEMORY_BRIDGE_", "PI_CODING_AGENT_", "TDAI_", "XDG_")
ANSWER_ENV_NAMES = ("HOME",)
# <first of RUNTIME_DIR_VARS that is set, else RUNTIME_DIR_FALLBACK>/<SOCKET_DIR_PREFIX><uid>/
# <hash><SOCKET_SUFFIX>, beside it <socket><LOCK_SUFFIX>: flock'd by the daemon serving the socket,
# holding its pid in decimal and a newline (the shim reads it to end a hung daemon).
RUNTIME_DIR_VARS = ("XDG_RUNTIME_DIR", "TMPDIR")
RUNTIME_DIR_FALLBACK = "/tmp"
SOCKET_DIR_PREFIX = "pi-memory-bridge-"
SOCKET_SUFFIX = ".sock"
LOCK_SUFFIX = ".lock"


def lock_text(pid: int) -> str:
    """The lock file's content while `pid` serves the socket."""
    return f"{pid}\n"


def read_lock_pid(text: str) -> int | None:
    """The pid a lock file names (None for an empty or foreign one), as the shim reads it too."""
    stripped = text.strip()
    return int(stripped) if stripped.isdigit() and int(stripped) > 1 else None
