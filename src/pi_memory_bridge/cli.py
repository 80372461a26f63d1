"""`pi-memory-bridge`: the sidecar (`serve`) and the operator's commands, usable without Pi."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pi-memory-bridge", description=__doc__)
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("serve", help="run the sidecar on stdin/stdout (what the Pi extension starts)")
    sub.add_parser("doctor", help="check config, backend, data dir and that Pi can load the extension")
    search = sub.add_parser("search", help="search stored memory (L1 and L0)")
    search.add_argument("query")
    search.add_argument("--limit", type=int, default=5)
    forget = sub.add_parser("forget", help="find memories, preview them, choose, confirm and delete")
    forget.add_argument("query")
    sub.add_parser(
        "setup", help="configure the MemoryCore backend interactively (endpoint, keys, team, agent)"
    )
    outbox = sub.add_parser("outbox", help="the capture outbox: status, list, flush, requeue, purge")
    outbox.add_argument(
        "action",
        nargs="*",
        default=["status"],
        help="status | list [state] | flush | requeue <id|all> | purge <id|all>",
    )
    learning = sub.add_parser(
        "consolidate", help="learn memories from captured turns now (needs learning.endpoint)"
    )
    learning.add_argument("--max-jobs", type=int, default=50)
    undo = sub.add_parser("undo", help="undo a consolidation job as a whole (default: the last one)")
    undo.add_argument("job", nargs="?", default="", help="a job id (or part of it), or 'list'")
    return parser


def main(argv: list[str] | None = None) -> int:
    # pydantic looks for plugins through importlib.metadata on first use, which costs ~100 ms of
    # start-up; this sidecar uses none.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    args = _parser().parse_args(argv)
    if args.version:
        from pi_memory_bridge._version import PROTOCOL_VERSION, __version__

        print(f"pi-memory-bridge {__version__} (protocol {PROTOCOL_VERSION})")
        return 0
    if args.command == "serve":
        from pi_memory_bridge.serve import run

        return run()
    if args.command == "doctor":
        from pi_memory_bridge.doctor import render, run_checks

        checks = run_checks(os.environ, Path.cwd())
        print(render(checks))
        return 0 if all(c.ok or c.warning for c in checks) else 1
    if args.command == "search":
        from pi_memory_bridge.terminal import search

        return search(args.query, args.limit)
    if args.command == "forget":
        from pi_memory_bridge.terminal import forget

        return forget(args.query)
    if args.command == "setup":
        from pi_memory_bridge.terminal import setup

        return setup()
    if args.command in ("consolidate", "undo"):
        from pi_memory_bridge.learning import cli as learning_cli

        return (
            learning_cli.consolidate(args.max_jobs)
            if args.command == "consolidate"
            else learning_cli.undo(args.job)
        )
    if args.command == "outbox":
        from pi_memory_bridge.terminal import outbox

        return outbox(" ".join(args.action))
    _parser().print_help(sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
