"""No module imports a layer above its own (README, "Layout"), lazy imports inside functions and
`TYPE_CHECKING` imports included. Every top-level package must have a place in `LAYERS`, so a new
package is placed on purpose, not by accident."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = "pi_memory_bridge"
SRC = Path(__file__).resolve().parents[1] / "src" / PACKAGE

FOUNDATION = 0
# The domain packages, low to high: each may import only itself, the foundation and the packages
# before it, so an arrow between two of them points one way and a new upward one fails here.
DOMAIN_ORDER = (
    "vocabulary",  # what a dialog, the status report and a forget candidate are made of: a leaf
    "embeddings",  # the bundled model, its cache, hybrid fusion
    "backends",
    "capture",
    "outbox",
    "recall",
    "tools",
    "skills",  # its tools reuse the memory tools' framing
    "learning",  # consolidation into L1: jobs, validation, scheduling
    "rescan",  # the current redaction rules applied to what is already stored
    "operations",  # what Pi's commands, the terminal and the inspector all do to memory
    "catchup",  # turns live capture missed, from Pi's session files; import (skips paused projects)
    "commands",  # the dialogs: flows over the operations
)
WIRE = FOUNDATION + len(DOMAIN_ORDER) + 1
ENGINE, ENTRY = WIRE + 1, WIRE + 2

# Keys are module names below the package; the longest matching prefix decides.
LAYERS: dict[str, int] = {
    "": FOUNDATION,  # the package's own __init__
    "_version": FOUNDATION,
    "textsearch": FOUNDATION,
    "prompt_focus": FOUNDATION,  # what a long prompt asks: read by recall and every backend
    "sqlite_faults": FOUNDATION,
    "sqlite_tx": FOUNDATION,
    "deadline": FOUNDATION,  # the current recall's deadline, read deep below it
    "surrogates": FOUNDATION,  # lone UTF-16 surrogates made U+FFFD at every boundary
    "private_files": FOUNDATION,  # 0600/0700 for everything we create
    "project": FOUNDATION,  # which project a working directory belongs to
    "runtime_dir": FOUNDATION,  # this user's sockets and running inspectors
    "inspector_registry": FOUNDATION,  # which inspectors run: read by status and `serve --stop` too
    "pause_history": FOUNDATION,  # when each project was paused: read by catch-up and import
    "sqlite_integrity": FOUNDATION,  # a database's integrity check, as doctor and status say it
    "daemon_contract": FOUNDATION,  # what the shim and the background sidecar agree on before a handshake
    "footer": FOUNDATION,  # the footer's states and their text: named by flows, sent on the wire
    "agents": FOUNDATION,  # which agent saved a memory (its `agent:<name>` source), in words
    "redact": FOUNDATION,
    "instruction_rules": FOUNDATION,  # is a text an instruction to the agent: every model write asks
    "config": FOUNDATION,
    "rpc": FOUNDATION,  # generic JSON-RPC 2.0 transport: knows nothing of memory
    "inspector_packages": FOUNDATION,  # which packages the inspector needs: `/tdai-memory-ui` asks too
    "plural": FOUNDATION,  # counted nouns ("1 turn", "2 turns") for every user-facing text
    **{name: FOUNDATION + 1 + rank for rank, name in enumerate(DOMAIN_ORDER)},
    "wire": WIRE,  # the wire models: the engine maps the domain to them at its edge
    "engine": ENGINE,  # everything that connects the protocol to the domain
    "sidecar": ENTRY,
    "cli": ENTRY,
    "ui": ENTRY,  # the memory inspector: a process of its own, like the sidecar
    "mcp_server": ENTRY,  # `pi-memory-bridge mcp`: memory for other agents, a process of its own
}


def layer_name(layer: int) -> str:
    if layer == FOUNDATION:
        return "foundation"
    if layer < WIRE:
        return f"domain: {DOMAIN_ORDER[layer - 1]}"
    return {WIRE: "wire", ENGINE: "engine", ENTRY: "entry point"}[layer]


def layer_of(module: str) -> int | None:
    """The layer of `pi_memory_bridge.<module>` (dotted, without the package), None if unplaced."""
    parts = module.split(".") if module else []
    for n in range(len(parts), -1, -1):
        key = ".".join(parts[:n])
        if key in LAYERS and (n > 0 or not parts):
            return LAYERS[key]
    return None


def module_name(path: Path) -> str:
    rel = path.relative_to(SRC).with_suffix("")
    parts = [p for p in rel.parts if p != "__init__"]
    return ".".join(parts)


def is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def imported(source: str, module: str, *, package: bool) -> list[tuple[int, str]]:
    """(line, module below the package) of every import of ours in `source`, at any depth."""
    found: list[tuple[int, str]] = []
    here = [PACKAGE, *module.split(".")] if module else [PACKAGE]
    base = here if package else here[:-1]
    for node in ast.walk(ast.parse(source)):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = base[: len(base) - (node.level - 1)]
                target = ".".join([*anchor, *(node.module.split(".") if node.module else [])])
            else:
                target = node.module or ""
            # `from pkg import name`: name may be a submodule; judge it as one when it exists
            targets = [f"{target}.{a.name}" if _exists(f"{target}.{a.name}") else target for a in node.names]
        for t in targets:
            if t == PACKAGE or t.startswith(PACKAGE + "."):
                found.append((node.lineno, t.removeprefix(PACKAGE).removeprefix(".")))
    return found


def _exists(dotted: str) -> bool:
    if not dotted.startswith(PACKAGE + "."):
        return False
    rel = Path(*dotted.split(".")[1:])
    return (SRC / rel).with_suffix(".py").exists() or (SRC / rel / "__init__.py").exists()


def violations(path: Path, source: str) -> list[str]:
    module = module_name(path)
    own = layer_of(module)
    if own is None:
        return [f"{module or PACKAGE}: no layer; place its top-level package in LAYERS"]
    out: list[str] = []
    for line, target in imported(source, module, package=is_package(path)):
        theirs = layer_of(target)
        if theirs is None:
            out.append(f"{module}:{line} imports {target}, which has no layer")
        elif theirs > own:
            higher = f"{target} ({layer_name(theirs)}), a higher layer"
            out.append(f"{module}:{line} ({layer_name(own)}) imports {higher}")
    return out


def test_every_module_imports_only_its_own_layer_or_below() -> None:
    files = sorted(SRC.rglob("*.py"))
    assert len(files) > 50  # the walk found the package
    problems = [v for f in files for v in violations(f, f.read_text(encoding="utf-8"))]
    assert problems == [], "\n".join(problems)


def test_every_top_level_package_has_a_layer() -> None:
    tops = {p.stem if p.is_file() else p.name for p in SRC.iterdir() if p.suffix == ".py" or p.is_dir()}
    tops -= {"__init__", "__pycache__"}
    assert sorted(t for t in tops if layer_of(t) is None) == []


@pytest.mark.parametrize(
    ("path", "source", "expected"),
    [
        # a lazy import inside a function counts
        (
            "recall/engine.py",
            "def f():\n    from pi_memory_bridge.engine.core import Engine\n",
            "recall.engine:2",
        ),
        # a relative import is resolved before judging
        ("capture/prepare.py", "from ..cli import main\n", "capture.prepare:1"),
        # `from package import module` is judged by the module
        ("config/_env.py", "from pi_memory_bridge import sidecar\n", "config._env:1"),
        # the domain never sees the wire (flows answer through a Dialog), nor the rest of `sidecar`
        (
            "commands/forget.py",
            "from pi_memory_bridge.wire import CommandStep\n",
            "commands.forget:1",
        ),
        ("commands/forget.py", "from pi_memory_bridge.sidecar import serve\n", "commands.forget:1"),
        ("newpkg/thing.py", "import os\n", "newpkg.thing: no layer"),
        # between two domain packages, only downward: the store never sees a flow or an operation
        ("backends/base.py", "from pi_memory_bridge.commands.forget import ALL\n", "backends.base:1"),
        ("recall/trace_log.py", "from pi_memory_bridge.operations import forget\n", "recall.trace_log:1"),
        # operations are below their dialogs, and the vocabulary is a leaf
        (
            "operations/pause.py",
            "from pi_memory_bridge.commands.pause import pause_flow\n",
            "operations.pause:1",
        ),
        ("vocabulary/status.py", "from pi_memory_bridge.outbox import OutboxCounts\n", "vocabulary.status:1"),
    ],
)
def test_the_check_catches(path: str, source: str, expected: str) -> None:
    found = violations(SRC / path, source)
    assert any(v.startswith(expected) for v in found), found


def test_the_check_allows_downward_and_wire_imports() -> None:
    source = "from pi_memory_bridge.wire import CommandStep\nfrom pi_memory_bridge.redact import x\n"
    assert violations(SRC / "engine/dialogs.py", source) == []
    assert violations(SRC / "commands/forget.py", "from pi_memory_bridge.footer import READY\n") == []
    downward = (
        "from pi_memory_bridge.operations.forget import ForgetDeps\nfrom pi_memory_bridge import backends\n"
    )
    assert violations(SRC / "commands/forget.py", downward) == []


def test_every_domain_package_has_one_rank() -> None:
    assert len(set(DOMAIN_ORDER)) == len(DOMAIN_ORDER)
    assert sorted(name for name in DOMAIN_ORDER if not _exists(f"{PACKAGE}.{name}")) == []
