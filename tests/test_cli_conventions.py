"""Terminal conventions: a usage error exits 2 with the usage of the subcommand that was typed
(never the Pi slash command's, never the list of all subcommands), and what a command prints reads
as English."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pi_memory_bridge.backends.base import AtomicType
from pi_memory_bridge.catchup.importer import ImportScope
from pi_memory_bridge.cli import main
from pi_memory_bridge.cli.memory_args import KINDS


@pytest.fixture(autouse=True)
def _agent_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path / "agent"))
    monkeypatch.setenv("HOME", str(tmp_path))


def _usage_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as exit_:
        main(list(argv))
    assert exit_.value.code == 2
    out = capsys.readouterr()
    assert out.out == ""
    return out.err


def test_forget_without_words_is_a_usage_error_of_the_terminal_command(
    capsys: pytest.CaptureFixture[str],
) -> None:
    err = _usage_error(capsys, "forget", "")
    assert err.startswith("usage: pi-memory-bridge forget")
    assert "/tdai-memory" not in err


def test_an_unknown_kind_is_a_usage_error_listing_the_kinds(capsys: pytest.CaptureFixture[str]) -> None:
    err = _usage_error(capsys, "list", "--kind", "nope")
    assert "usage: pi-memory-bridge list" in err
    assert "store failed" not in err
    for kind in AtomicType:
        assert kind.value in err


def test_the_parser_kinds_are_the_stores_kinds() -> None:
    assert tuple(t.value for t in AtomicType) == KINDS


def test_an_unknown_flag_shows_that_subcommands_usage_only(capsys: pytest.CaptureFixture[str]) -> None:
    err = _usage_error(capsys, "search", "--bogus", "x")
    assert err.startswith("usage: pi-memory-bridge search")
    assert "unrecognized arguments: --bogus" in err
    assert "{serve," not in err  # not the top-level list of every subcommand


def test_redact_without_rescan_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert _usage_error(capsys, "redact").startswith("usage: pi-memory-bridge redact")


@pytest.mark.parametrize(
    ("scope", "said"),
    [
        (ImportScope(since_ms=None, session_file=None), "every session of this agent dir"),
        (ImportScope(since_ms=1_577_836_800_000, session_file=None), "sessions since 20"),
        (
            ImportScope(since_ms=1_577_836_800_000, session_file=Path("/s.jsonl")),
            "session /s.jsonl, turns since 20",
        ),
    ],
)
def test_the_import_scope_reads_after_import_from(scope: ImportScope, said: str) -> None:
    assert said in scope.describe()
    assert "from since" not in f"import from {scope.describe()}"


def _status_text(tmp_path: Path, config: str | None = None) -> str:
    """`status` in a process of its own, as a terminal runs it: the test process may hold a loaded
    model from other tests."""
    if config is not None:
        (tmp_path / "agent" / "memory-bridge").mkdir(parents=True, exist_ok=True)
        (tmp_path / "agent" / "memory-bridge" / "config.json").write_text(config, encoding="utf-8")
    cli = "import sys; from pi_memory_bridge.cli import main; sys.exit(main())"
    run = subprocess.run(
        [sys.executable, "-c", cli, "status"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert run.returncode in (0, 1), run.stderr
    return run.stdout


def test_status_outside_pi_does_not_say_the_meaning_model_is_loading(tmp_path: Path) -> None:
    [line] = [x for x in _status_text(tmp_path).splitlines() if x.startswith("Search by meaning")]
    assert "loading" not in line  # nothing loads in a terminal's status command
    # an empty store: nothing waits for a vector; otherwise when the model loads
    assert "loads on the first search" in line or "everything remembered is indexed" in line


def test_status_outside_pi_with_learning_on_says_where_learning_runs_in_a_sentence(tmp_path: Path) -> None:
    out = _status_text(tmp_path, '{"learning": {"enabled": true}}')
    [line] = [x for x in out.splitlines() if x.startswith("Learning from your sessions")]
    assert "no model (" not in line and ") turns what you said" not in line
    assert line == (
        "Learning from your sessions: on; it runs inside Pi, on the session's model, "
        "or anywhere once learning.endpoint names a model server."
    )
    assert "model no model" not in out  # the details line reads too
