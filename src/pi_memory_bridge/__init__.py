"""pi-memory-bridge: cross-session memory for the Pi coding agent (the Python sidecar)."""

from pi_memory_bridge._version import PROTOCOL_VERSION, __version__

__all__ = ["PROTOCOL_VERSION", "__version__"]
