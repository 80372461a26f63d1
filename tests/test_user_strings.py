"""Every user-facing string of the CLI, the Pi commands, the inspector and the shim counts its
nouns ("1 turn", "2 turns", through `plural.counted`), never "turn(s)", and has no doubled word
("the the"). Docstrings are not shown to users and are not scanned."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from pi_memory_bridge.plural import counted, noun, plural

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "src" / "pi_memory_bridge"
SHIM = REPO / "extension-shim" / "src"

OPTIONAL_PLURAL = re.compile(r"[A-Za-z]\((?:s|es|ies)\)")
DOUBLED = re.compile(r"\b([A-Za-z]{2,}) \1\b")
# a JS/TS string or template literal (a template's ${...} parts are read as text too: harmless)
# markup, not words: Jinja tags and expressions, HTML tags (class="badge kind kind-x")
_MARKUP = re.compile(r"\{%.*?%\}|\{\{.*?\}\}|<[^>]*>")
# word lists, not sentences (the stop words of keyword search)
NOT_PROSE = {"src/pi_memory_bridge/textsearch.py"}
_JS_LITERAL = re.compile(r"\"(?:[^\"\\\n]|\\.)*\"|'(?:[^'\\\n]|\\.)*'|`(?:[^`\\]|\\.)*`")


def _docstrings(tree: ast.AST) -> set[int]:
    ids: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


def _python_strings(path: Path) -> Iterator[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            yield node.lineno, node.value


def _shim_strings(path: Path) -> Iterator[tuple[int, str]]:
    text = path.read_text(encoding="utf-8")
    code = re.sub(r"//[^\n]*|/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group()), text, flags=re.DOTALL)
    for match in _JS_LITERAL.finditer(code):
        yield code.count("\n", 0, match.start()) + 1, match.group()


def _every_string() -> Iterator[tuple[str, int, str]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        for line, text in _python_strings(path):
            yield str(path.relative_to(REPO)), line, text
    for path in sorted([*PACKAGE.rglob("*.html"), *PACKAGE.rglob("*.js")]):
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            yield str(path.relative_to(REPO)), n, _MARKUP.sub(" ", line)
    for path in sorted(SHIM.rglob("*.ts")):
        for line, text in _shim_strings(path):
            yield str(path.relative_to(REPO)), line, text


def test_no_user_string_has_an_optional_plural() -> None:
    found = [f"{p}:{n}: {t.strip()[:90]}" for p, n, t in _every_string() if OPTIONAL_PLURAL.search(t)]
    assert found == [], "count the noun with plural.counted instead:\n" + "\n".join(found)


def test_no_user_string_doubles_a_word() -> None:
    prose = [(p, n, t) for p, n, t in _every_string() if p not in NOT_PROSE]
    found = [f"{p}:{n}: {t.strip()[:90]}" for p, n, t in prose if DOUBLED.search(t)]
    assert found == [], "\n".join(found)


@pytest.mark.parametrize(
    ("n", "singular", "said"),
    [
        (1, "turn", "1 turn"),
        (0, "turn", "0 turns"),
        (2, "memory", "2 memories"),
        (2, "day", "2 days"),
        (3, "match", "3 matches"),
        (2, "dead record", "2 dead records"),
        (2, "fact and preference", "2 fact and preferences"),
    ],
)
def test_counted_says_the_number_and_its_noun(n: int, singular: str, said: str) -> None:
    assert counted(n, singular) == said


def test_an_irregular_plural_is_given() -> None:
    assert counted(2, "person", "people") == "2 people" and noun(1, "person", "people") == "person"
    assert plural("session file") == "session files"


def test_the_scanner_sees_an_optional_plural_in_python_and_in_the_shim(tmp_path: Path) -> None:
    source = tmp_path / "x.py"
    source.write_text('"""Docs may say http(s)."""\nX = f"{n} turn(s)"\n', encoding="utf-8")
    assert [t for _, t in _python_strings(source) if OPTIONAL_PLURAL.search(t)] == [" turn(s)"]
    shim = tmp_path / "x.ts"
    shim.write_text("s.on('close', () => this.closed(s)); // line(s)\nconst t = `${n} line(s)`;\n")
    assert [t for _, t in _shim_strings(shim) if OPTIONAL_PLURAL.search(t)] == ["`${n} line(s)`"]
