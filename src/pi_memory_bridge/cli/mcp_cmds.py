"""`pi-memory-bridge mcp` (the MCP server on stdio) and `mcp install CLIENT [--print]`."""

from __future__ import annotations

import argparse
import sys

EXTRA_HINT = "the MCP server needs its extra: pip install 'pi-memory-bridge[mcp]'"


def mcp(args: argparse.Namespace) -> int:
    if args.mcp_command == "install":
        from pi_memory_bridge.mcp_server.install import install

        code: int = install(args.client, print_only=args.print, project=args.project)
        return code
    try:
        from pi_memory_bridge.mcp_server.server import run
    except ImportError as exc:
        if (exc.name or "").split(".")[0] not in ("mcp", "mcp_types"):
            raise
        print(f"pi-memory-bridge: {EXTRA_HINT}", file=sys.stderr)
        return 1
    return run(args.agent)
