"""Peak memory of reading one large Pi session file, as catch-up and import do (issue 26 item 5).

Run: .venv/bin/python bench/bench_session_memory.py [--mb 200] [--baseline-src DIR]

Writes a session file of about `--mb` MB (about five hundred turns, each a prompt, a tool call, a
tool result of ~400 KB, as build logs are, and a final answer) to a temporary directory, then reads
it in a fresh child process with `scan_file` (the whole file, no watermark: what an import does)
and prints the child's peak RSS, the time it took and how many turns it found. With
`--baseline-src` (e.g. a `git archive` of main's `src/`), the same file is read by that tree too,
side by side. The file is deleted at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"

_CHILD = """
import json, resource, sys, time
from pathlib import Path
from pi_memory_bridge.catchup.files import scan_file
started = time.perf_counter()
scan = scan_file(Path(sys.argv[1]), None, since_ms=None)
seconds = time.perf_counter() - started
peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"peak_mb": peak_kb / 1024, "seconds": seconds, "captured": len(scan.captured),
                  "unreadable": scan.unreadable}))
"""

_BASE_MS = 1_700_000_000_000


def _iso(ms: int) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def write_session(path: Path, megabytes: int) -> int:
    """A session file of about `megabytes` MB; returns its turns."""
    target = megabytes * 1_000_000
    clock = _BASE_MS
    entry = 0
    parent: str | None = None
    turns = 0
    log_line = "".join(f"[{n:05d}] compiling module_{n % 97}.c ... ok\n" for n in range(10_000))  # ~400 KB
    with path.open("w", encoding="utf-8") as out:
        out.write(json.dumps({"type": "session", "version": 3, "id": "bench", "timestamp": _iso(clock),
                              "cwd": "/work"}) + "\n")  # fmt: skip

        def append(message: dict[str, object]) -> None:
            nonlocal clock, entry, parent
            clock += 10
            entry += 1
            entry_id = f"{entry:08x}"
            line = {"type": "message", "id": entry_id, "parentId": parent, "timestamp": _iso(clock),
                    "message": {**message, "timestamp": clock}}  # fmt: skip
            out.write(json.dumps(line) + "\n")
            parent = entry_id

        while out.tell() < target:
            turns += 1
            call = f"call_{turns}"
            append({"role": "user", "content": [{"type": "text", "text": f"build step {turns}, please"}]})
            append({"role": "assistant", "stopReason": "toolUse",
                    "content": [{"type": "toolCall", "id": call, "name": "bash",
                                 "arguments": {"command": f"make step{turns}"}}]})  # fmt: skip
            append({"role": "toolResult", "toolCallId": call, "toolName": "bash", "isError": False,
                    "content": [{"type": "text", "text": log_line}]})  # fmt: skip
            append({"role": "assistant", "stopReason": "stop",
                    "content": [{"type": "text", "text": f"step {turns} built"}]})  # fmt: skip
    return turns


def measure(src: Path, session: Path) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(session)], env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else done.returncode}
    result: dict[str, object] = json.loads(done.stdout)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mb", type=int, default=200, help="size of the session file (default 200 MB)")
    parser.add_argument("--baseline-src", type=Path, help="another tree's src/ to read the same file with")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-session-") as tmp:
        session = Path(tmp) / "big.jsonl"
        turns = write_session(session, args.mb)
        size_mb = session.stat().st_size / 1_000_000
        print(f"session file: {size_mb:.0f} MB, {turns} turns (each with a ~400 KB tool result)")
        trees = [("this tree", SRC)]
        if args.baseline_src is not None:
            trees.insert(0, ("baseline", args.baseline_src))
        for label, src in trees:
            result = measure(src, session)
            if "error" in result:
                print(f"{label:<10} failed: {result['error']}")
                continue
            print(
                f"{label:<10} peak RSS {result['peak_mb']:7.0f} MB   {result['seconds']:6.1f} s   "
                f"{result['captured']} turns captured   unreadable: {result['unreadable']}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
