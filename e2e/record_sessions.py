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
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness import (
    FIXTURES_DIR,
    REPO_ROOT,
    ErrorReply,
    FakeModel,
    PiEnv,
    PiInstall,
    PiRpcSession,
    TextReply,
    ToolCall,
    ToolCallsReply,
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


def record_scenarios(install: PiInstall, out: Path) -> None:
    """One session with the turn shapes capture must handle: a tool round trip, an auto-retry after
    an HTTP 500, a follow-up queued during a run, a steer during a tool call, an abort."""
    with tempfile.TemporaryDirectory(prefix="pi-record-") as tmp, FakeModel() as model:
        env = PiEnv(install, Path(tmp), model.base_url)
        try:
            rpc = env.start_rpc()
            rec = Recorder(rpc)
            rpc.prompt_and_settle("P1 a plain turn")
            rpc.prompt_and_settle('P2 CALL_TOOL bash {"command": "echo tool-ok"}')
            model.script(ToolCallsReply((ToolCall("bash", {"command": "echo first try"}),)), ErrorReply(500))
            rpc.prompt_and_settle("P3 a tool call, then the server fails once")
            model.script(TextReply("slow first answer", delay_s=1.5), TextReply("answer to the follow-up"))
            mark = rpc.mark()
            rpc.send({"type": "prompt", "message": "P4 first question, slowly answered"})
            rpc.wait_for_type("agent_start", timeout=20, since=mark)
            time.sleep(0.3)
            rpc.request_ok({"type": "follow_up", "message": "P5 and a follow-up"})
            rpc.wait_for_type("agent_settled", timeout=40, since=mark)
            model.script(
                ToolCallsReply((ToolCall("bash", {"command": "sleep 1; echo steered"}),), delay_s=0.5),
                TextReply("steered answer"),
            )
            mark = rpc.mark()
            rpc.send({"type": "prompt", "message": "P6 run a slow tool"})
            rpc.wait_for_type("tool_execution_start", timeout=20, since=mark)
            rpc.request_ok({"type": "steer", "message": "P7 steer this way"})
            rpc.wait_for_type("agent_settled", timeout=40, since=mark)
            model.script(TextReply("this answer is cut off " * 40, delay_s=2.0))
            mark = rpc.mark()
            rpc.send({"type": "prompt", "message": "P8 a prompt the user aborts"})
            rpc.wait_for_type("agent_start", timeout=20, since=mark)
            time.sleep(0.5)
            rpc.request_ok({"type": "abort"})
            rpc.wait_for_type("agent_settled", timeout=40, since=mark)
            rpc.prompt_and_settle("P9 the last plain turn")
            shutil.copyfile(rec.session_file(), out / f"scenarios-{install.version}.jsonl")
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
        record_scenarios(install, args.out)
        print(f"recorded Pi {install.version} into {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
