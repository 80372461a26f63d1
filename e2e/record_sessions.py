"""Record real Pi session files for tests/test_identity_sessions.py (a tool, not a test).

    .venv/bin/python e2e/record_sessions.py [--out tests/data/pi_sessions]

For every installed Pi version it drives `pi --mode rpc` against the fake model through one
scripted tree of branches (see tests/data/pi_sessions/README.md) and copies the session files.
User prompts carry markers ("M1", "S2", ...) that the tests look up.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness import (
    FIXTURES_DIR,
    REPO_ROOT,
    FakeModel,
    PiEnv,
    PiInstall,
    PiRpcSession,
    pi_installs,
    read_jsonl,
)

NAV_EXT = FIXTURES_DIR / "nav-ext"
Entry = dict[str, Any]


def _text(entry: Entry) -> str:
    content = entry.get("message", {}).get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content if isinstance(b, dict))
    return ""


class Recorder:
    def __init__(self, rpc: PiRpcSession) -> None:
        self.rpc = rpc

    def session_file(self) -> Path:
        return Path(self.rpc.get_state()["sessionFile"])

    def entries(self) -> list[Entry]:
        return read_jsonl(self.session_file())[1:]

    def _newest(self, pred: Callable[[Entry], bool]) -> str:
        found = [e for e in self.entries() if pred(e)]
        if not found:
            raise LookupError("no such entry")
        return str(found[-1]["id"])

    def user(self, marker: str) -> str:
        return self._newest(
            lambda e: (
                e.get("type") == "message"
                and e["message"].get("role") == "user"
                and _text(e).startswith(marker + " ")
            )
        )

    def reply_to(self, marker: str) -> str:
        """The assistant entry that answered the user message `marker`."""
        user_id = self.user(marker)
        return self._newest(
            lambda e: (
                e.get("type") == "message"
                and e["message"].get("role") == "assistant"
                and e.get("parentId") == user_id
            )
        )

    def say(self, marker: str) -> None:
        self.rpc.prompt_and_settle(f"{marker} turn {marker.lower()}")

    def nav(self, target: str, *flags: str) -> None:
        before = len(self.entries())
        self.rpc.prompt_and_settle(" ".join(["/e2e-nav", target, *flags]))
        if "nolabel" not in flags and len(self.entries()) == before:
            raise RuntimeError(f"navigation to {target} wrote nothing")

    def compact(self) -> None:
        self.rpc.request_ok({"type": "compact"}, timeout=60)


def record_tree(rec: Recorder) -> None:
    """Main line, a side branch, returns both ways, compaction, branch summaries, label pile-up."""
    for m in ("M1", "M2", "M3"):
        rec.say(m)
    rec.nav(rec.user("M2"))  # /tree onto M2: the leaf becomes M1's reply, a label is appended
    rec.say("S1")
    rec.say("S2")
    rec.nav(rec.reply_to("M3"))  # back to the main line's end
    rec.say("M4")
    rec.nav(rec.reply_to("S2"))  # back to the side branch's end
    rec.say("S3")
    rec.compact()  # a compaction entry on the side branch
    rec.say("S4")
    rec.nav(rec.reply_to("M4"), "summarize")  # back to main, summarising the side branch
    rec.say("M5")
    rec.nav(rec.reply_to("M1"), "summarize")  # a new branch that starts with a branch summary
    rec.say("T1")
    # Returning to the same leaves twice without prompting in between leaves two labels each.
    rec.nav(rec.reply_to("M5"))
    rec.nav(rec.reply_to("T1"))
    rec.nav(rec.reply_to("M5"))
    rec.nav(rec.reply_to("T1"))
    rec.say("T2")
    rec.nav(rec.reply_to("M5"))
    rec.say("M6")
    rec.nav(rec.reply_to("M6"), "nolabel")  # a move that writes nothing
    rec.say("M7")
    rec.nav(rec.reply_to("S1"))  # a branch off the side branch
    rec.say("N1")
    rec.nav(rec.reply_to("S4"))  # and back to the side branch's end, after its compaction
    rec.say("S5")


def record_version(install: PiInstall, out: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="pi-record-") as tmp, FakeModel() as model:
        # Keep almost nothing verbatim, so a manual compaction has something to summarise.
        settings = {"compaction": {"enabled": False, "keepRecentTokens": 1}}
        env = PiEnv(install, Path(tmp), model.base_url, settings=settings)
        try:
            rpc = env.start_rpc(extensions=[NAV_EXT])
            rec = Recorder(rpc)
            record_tree(rec)
            tree_file = rec.session_file()
            shutil.copyfile(tree_file, out / f"tree-{install.version}.jsonl")

            # /fork before M3's user message, then /clone of the fork: new files with parentSession
            rpc.request_ok({"type": "fork", "entryId": rec.user("M3")})
            rec.say("F1")
            shutil.copyfile(rec.session_file(), out / f"fork-{install.version}.jsonl")
            rpc.request_ok({"type": "clone"})
            rec.say("C1")
            shutil.copyfile(rec.session_file(), out / f"clone-{install.version}.jsonl")
            assert rpc.close() == 0
        finally:
            env.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "tests" / "data" / "pi_sessions")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for install in pi_installs():
        record_version(install, args.out)
        print(f"recorded Pi {install.version} into {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
