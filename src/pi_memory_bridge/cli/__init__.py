"""`pi-memory-bridge`: the console entry (`main`), the terminal commands (`terminal`) and `doctor`."""

from pi_memory_bridge.cli._main import main

__all__ = ["main"]
