"""Outside `backends/` nothing asks which backend class it has, and outside `backends/` and
`engine/` nothing imports the local store's modules: learning reaches its store through
`MemoryBackend.learning()` (`backends.learning`), the data-dir tools through `backends.data_dir`.
Lazy and `TYPE_CHECKING` imports count, as in `test_layers`."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from test_layers import SRC, imported, is_package, module_name

LOCAL = "backends.local"


def concrete_backends() -> frozenset[str]:
    """Every class under `backends/` named `...Backend` that is not a protocol."""
    names: set[str] = set()
    for path in (SRC / "backends").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and node.name.endswith("Backend"):
                bases = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases}
                if "Protocol" not in bases:
                    names.add(node.name)
    return frozenset(names)


def type_checks(path: Path, source: str, backends: frozenset[str]) -> list[str]:
    """`isinstance`/`issubclass` checks against a concrete backend class in `source`."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and len(node.args) == 2):
            continue
        if node.func.id not in ("isinstance", "issubclass"):
            continue
        kinds = node.args[1].elts if isinstance(node.args[1], ast.Tuple) else [node.args[1]]
        for kind in kinds:
            name = kind.id if isinstance(kind, ast.Name) else getattr(kind, "attr", "")
            if name in backends:
                found.append(f"{module_name(path)}:{node.lineno} {node.func.id}(..., {name})")
    return found


def local_imports(path: Path, source: str) -> list[str]:
    module = module_name(path)
    return [
        f"{module}:{line} imports {target}"
        for line, target in imported(source, module, package=is_package(path))
        if target == LOCAL or target.startswith(LOCAL + ".")
    ]


def _outside(*rooms: str) -> list[Path]:
    return [p for p in sorted(SRC.rglob("*.py")) if p.relative_to(SRC).parts[0] not in rooms]


def test_the_concrete_backends_are_found() -> None:
    assert {"LocalBackend", "MemoryCoreBackend"} <= concrete_backends()
    assert "MemoryBackend" not in concrete_backends()


def test_no_type_check_on_a_concrete_backend_outside_backends() -> None:
    backends = concrete_backends()
    found = [c for p in _outside("backends") for c in type_checks(p, p.read_text(encoding="utf-8"), backends)]
    assert found == [], "\n".join(found)


def test_no_import_of_the_local_store_outside_backends_and_engine() -> None:
    found = [
        i for p in _outside("backends", "engine") for i in local_imports(p, p.read_text(encoding="utf-8"))
    ]
    assert found == [], "\n".join(found)


@pytest.mark.parametrize(
    ("path", "source"),
    [
        ("ui/service.py", "from pi_memory_bridge.backends.local import LocalBackend\n"),
        ("learning/plan.py", "def f():\n    from pi_memory_bridge.backends.local.learning import memories\n"),
        ("cli/doctor.py", "from pi_memory_bridge.backends import local\n"),
        ("learning/notes.py", "import pi_memory_bridge.backends.local.notes\n"),
    ],
)
def test_a_planted_local_import_is_caught(path: str, source: str) -> None:
    assert local_imports(SRC / path, source) != []


@pytest.mark.parametrize(
    "source",
    [
        "if isinstance(backend, LocalBackend):\n    pass\n",
        "ok = isinstance(b, (str, local.MemoryCoreBackend))\n",
    ],
)
def test_a_planted_type_check_is_caught(source: str) -> None:
    assert type_checks(SRC / "ui/service.py", source, concrete_backends()) != []


def test_the_seams_themselves_pass() -> None:
    source = "from pi_memory_bridge.backends.learning import LearningStore\nisinstance(x, LearningStore)\n"
    assert local_imports(SRC / "learning/plan.py", source) == []
    assert type_checks(SRC / "learning/plan.py", source, concrete_backends()) == []
