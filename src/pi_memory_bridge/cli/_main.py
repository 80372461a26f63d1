"""`pi-memory-bridge`: the sidecar (`serve`) and the operator's commands, usable without Pi."""

from __future__ import annotations

import os
import signal
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse
    from types import FrameType

# The sidecar Pi spawns (`serve`, exactly) answers its handshake before anything else is
# imported (sidecar.quick_start): argparse, the memory commands' parsers and pathlib load only
# for the other commands.


def _parser() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The parser, and each subcommand's own parser (a usage error names the subcommand's usage)."""
    import argparse

    from pi_memory_bridge.cli import memory_args

    parser = argparse.ArgumentParser(prog="pi-memory-bridge", description=__doc__)
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command")
    serve = sub.add_parser("serve", help="run the sidecar on stdin/stdout (what the Pi extension starts)")
    serve.add_argument(
        "--stop", action="store_true", help="stop this user's background sidecars and memory inspectors now"
    )
    sub.add_parser("doctor", help="check config, backend, data dir and that Pi can load the extension")
    search = sub.add_parser("search", help="search stored memory (L1 and L0); empty: the most recent")
    search.add_argument("query", nargs="?", default="")
    search.add_argument("--limit", type=int, default=5)
    forget = sub.add_parser("forget", help="find memories, preview them, choose, confirm and delete")
    forget.add_argument("query", nargs="?", default="")
    memory_args.add_script_flags(search, forget)
    memory_args.add_parsers(sub)
    sub.add_parser(
        "setup", help="configure the MemoryCore backend interactively (endpoint, keys, team, agent)"
    )
    redact = sub.add_parser("redact", help="apply the current redaction rules to what is already stored")
    redact.add_argument(
        "--rescan",
        action="store_true",
        help="re-scan the store, the outbox, the notes and the profile now, and report what changed",
    )
    outbox = sub.add_parser("outbox", help="the capture outbox: status, list, flush, requeue, purge")
    outbox.add_argument(
        "action",
        nargs="*",
        default=["status"],
        help="status | list [state] | flush | requeue <id|all> | purge <id|all>",
    )
    ui = sub.add_parser("ui", help="open the memory inspector: see, search, correct and forget in a browser")
    ui.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: any free port)")
    ui.add_argument("--no-open", action="store_true", help="print the address only, do not open a browser")
    ui.add_argument("--idle-minutes", type=float, default=30.0, help="stop when unused (default 30)")
    outbox.add_argument("--id", action="append", default=[], help="purge/requeue: exactly this record")
    outbox.add_argument("--yes", action="store_true", help="purge: do not ask")
    learning = sub.add_parser(
        "consolidate", help="learn memories from captured turns now (needs learning.endpoint)"
    )
    learning.add_argument("--max-jobs", type=int, default=50)
    undo = sub.add_parser("undo", help="undo a consolidation job as a whole (default: the last one)")
    undo.add_argument("job", nargs="?", default="", help="a job id (or part of it), or 'list'")
    review = sub.add_parser(
        "proposals", help="review what learning would change in memories you saved by hand"
    )
    review.add_argument("action", nargs="*", default=[], help="list | accept N | dismiss N")
    review.add_argument("--json", action="store_true", help="list: print JSON")
    review.add_argument("--yes", action="store_true", help="accept/dismiss: do not ask")
    return parser, sub.choices


EXIT_INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for Ctrl-C
EXIT_NO_INPUT = 1


def _interrupt(_signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    """Run one command; Ctrl-C and a closed stdin end it with one line, never a traceback."""
    # asyncio.run() replaces Python's default SIGINT handler with one that only cancels its task,
    # which a prompt blocked in input() never notices; a handler of our own is left in place.
    signal.signal(signal.SIGINT, _interrupt)
    try:
        return _run(argv)
    except KeyboardInterrupt:
        print("pi-memory-bridge: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except EOFError:
        print("pi-memory-bridge: stdin closed before an answer was given; stopped", file=sys.stderr)
        return EXIT_NO_INPUT


def _run(argv: list[str] | None) -> int:
    # pydantic looks for plugins through importlib.metadata on first use, which costs ~100 ms of
    # start-up; this sidecar uses none.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    if (sys.argv[1:] if argv is None else argv) == ["serve"]:
        return _serve()
    # numpy (embedding model, vectors) reads its thread counts once, at its first import
    from pi_memory_bridge.embeddings.threads import pin_environment

    pin_environment()
    from pi_memory_bridge.cli import memory_args

    parser, commands = _parser()
    args, extra = parser.parse_known_args(argv)
    own = commands.get(args.command or "")
    if extra:
        # argparse reports a subcommand's unknown flag with the usage of all subcommands
        (own or parser).error(f"unrecognized arguments: {' '.join(extra)}")
    if args.version:
        from pi_memory_bridge._version import PROTOCOL_VERSION, __version__

        print(f"pi-memory-bridge {__version__} (protocol {PROTOCOL_VERSION})")
        return 0
    if args.command == "serve":
        import gc

        # start-up allocates a lot and frees little: no collections until the engine runs (serve)
        gc.disable()
        if args.stop:
            from pi_memory_bridge.sidecar.daemon import stop_all
            from pi_memory_bridge.ui import registry

            sidecars, inspectors = len(stop_all(os.environ)), len(registry.stop_all(os.environ))
            print(
                f"stopped {sidecars} background {'sidecar' if sidecars == 1 else 'sidecars'} "
                f"and {inspectors} memory {'inspector' if inspectors == 1 else 'inspectors'}"
            )
            return 0
        return _serve()
    if args.command == "doctor":
        from pathlib import Path

        from pi_memory_bridge.cli.doctor import render, run_checks

        checks = run_checks(os.environ, Path.cwd())
        print(render(checks))
        return 0 if all(c.ok or c.warning for c in checks) else 1
    if args.command in memory_args.OWN:
        from pi_memory_bridge.cli import memory_cmds

        return memory_cmds.dispatch(args)
    if args.command == "search":
        from pi_memory_bridge.cli import memory_cmds

        return memory_cmds.search(args.query, args.limit, args.json)
    if args.command == "forget" and (args.id or args.yes):
        from pi_memory_bridge.cli import memory_cmds

        return memory_cmds.forget_scripted(args.query, args.id, args.yes)
    if args.command == "forget":
        if not args.query.strip():
            (own or parser).error(
                "give the words to look for, e.g. pi-memory-bridge forget 'staging cluster'"
            )
        from pi_memory_bridge.cli.terminal import forget

        return forget(args.query)
    if args.command == "setup":
        from pi_memory_bridge.cli.terminal import setup

        return setup()
    if args.command == "redact":
        from pi_memory_bridge.cli.terminal import redact_rescan

        if not args.rescan:
            (own or parser).error("say --rescan to apply the current rules to what is stored")
        return redact_rescan()
    if args.command in ("consolidate", "undo"):
        from pi_memory_bridge.cli import learning_cmds as learning_cli

        return (
            learning_cli.consolidate(args.max_jobs)
            if args.command == "consolidate"
            else learning_cli.undo(args.job)
        )
    if args.command == "proposals":
        from pi_memory_bridge.cli.review_cmds import proposals

        return proposals(args.action, as_json=args.json, yes=args.yes)
    if args.command == "outbox":
        from pi_memory_bridge.cli.terminal import outbox

        action = " ".join([*args.action, *args.id]) if args.id else " ".join(args.action)
        if args.yes:
            return outbox(action, ask=lambda _q: "y")
        return outbox(action)
    if args.command == "ui":
        from pi_memory_bridge.ui.server import run as run_ui

        return run_ui(port=args.port, open_browser=not args.no_open, idle_minutes=args.idle_minutes)
    parser.print_help(sys.stderr)
    return 2


def _serve() -> int:
    """The sidecar: the first line (`initialize`) may be answered before the heavy imports
    (sidecar.quick_start), on stdin/stdout or, when the shim asks for the shared background
    sidecar, on its socket (sidecar.daemon_start)."""
    import gc

    # start-up allocates a lot and frees little: no collections until the engine runs (serve)
    gc.disable()
    if os.environ.get("PI_MEMORY_BRIDGE_SOCKET"):
        from pi_memory_bridge.sidecar.daemon_start import serve

        return serve(os.environ)
    from pi_memory_bridge.sidecar.quick_start import (
        EARLY_MODULE,
        BackgroundImports,
        answer_first,
        start_model_early,
    )

    imports = BackgroundImports(
        EARLY_MODULE, "pi_memory_bridge.sidecar.serve", "pi_memory_bridge.engine.core"
    )
    prelude = answer_first(os.environ, on_idle=imports.start)
    start_model_early(prelude, imports)
    imports.wait()
    from pi_memory_bridge.embeddings.threads import pin_environment

    pin_environment()  # before numpy's first import (done already when the imports ran above)
    from pi_memory_bridge.sidecar.serve import run

    return run(prelude)
