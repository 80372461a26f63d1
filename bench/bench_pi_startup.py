"""What memory costs a `pi -p` run, side by side with Pi alone, on both Pi versions.

    .venv/bin/python bench/bench_pi_startup.py [--runs 15] [--only print,spawn,rpc] [--baseline-src DIR]
        [--no-hung]

`--baseline-src DIR` (e.g. `git archive <commit> | tar -x -C /tmp/base`, then compileall its src)
runs every sidecar case a second time with `PYTHONPATH=DIR` (that tree's sidecar, this tree's
venv and shim), interleaved in the same rounds, so before and after are measured side by side
under the same load.

Run with bytecode as a user's install has it: this environment sets PYTHONDONTWRITEBYTECODE=1 and
the package is an editable install, so nothing would write `.pyc` for our own modules; the bench
compiles them first (compileall, as scripts/setup.sh and `pip install` of the wheel do) and says so.

Sections (each as interleaved runs in one process, the order shuffled per round, median of --runs):

* print: `pi -p` with the extension and the real sidecar vs Pi alone (target <= 1.25x);
  a hung sidecar (`/bin/sleep 600`) and one that answers `initialize` then hangs
  (e2e/fixtures/hang_after_initialize.py), target <= recall deadline + 0.5 s over Pi alone;
  and the first recall of a fresh `pi -p` as Pi waits for it (the shim's PI_MEMORY_BRIDGE_TIMINGS).
* spawn: the sidecar itself, sent `initialize` the moment it is spawned with the params the shim
  sends (agent dir included): spawn -> `initialize` answered (target <= 150 ms with bytecode),
  with bytecode and the handshake answer a previous start stored (every start but the first
  after a config change, `sidecar/quick_start`), with bytecode and no stored answer (the full
  handshake: the first start, or the first after a config change), and without bytecode; then
  `initialize` -> engine ready (a `session/start` answer), spawn -> first recall answered (empty
  store: the recall waits for the model, at most its 0.6 s cut-off), stdin EOF -> process gone
  (what Pi would wait for if it awaited teardown), and the CPU time (user + sys) the process used
  in all (what several sidecars starting at once compete for).
* rpc: `pi --mode rpc` start-up until `get_state` answers, with vs without the extension
  (target: <= 60 ms more; the sidecar starts in the background).

The background sidecar (PI_MEMORY_BRIDGE_DAEMON=1) is measured beside the stdio child in print and
spawn: warm (a daemon from an earlier run is listening) and cold (none running: this run spawns it;
the bench stops it again after the run, outside the measurement), and the hung cases with it on.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "e2e"))
from _stats import summary  # noqa: E402
from bridge import SHIM, SIDECAR, data_dir, sidecar_cmd, use_bridge  # noqa: E402
from harness import REPO_ROOT, FakeModel, PiEnv, PiInstall, ScriptedDialogs, pi_installs  # noqa: E402

PACKAGE = REPO_ROOT / "src" / "pi_memory_bridge"
VENV_PY = REPO_ROOT / ".venv" / "bin" / "python"
HANG_AFTER_INIT = REPO_ROOT / "e2e" / "fixtures" / "hang_after_initialize.py"
RECALL_DEADLINE_MS = 3000  # the default; the hung cases announce (or fall back to) this one
PROMPT = "how do we deploy the billing service to staging?"
RECALL_HOOK = "before_agent_start"  # the shim's timing of the recall Pi waits for
SEED_PROMPTS = (
    "remember: we deploy the billing service to staging with `make deploy-staging`",
    "the billing service's staging database is billing-stg-2",
    "staging deploys need the VPN; production deploys go through the release train",
)


def compile_bytecode() -> str:
    started = time.perf_counter()
    proc = subprocess.run(
        [str(VENV_PY), "-m", "compileall", "-q", str(PACKAGE)], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise SystemExit(f"compileall failed: {proc.stdout}{proc.stderr}")
    pyc = sum(1 for _ in PACKAGE.rglob("__pycache__/*.pyc"))
    return (
        f"bytecode: compiled {PACKAGE.relative_to(REPO_ROOT)} with compileall in "
        f"{(time.perf_counter() - started) * 1000:.0f} ms ({pyc} .pyc; PYTHONDONTWRITEBYTECODE="
        f"{os.environ.get('PYTHONDONTWRITEBYTECODE', '')!r} in this environment, so nothing else writes them)"
    )


# ---- print: whole `pi -p` runs ------------------------------------------------------------------


def daemon_pids(runtime_dir: Path) -> list[int]:
    """The background sidecars serving sockets under `runtime_dir` (each socket's lock names its pid)."""
    pids = []
    for lock in (runtime_dir / f"pi-memory-bridge-{os.getuid()}").glob("*.lock"):
        text = lock.read_text().strip()
        if text and Path(f"/proc/{text}").exists():
            pids.append(int(text))
    return pids


def stop_daemons(runtime_dir: Path, pids: list[int] | None = None) -> None:
    """SIGTERM them and wait until they are gone (outside any measurement)."""
    pids = daemon_pids(runtime_dir) if pids is None else pids
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            continue
    deadline = time.monotonic() + 15
    while any(Path(f"/proc/{pid}").exists() for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.02)


def daemon_env(runtime_dir: Path, **extra: str) -> dict[str, str | None]:
    # idle exit off for the length of the bench (the harness sets a short one for tests)
    idle = {"PI_MEMORY_BRIDGE_DAEMON_IDLE_S": "3600"}
    return {"PI_MEMORY_BRIDGE_DAEMON": "1", "XDG_RUNTIME_DIR": str(runtime_dir), **idle, **extra}


def baseline_env(baseline: Path | None) -> dict[str, str]:
    """The environment that runs the baseline tree's sidecar: its src first on sys.path, and its
    own model cache (another cache format would make each tree discard the other's)."""
    if baseline is None:
        return {}
    mine = os.environ.get("PI_MEMORY_BRIDGE_CACHE_DIR") or str(Path.home() / ".cache" / "pi-memory-bridge")
    return {"PYTHONPATH": str(baseline), "PI_MEMORY_BRIDGE_CACHE_DIR": f"{mine}-baseline"}


def print_cases(
    env: PiEnv, timings: dict[str, Path], runtime: Path, baseline: Path | None
) -> dict[str, Callable[[], float]]:
    hang_cmd = sidecar_cmd(str(VENV_PY), str(HANG_AFTER_INIT), str(RECALL_DEADLINE_MS))
    warm, cold, hung = runtime / "warm", runtime / "cold", runtime / "hung"

    def run(extensions: list[Path], extra: dict[str, str | None]) -> float:
        result = env.run_print([PROMPT], extensions=extensions, env=extra)
        if result.returncode != 0:
            raise SystemExit(f"pi -p failed ({result.returncode}): {result.stderr[-500:]}")
        return result.wall_s * 1000

    def cold_run() -> float:
        stop_daemons(cold)  # none running: this run spawns it
        wall = run([SHIM], daemon_env(cold, PI_MEMORY_BRIDGE_TIMINGS=str(timings["cold"])))
        stop_daemons(cold)  # not left loading its model beside the next case
        return wall

    base_env = baseline_env(baseline)
    baseline_cases: dict[str, Callable[[], float]] = {}
    if baseline is not None:
        base_cold = runtime / "base-cold"

        def base_cold_run() -> float:
            stop_daemons(base_cold)
            extra = daemon_env(base_cold, PI_MEMORY_BRIDGE_TIMINGS=str(timings["baseline cold"]), **base_env)
            wall = run([SHIM], extra)
            stop_daemons(base_cold)
            return wall

        baseline_cases = {
            "baseline: extension": lambda: run(
                [SHIM], {"PI_MEMORY_BRIDGE_TIMINGS": str(timings["baseline stdio"]), **base_env}
            ),
            "baseline: extension, warm daemon": lambda: run(
                [SHIM],
                daemon_env(
                    runtime / "base-warm", PI_MEMORY_BRIDGE_TIMINGS=str(timings["baseline warm"]), **base_env
                ),
            ),
            "baseline: extension, cold daemon": base_cold_run,
        }
    return {
        **baseline_cases,
        "alone": lambda: run([], {}),
        "extension": lambda: run([SHIM], {"PI_MEMORY_BRIDGE_TIMINGS": str(timings["stdio"])}),
        "extension, warm daemon": lambda: run(
            [SHIM], daemon_env(warm, PI_MEMORY_BRIDGE_TIMINGS=str(timings["warm"]))
        ),
        "extension, cold daemon": cold_run,
        "hung: /bin/sleep 600": lambda: run([SHIM], {"PI_MEMORY_BRIDGE_CMD": "/bin/sleep 600"}),
        "hung after initialize": lambda: run([SHIM], {"PI_MEMORY_BRIDGE_CMD": hang_cmd}),
        "hung: /bin/sleep 600, daemon": lambda: run(
            [SHIM], daemon_env(hung, PI_MEMORY_BRIDGE_CMD="/bin/sleep 600")
        ),
        "hung after initialize, daemon": lambda: run([SHIM], daemon_env(hung, PI_MEMORY_BRIDGE_CMD=hang_cmd)),
    }


def bench_print(
    install: PiInstall, runs: int, model_url: str, root: Path, baseline: Path | None, hung: bool = True
) -> None:
    env = PiEnv(install, root / "print", model_url)
    use_bridge(env)
    kinds = ["stdio", "warm", "cold"]
    if baseline is not None:
        kinds += ["baseline stdio", "baseline warm", "baseline cold"]
    timings = {kind: root / f"timings-{kind.replace(' ', '-')}.jsonl" for kind in kinds}
    for path in timings.values():
        path.touch()
    runtime = Path(tempfile.mkdtemp(prefix="pmb-bench-", dir="/tmp"))  # socket paths must be short
    for kind in ("warm", "cold", "hung", "base-warm", "base-cold"):  # each an XDG_RUNTIME_DIR, private
        (runtime / kind).mkdir(mode=0o700)
    try:
        for prompt in SEED_PROMPTS:  # something to recall, and jiti's cache warm
            env.run_print([prompt], extensions=[SHIM])
        env.run_print([PROMPT], extensions=[SHIM], env=daemon_env(runtime / "warm"))  # the warm daemon
        if baseline is not None:
            base_env = baseline_env(baseline)
            env.run_print([PROMPT], extensions=[SHIM], env=base_env)  # its model cache, its answer
            env.run_print([PROMPT], extensions=[SHIM], env=daemon_env(runtime / "base-warm", **base_env))
        warm_daemon = daemon_pids(runtime / "warm")
        cases = print_cases(env, timings, runtime, baseline)
        if not hung:  # --no-hung: only what a working sidecar costs (the hung cases take ~4 s each)
            cases = {name: case for name, case in cases.items() if not name.startswith("hung")}
        walls: dict[str, list[float]] = {name: [] for name in cases}
        order = list(cases)
        rng = random.Random(16)
        for _ in range(runs):
            rng.shuffle(order)
            for name in order:
                walls[name].append(cases[name]())
        first_recall = {
            kind: [
                r["ms"] for r in map(json.loads, path.read_text().splitlines()) if r["hook"] == RECALL_HOOK
            ]
            for kind, path in timings.items()
        }
        warm_served = daemon_pids(runtime / "warm")
        stored = _stored_count(env)
    finally:
        for kind in ("warm", "cold", "base-warm", "base-cold"):
            stop_daemons(runtime / kind)
        # the hung fixtures write no lock: they are this env's leftovers, killed with it
        env.close()
        shutil.rmtree(runtime, ignore_errors=True)
    base = statistics.median(walls["alone"])
    print(f"pi {install.version}: pi -p {PROMPT!r}, {runs} rounds, order shuffled per round")
    for name, values in walls.items():
        print(summary(f"  {name}", values))
    for name in [n for n in walls if n.startswith(("extension", "baseline"))]:
        ext = statistics.median(walls[name])
        print(f"  {name} / alone (medians): {ext / base:.2f}x, +{ext - base:.0f} ms  [target: <= 1.25x]")
    bound = RECALL_DEADLINE_MS + 500
    for name in [n for n in walls if n.startswith("hung")]:
        over = statistics.median(walls[name]) - base
        print(f"  {name}: +{over:.0f} ms over alone  [target: <= {bound} ms]")
    labels = {"stdio": "stdio child", "warm": "warm daemon", "cold": "cold daemon"}
    for kind in kinds:
        label = kind.replace(kind.split()[-1], labels[kind.split()[-1]])
        print(summary(f"  first recall in a fresh pi -p (Pi waits), {label}", first_recall[kind]))
    one = warm_served == warm_daemon and len(warm_served) == 1
    print(f"  warm daemon: the same one served every run: {one} ({warm_served})")
    print(f"  turns in the store after the run: {stored}")


def _stored_count(env: PiEnv) -> int:
    import sqlite3

    db = data_dir(env) / "memory.sqlite3"
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        tables = [n for (n,) in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        table = next(t for t in tables if t.lower() in ("turns", "l0_turns", "conversation_turns"))
        return int(con.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
    finally:
        con.close()


# ---- spawn: the sidecar alone -------------------------------------------------------------------


def _request(id_: int, method: str, params: dict[str, object]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": id_, "method": method, "params": params}).encode() + b"\n"


def _read_answer(proc: subprocess.Popen[bytes], id_: int) -> bytes:
    assert proc.stdout is not None
    while True:
        line = proc.stdout.readline()
        if not line:
            raise SystemExit(f"the sidecar exited before answering request {id_}")
        if f'"id":{id_}'.encode() in line:
            return line


def init_params(env: dict[str, str], cwd: str) -> dict[str, object]:
    """What the shim sends (bridge.ts initParams)."""
    return {
        "protocolVersion": "1.0",
        "client": {"name": "bench", "version": "0"},
        "cwd": cwd,
        "agentDir": env["PI_CODING_AGENT_DIR"],
        "projectTrusted": False,
        "hasUi": False,
    }


def forget_answers(env: dict[str, str]) -> None:
    """No stored handshake answer: the next start does the full handshake (sidecar/quick_start)."""
    (Path(env["PI_CODING_AGENT_DIR"]) / "memory-bridge" / "handshake-answers.json").unlink(missing_ok=True)


def spawn_once(env: dict[str, str], cwd: str) -> tuple[float, float, float, float, float]:
    """(spawn -> initialize, initialize -> engine ready, spawn -> first recall answered,
    stdin EOF -> exit, CPU user+sys) in ms."""
    started = time.perf_counter()
    proc = subprocess.Popen([str(SIDECAR), "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    assert proc.stdin is not None
    proc.stdin.write(_request(1, "initialize", init_params(env, cwd)))
    proc.stdin.flush()
    assert b'"result"' in _read_answer(proc, 1)
    initialized = time.perf_counter()
    proc.stdin.write(_request(2, "session/start", {"piSessionId": "bench", "entries": []}))
    proc.stdin.flush()
    assert b'"result"' in _read_answer(proc, 2)
    engine = time.perf_counter()
    proc.stdin.write(_request(3, "recall", {"piSessionId": "bench", "prompt": PROMPT}))
    proc.stdin.flush()
    assert b'"result"' in _read_answer(proc, 3)
    recalled = time.perf_counter()
    proc.stdin.close()
    _, _, usage = os.wait4(proc.pid, 0)
    proc.returncode = 0  # reaped above
    gone = time.perf_counter()
    cpu = (usage.ru_utime + usage.ru_stime) * 1000
    return (
        (initialized - started) * 1000,
        (engine - initialized) * 1000,
        (recalled - started) * 1000,
        (gone - recalled) * 1000,
        cpu,
    )


def _socket_answer(conn: socket.socket, buf: bytearray, id_: int) -> bytes:
    while True:
        while b"\n" not in buf:
            chunk = conn.recv(65536)
            if not chunk:
                raise SystemExit(f"the background sidecar closed before answering request {id_}")
            buf += chunk
        i = buf.index(b"\n")
        line = bytes(buf[:i])
        del buf[: i + 1]
        if f'"id":{id_}'.encode() in line:
            return line


def daemon_once(env: dict[str, str], cwd: str, sock: Path, cold: bool) -> tuple[float, float]:
    """(spawn or connect -> initialize, initialize -> engine ready) in ms, over the daemon's socket.

    Cold: no daemon runs; spawn it, connect once it listens (polling, as the shim does). Warm: connect."""
    started = time.perf_counter()
    daemon = None
    if cold:
        daemon_env_ = {**env, "PI_MEMORY_BRIDGE_SOCKET": str(sock)}
        daemon = subprocess.Popen([str(SIDECAR), "serve"], env=daemon_env_, stdin=subprocess.DEVNULL)
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    while True:
        try:
            conn.connect(str(sock))
            break
        except OSError:
            conn.close()
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            time.sleep(0.015)
    buf = bytearray()
    conn.sendall(_request(1, "initialize", init_params(env, cwd)))
    assert b'"result"' in _socket_answer(conn, buf, 1)
    initialized = time.perf_counter()
    conn.sendall(_request(2, "session/start", {"piSessionId": "bench", "entries": []}))
    assert b'"result"' in _socket_answer(conn, buf, 2)
    engine = time.perf_counter()
    conn.close()
    if daemon is not None:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait()
    return (initialized - started) * 1000, (engine - initialized) * 1000


def bench_spawn(runs: int, root: Path, baseline: Path | None) -> None:
    empty_cache = root / "no-pycache"
    empty_cache.mkdir(parents=True)
    trees = {"": {}} if baseline is None else {"": {}, "baseline ": baseline_env(baseline)}
    variants: dict[str, tuple[dict[str, str], bool]] = {}
    for label, extra in trees.items():
        # each tree its own agent dir: its own store and its own stored handshake answer
        home = root / (label.strip() or "this")
        base = {**os.environ, "PI_CODING_AGENT_DIR": str(home / "agent"), "HOME": str(home), **extra}
        # an empty PYTHONPYCACHEPREFIX hides every .pyc, and PYTHONDONTWRITEBYTECODE keeps it empty
        nopyc = {**base, "PYTHONPYCACHEPREFIX": str(empty_cache), "PYTHONDONTWRITEBYTECODE": "1"}
        variants[f"{label}.pyc, stored answer"] = (base, False)
        variants[f"{label}.pyc, no stored answer"] = (base, True)
        variants[f"{label}no .pyc"] = (nopyc, False)
        home.mkdir()
        for _ in range(2):  # the store and the outbox exist from now on, as for a user; the answer too
            spawn_once(base, str(home))
    figures: dict[str, list[tuple[float, float, float, float, float]]] = {name: [] for name in variants}
    order = list(variants)
    rng = random.Random(5)
    for _ in range(runs):
        rng.shuffle(order)
        for name in order:
            env, forget = variants[name]
            if forget:
                forget_answers(env)
            figures[name].append(spawn_once(env, env["HOME"]))
    print(f"sidecar ({SIDECAR.relative_to(REPO_ROOT)} serve), {runs} spawns each, order shuffled per round")
    if baseline is not None:
        print(f"  'baseline': the sidecar of {baseline} (PYTHONPATH), same venv, same rounds")
    steps = (
        "spawn -> initialize",
        "initialize -> engine",
        "spawn -> first recall",
        "stdin EOF -> exit",
        "CPU, spawn -> exit",
    )
    for col, step in enumerate(steps):
        for name, rows in figures.items():
            goal = "target: p50 <= 150 ms" if col == 0 and "no .pyc" not in name else ""
            print(summary(f"  {step}, {name}", [r[col] for r in rows], goal))
    # the background sidecar, with bytecode: cold (spawned for this connection) and warm (listening)
    runtime = Path(tempfile.mkdtemp(prefix="pmb-bench-", dir="/tmp"))
    pairs: dict[str, list[tuple[float, float]]] = {}
    daemons: list[subprocess.Popen[bytes]] = []
    try:
        cases: list[tuple[str, dict[str, str], Path, bool]] = []
        for i, (label, extra) in enumerate(trees.items()):
            home = root / (label.strip() or "this")
            base = {**os.environ, "PI_CODING_AGENT_DIR": str(home / "agent"), "HOME": str(home), **extra}
            sock = runtime / f"w{i}.sock"
            warm_env = {**base, "PI_MEMORY_BRIDGE_SOCKET": str(sock)}
            daemons.append(subprocess.Popen([str(SIDECAR), "serve"], env=warm_env, stdin=subprocess.DEVNULL))
            daemon_once(base, str(home), sock, cold=False)  # listening, engine imports done
            cases.append((f"{label}cold", base, runtime / f"c{i}.sock", True))
            cases.append((f"{label}warm", base, sock, False))
        pairs = {name: [] for name, *_ in cases}
        for _ in range(runs):
            random.Random(len(pairs[cases[0][0]])).shuffle(cases)
            for name, env, sock, cold in cases:
                pairs[name].append(daemon_once(env, env["HOME"], sock, cold=cold))
    finally:
        for daemon in daemons:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait()
        shutil.rmtree(runtime, ignore_errors=True)
    print(
        f"background sidecar (PI_MEMORY_BRIDGE_SOCKET), {runs} connections each, interleaved, with .pyc "
        "and the stored handshake answer"
    )
    for name in sorted(pairs):
        kind = "spawn -> listen -> initialize" if "cold" in name else "connect -> initialize"
        print(summary(f"  {kind}, {name}", [r[0] for r in pairs[name]], "target: p50 <= 150 ms"))
    for name in sorted(pairs):
        print(summary(f"  initialize -> engine, {name}", [r[1] for r in pairs[name]]))


# ---- rpc: interactive start-up ------------------------------------------------------------------


def bench_rpc(install: PiInstall, runs: int, model_url: str, root: Path) -> None:
    env = PiEnv(install, root / "rpc", model_url)
    use_bridge(env)

    def startup_ms(with_ext: bool) -> float:
        started = time.perf_counter()
        rpc = env.start_rpc(extensions=[SHIM] if with_ext else [], dialogs=ScriptedDialogs())
        rpc.get_state()
        elapsed = (time.perf_counter() - started) * 1000
        rpc.close()
        return elapsed

    try:
        startup_ms(True)  # warm jiti's cache once
        base: list[float] = []
        ext: list[float] = []
        for _ in range(runs):
            base.append(startup_ms(False))
            ext.append(startup_ms(True))
    finally:
        env.close()
    print(f"pi {install.version}: pi --mode rpc until get_state answers")
    print(summary("  no extension", base))
    print(summary("  with extension", ext))
    overhead = statistics.median(ext) - statistics.median(base)
    print(f"  start-up overhead (median difference): {overhead:.1f} ms  [target: <= 60 ms]")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--only", default="print,spawn,rpc", help="comma-separated sections")
    ap.add_argument("--baseline-src", type=Path, default=None, help="another tree's src/, run side by side")
    ap.add_argument("--no-hung", action="store_true", help="print: leave out the hung-sidecar cases")
    a = ap.parse_args()
    sections = set(a.only.split(","))
    baseline: Path | None = a.baseline_src.resolve() if a.baseline_src else None
    print(compile_bytecode())
    print(f"load average at start: {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores)")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        if "spawn" in sections:
            bench_spawn(a.runs, root / "spawn", baseline)
        for install in pi_installs():
            with FakeModel() as model:
                if "print" in sections:
                    where = root / f"print-{install.version}"
                    bench_print(install, a.runs, model.base_url, where, baseline, not a.no_hung)
                if "rpc" in sections:
                    bench_rpc(install, a.runs, model.base_url, root / f"rpc-{install.version}")
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
