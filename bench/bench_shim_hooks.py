"""How long real Pi waits on the shim's hooks, per turn, on both Pi versions.

    .venv/bin/python bench/bench_shim_hooks.py [--turns 80]

`before_agent_start` is recall as Pi sees it (sidecar spawn excluded after the first turn);
`agent_settled` is the capture hand-off, which must not make Pi wait (target: p99 <= 50 ms).
The shim records the timings itself when PI_MEMORY_BRIDGE_TIMINGS names a file.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "e2e"))
from _stats import summary  # noqa: E402
from bridge import SHIM, use_bridge  # noqa: E402
from harness import FakeModel, PiEnv, ScriptedDialogs, pi_installs  # noqa: E402

TOPICS = [
    "the deploy pipeline",
    "our Go error style",
    "缓存失效策略",
    "flaky integration tests",
    "数据库迁移",
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=80)
    a = ap.parse_args()
    for install in pi_installs():
        with tempfile.TemporaryDirectory() as tmp, FakeModel() as model:
            env = PiEnv(install, Path(tmp) / "pi", model.base_url)
            use_bridge(env)
            timings = Path(tmp) / "timings.jsonl"
            env.extra_env["PI_MEMORY_BRIDGE_TIMINGS"] = str(timings)
            rpc = env.start_rpc(extensions=[SHIM], dialogs=ScriptedDialogs())
            for i in range(a.turns):
                rpc.prompt_and_settle(f"question {i} about {TOPICS[i % len(TOPICS)]}, with some detail")
            rpc.close()
            env.close()
            rows = [json.loads(line) for line in timings.read_text().splitlines()]
        recall = [r["ms"] for r in rows if r["hook"] == "before_agent_start"][1:]  # first includes spawn
        settled = [r["ms"] for r in rows if r["hook"] == "agent_settled"]
        first = next(r["ms"] for r in rows if r["hook"] == "before_agent_start")
        print(f"pi {install.version}")
        print(f"  first before_agent_start (sidecar spawn + handshake + recall): {first:.1f} ms")
        print(summary("  before_agent_start (recall), later turns", recall))
        print(summary("  agent_settled (capture hand-off)", settled, "target: p99 <= 50 ms"))


if __name__ == "__main__":
    main()
