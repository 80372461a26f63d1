"""The arguments of the memory commands (`memory_cmds`), kept apart so that building the parser
imports nothing heavy: `pi-memory-bridge serve` parses the same command line and must start fast."""

from __future__ import annotations

import argparse
from pathlib import Path

SECTIONS = ("all", "profile", "memories", "conversation", "notes")
OWN = frozenset({"list", "show", "edit", "export", "import", "status", "pause", "resume", "install-sdk"})
DEFAULT_LIMIT = 20
# backends.base.AtomicType's values (a test keeps them equal): the parser must not import pydantic
KINDS = ("fact", "preference", "constraint", "event", "instruction", "decision", "pitfall")


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ls = sub.add_parser("list", help="list what memory holds: profile, memories by kind, conversation, notes")
    ls.add_argument("section", nargs="?", default="all", choices=SECTIONS)
    ls.add_argument("--kind", choices=KINDS, help="only memories of this kind")
    ls.add_argument("--limit", type=int, default=DEFAULT_LIMIT, help="items per section (default 20)")
    ls.add_argument("--json", action="store_true", help="print JSON (shape in README)")
    show = sub.add_parser("show", help="show one item in full (its ref from `list`, e.g. L1:at-…)")
    show.add_argument("ref")
    show.add_argument("--json", action="store_true")
    edit = sub.add_parser("edit", help="correct a memory's text (L1); TEXT, else stdin, else $EDITOR")
    edit.add_argument("ref")
    edit.add_argument("text", nargs="?")
    export = sub.add_parser("export", help="everything memory holds, as Markdown (default) or JSON")
    export.add_argument("--json", action="store_true", help="JSON, the format `import` reads")
    export.add_argument("-o", "--output", type=Path, help="write to this file (0600) instead of stdout")
    imp = sub.add_parser(
        "import",
        help="without FILE: capture Pi sessions from before memory ran (preview, confirm); "
        "with FILE.json: import a file written by `export --json` (asks first)",
    )
    imp.add_argument("file", type=Path, nargs="?", help="FILE.json from `pi-memory-bridge export --json`")
    imp.add_argument("--since", metavar="DATE", help="sessions: only turns since DATE (YYYY-MM-DD[THH:MM])")
    imp.add_argument("--session", metavar="FILE", help="sessions: only this Pi session file")
    imp.add_argument("--yes", action="store_true", help="do not ask (for scripts)")
    status = sub.add_parser("status", help="what memory is doing: backend, counts, outbox, problems")
    status.add_argument("--json", action="store_true")
    for name, doing in (("pause", "pause memory for"), ("resume", "turn memory back on for")):
        cmd = sub.add_parser(name, help=f"{doing} a project (default: the one here)")
        cmd.add_argument("path", nargs="?", type=Path, default=None)
    sdk = sub.add_parser("install-sdk", help="install the MemoryCore SDK (pinned; it is not on PyPI)")
    sdk.add_argument("--print", action="store_true", help="only print the command")
    sdk.add_argument("--yes", action="store_true", help="run it without asking")


def add_script_flags(search: argparse.ArgumentParser, forget: argparse.ArgumentParser) -> None:
    """`--json` for search (whose query may be empty: the most recent items); `--yes`/`--id` for forget."""
    search.add_argument("--json", action="store_true")
    forget.add_argument("--id", action="append", default=[], help="forget exactly this item (repeatable)")
    forget.add_argument("--yes", action="store_true", help="do not ask")
