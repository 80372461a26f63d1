"""Reading Pi's session files safely (issue 26 item 5): a file swapped for a FIFO after the scan
does not block catch-up, and a large file is read as a stream with bounded memory."""

from __future__ import annotations

import os
import threading
import tracemalloc
from pathlib import Path

from catchup_files import T0_MS, SessionWriter, assistant, tool_result, user
from pi_memory_bridge.catchup.files import scan_file, session_files


def test_a_file_swapped_for_a_fifo_after_the_scan_is_refused_at_once(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    w = SessionWriter(sessions / "--work--" / "a.jsonl", created_ms=T0_MS, clock=T0_MS)
    w.turn("hello")
    ((path, _stat),) = list(session_files(sessions))  # the scan saw a regular file
    path.unlink()
    os.mkfifo(path)  # then it became a FIFO nobody writes to
    outcome: list[object] = []
    reader = threading.Thread(
        target=lambda: outcome.append(scan_file(path, None, since_ms=None)), daemon=True
    )
    reader.start()
    reader.join(timeout=20)
    if reader.is_alive():  # the old open blocked until a writer came: let it go, then fail
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        reader.join(timeout=5)
        raise AssertionError("opening a FIFO blocked the scan")
    (scan,) = outcome
    assert getattr(scan, "unreadable", None) == "not a regular file"


def _large_session(path: Path, turns: int, result_bytes: int) -> None:
    w = SessionWriter(path, created_ms=T0_MS, clock=T0_MS)
    log = ("compiling module.c ... ok\n" * (result_bytes // 26))[:result_bytes]
    for n in range(turns):
        w.message(user(f"build step {n}", w.tick()))
        call = {"id": f"c{n}", "name": "bash", "args": {"command": f"make {n}"}}
        w.message(assistant("", w.tick(), "toolUse", [call]))
        w.message(tool_result(f"c{n}", "bash", log, w.tick()))
        w.message(assistant(f"step {n} built", w.tick()))


def test_a_large_file_is_read_with_memory_bounded_by_its_largest_turn(tmp_path: Path) -> None:
    path = tmp_path / "sessions" / "--work--" / "big.jsonl"
    _large_session(path, turns=60, result_bytes=300_000)  # ~18 MB
    size = path.stat().st_size
    tracemalloc.start()
    try:
        scan = scan_file(path, None, since_ms=None)
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(scan.captured) == 60 and scan.bytes_read == size
    # the file whole would be `size` bytes, its parsed objects several times that; a stream holds
    # a chunk, one line and the turn being built (its tool result, redacted)
    assert peak < size / 3, (peak, size)
