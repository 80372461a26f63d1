"""Pi start-up and `pi -p` wall time with and without the extension, on both Pi versions.

    .venv/bin/python bench/bench_pi_startup.py [--runs 10]

Start-up = spawn `pi --mode rpc` until it answers `get_state` (Pi ready for input). The shim starts
the sidecar in the background, so start-up must not wait for it. Target (issue 2): start-up
overhead from the extension <= 60 ms median. The `pi -p` figure includes a real turn (recall and
capture) and is printed for information.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "e2e"))
from _stats import summary  # noqa: E402
from bridge import SHIM, use_bridge  # noqa: E402
from harness import FakeModel, PiEnv, ScriptedDialogs, pi_installs  # noqa: E402


def startup_ms(env: PiEnv, with_ext: bool) -> float:
    started = time.perf_counter()
    rpc = env.start_rpc(extensions=[SHIM] if with_ext else [], dialogs=ScriptedDialogs())
    rpc.get_state()
    elapsed = (time.perf_counter() - started) * 1000
    rpc.close()
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    a = ap.parse_args()
    for install in pi_installs():
        with tempfile.TemporaryDirectory() as tmp, FakeModel() as model:
            env = PiEnv(install, Path(tmp) / "pi", model.base_url)
            use_bridge(env)
            base: list[float] = []
            ext: list[float] = []
            p_base: list[float] = []
            p_ext: list[float] = []
            startup_ms(env, True)  # warm caches (jiti, the venv's .pyc) once
            for _ in range(a.runs):
                base.append(startup_ms(env, False))
                ext.append(startup_ms(env, True))
                p_base.append(env.run_print(["hello"]).wall_s * 1000)
                p_ext.append(env.run_print(["hello"], extensions=[SHIM]).wall_s * 1000)
            env.close()
        print(f"pi {install.version}")
        print(summary("  start-up, no extension", base))
        print(summary("  start-up, with extension", ext))
        overhead = statistics.median(ext) - statistics.median(base)
        print(f"  start-up overhead (median difference): {overhead:.1f} ms  [target: <= 60 ms]")
        print(summary("  pi -p 'hello', no extension", p_base))
        print(summary("  pi -p 'hello', with extension", p_ext))
        p_overhead = statistics.median(p_ext) - statistics.median(p_base)
        print(f"  pi -p overhead (median difference): {p_overhead:.1f} ms")


if __name__ == "__main__":
    main()
