"""memory_search through MCP beside the same search in-process, at 100k turns; the server's start.

    .venv/bin/python bench/bench_mcp.py [--turns 100000] [--atomic 5000] [--queries 200]
        [--rounds 3] [--starts 5] [--store DIR]

The store is bench_warm_recall's (synthetic turns and memories, vectors in place), built once into
--store/memory-bridge (kept for the next run) or a temporary directory. Each round, interleaved:
  in-process  `McpMemory.search` (what the tool runs: recall's layer fetchers, dedupe, dates) in a
              fresh process, warm (model loaded, 20 searches not counted);
  over MCP    the SDK's own client calling `memory_search` on `pi-memory-bridge mcp` over stdio
              (JSON-RPC framing, pydantic both ways, the pipe), warm the same way.
Then the server's start: spawn to `initialize` answered, to `tools/list`, and to the first search
answered on the large store (cold: the store opened, the model loaded by that first search); and
what importing the SDK costs a process (`import mcp.server.lowlevel` beside `import pydantic`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
PYTHON = str(REPO / ".venv" / "bin" / "python")
SERVER = str(REPO / ".venv" / "bin" / "pi-memory-bridge")
WARM = 20
WARM_S = 8.0


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def _env(agent_dir: Path) -> dict[str, str]:
    return {**os.environ, "PI_CODING_AGENT_DIR": str(agent_dir), "PYDANTIC_DISABLE_PLUGINS": "__all__"}


def in_process(agent_dir: Path, queries: list[str]) -> None:
    from pi_memory_bridge.config import load_config
    from pi_memory_bridge.mcp_server.service import McpMemory
    from pi_memory_bridge.mcp_server.tools import SearchArgs

    async def run() -> list[float]:
        loaded = load_config(agent_dir=agent_dir, cwd=Path.cwd(), project_trusted=False, env=os.environ)
        memory = McpMemory(loaded, agent_dir, agent="bench", project_dir=Path.cwd())
        await _warm_model(memory)
        for q in queries[:WARM]:
            await memory.search(SearchArgs(query=q))
        wall = []
        for q in queries:
            started = time.perf_counter()
            await memory.search(SearchArgs(query=q))
            wall.append((time.perf_counter() - started) * 1000)
        await memory.close()
        return wall

    print(json.dumps({"wall": asyncio.run(run())}))


async def _warm_model(memory: object) -> None:
    from pi_memory_bridge.mcp_server.service import McpMemory

    assert isinstance(memory, McpMemory)
    semantic = getattr(await memory.backend(), "semantic", None)
    if semantic is not None:
        await asyncio.to_thread(semantic.handle.wait, 600)


async def _session(agent_dir: Path):  # type: ignore[no-untyped-def]
    from mcp import StdioServerParameters

    return StdioServerParameters(command=SERVER, args=["mcp", "--agent", "bench"], env=_env(agent_dir))


def over_mcp(agent_dir: Path, queries: list[str]) -> None:
    from mcp import ClientSession, stdio_client

    async def run() -> list[float]:
        params = await _session(agent_dir)
        async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            # the server loads the model in the background: warm until that is surely done
            warm_until = time.monotonic() + WARM_S
            i = 0
            while i < WARM or time.monotonic() < warm_until:
                await s.call_tool("memory_search", {"query": queries[i % len(queries)]})
                i += 1
            wall = []
            for q in queries:
                started = time.perf_counter()
                result = await s.call_tool("memory_search", {"query": q})
                wall.append((time.perf_counter() - started) * 1000)
                assert not result.is_error, result
            return wall

    print(json.dumps({"wall": asyncio.run(run())}))


def starts(agent_dir: Path, query: str) -> None:
    from mcp import ClientSession, stdio_client

    async def run() -> dict[str, float]:
        params = await _session(agent_dir)
        t0 = time.perf_counter()
        async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            t_init = time.perf_counter()
            await s.list_tools()
            t_list = time.perf_counter()
            await s.call_tool("memory_search", {"query": query})
            t_search = time.perf_counter()
        return {
            "initialize": (t_init - t0) * 1000,
            "tools/list": (t_list - t0) * 1000,
            "first search": (t_search - t0) * 1000,
        }

    print(json.dumps(asyncio.run(run())))


def _child(mode: str, agent_dir: Path, n: int) -> dict[str, list[float]] | dict[str, float]:
    out = subprocess.run(
        [PYTHON, __file__, "--child", mode, "--store", str(agent_dir), "--queries", str(n)],
        stdout=subprocess.PIPE,
        text=True,
        check=True,
        env=_env(agent_dir),
    )
    data: dict[str, list[float]] | dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return data


def _import_ms(statement: str, repeat: int = 5) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run(
            [PYTHON, "-c", statement], check=True, env={**os.environ, "PYDANTIC_DISABLE_PLUGINS": "__all__"}
        )
        best = min(best, (time.perf_counter() - started) * 1000)
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=100_000)
    ap.add_argument("--atomic", type=int, default=5_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--starts", type=int, default=5)
    ap.add_argument("--store", type=Path, help="an agent dir: its memory-bridge/ is built once and kept")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    sys.path.insert(0, str(HERE))
    from bench_warm_recall import BUILT, _queries, build

    if a.child:
        queries = _queries(a.queries)
        {"in": in_process, "mcp": over_mcp}.get(a.child, lambda d, q: starts(d, q[0]))(a.store, queries)
        return
    from _stats import summary

    with tempfile.TemporaryDirectory(prefix="bench-mcp-") as tmp:
        agent_dir = a.store or Path(tmp)
        root = agent_dir / "memory-bridge"
        marker = root / "bench-built"
        if not (marker.exists() and marker.read_text() == BUILT.format(turns=a.turns, atomic=a.atomic)):
            started = time.perf_counter()
            build(root, a.turns, a.atomic)
            print(f"(built {a.turns} turns + {a.atomic} memories in {time.perf_counter() - started:.0f} s)")
        print(f"== warm memory_search at {a.turns} L0 turns + {a.atomic} L1 memories, {a.queries} a round")
        runs = [("in-process McpMemory.search", "in"), ("over MCP (stdio, SDK client)", "mcp")]
        merged: dict[str, list[float]] = {name: [] for name, _ in runs}
        for i in range(a.rounds):
            for name, mode in runs if i % 2 == 0 else runs[::-1]:
                data = _child(mode, agent_dir, a.queries)
                wall = data["wall"]
                assert isinstance(wall, list)
                merged[name] += wall
                print(summary(f"round {i + 1}, {name} (load {_load()})", wall))
        for name, _ in runs:
            print(summary(f"all rounds, {name}", merged[name]))
        print(f"== server start ({a.starts} starts, load {_load()})")
        marks: dict[str, list[float]] = {}
        for _ in range(a.starts):
            for key, ms in _child("start", agent_dir, 1).items():
                assert isinstance(ms, float)
                marks.setdefault(key, []).append(ms)
        for key, values in marks.items():
            print(summary(f"spawn -> {key}", values))
        base = _import_ms("import pydantic")
        sdk = _import_ms("import pydantic, mcp.server.lowlevel, mcp_types")
        print(
            f"importing the MCP SDK: +{sdk - base:.0f} ms over a process importing pydantic ({base:.0f} ms)"
        )


if __name__ == "__main__":
    main()
