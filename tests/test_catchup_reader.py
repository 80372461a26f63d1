"""Reading Pi's session files fail-closed: the header, torn and partial lines, shape changes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from catchup_files import DATA, PI_VERSIONS, SessionWriter, user
from pi_memory_bridge.catchup.reader import SessionLog, Unreadable, parse_session_log

HEADER = {
    "type": "session",
    "version": 3,
    "id": "sess-1",
    "timestamp": "2027-01-15T08:00:00.000Z",
    "cwd": "/w",
}


def _log(data: bytes) -> SessionLog:
    log = parse_session_log(data)
    assert isinstance(log, SessionLog), log
    return log


def _lines(*objects: object) -> bytes:
    return b"".join(json.dumps(o).encode() + b"\n" for o in objects)


@pytest.mark.parametrize("version", PI_VERSIONS)
@pytest.mark.parametrize("kind", ["tree", "fork", "clone"])
def test_recorded_files_of_both_versions_read_whole(kind: str, version: str) -> None:
    data = (DATA / f"{kind}-{version}.jsonl").read_bytes()
    log = _log(data)
    assert log.complete_bytes == len(data) and log.malformed_lines == 0
    assert len(log.entries) == data.count(b"\n") - 1
    assert (log.parent_session is not None) == (kind != "tree")
    assert all(data[e.start : e.end].endswith(b"\n") for e in log.entries)


@pytest.mark.parametrize(
    "header",
    [
        {**HEADER, "type": "sessionHeader"},
        {**HEADER, "id": 7},
        {**HEADER, "id": ""},
        {**HEADER, "version": 4},
        {**HEADER, "version": 2},
        {k: v for k, v in HEADER.items() if k != "version"},
        {**HEADER, "version": True},
        ["session"],
    ],
    ids=[
        "renamed type",
        "id number",
        "id empty",
        "newer version",
        "older version",
        "no version",
        "bool",
        "array",
    ],
)
def test_a_header_of_another_shape_makes_the_file_unreadable(header: object) -> None:
    result = parse_session_log(_lines(header, {"type": "message", "id": "a", "parentId": None}))
    assert isinstance(result, Unreadable) and not result.transient


def test_a_file_whose_header_is_still_being_written_is_unreadable_for_now() -> None:
    result = parse_session_log(json.dumps(HEADER).encode()[:-3])
    assert isinstance(result, Unreadable) and result.transient
    assert isinstance(parse_session_log(b""), Unreadable)


def test_a_last_line_without_its_newline_is_not_read_yet() -> None:
    whole = _lines(HEADER, {"type": "message", "id": "a", "parentId": None, "message": user("hi", 1)})
    partial = json.dumps({"type": "message", "id": "b", "parentId": "a"}).encode()
    for cut in (1, len(partial) // 2, len(partial)):  # even a complete object without "\n"
        log = _log(whole + partial[:cut])
        assert [e.id for e in log.entries] == ["a"]
        assert log.complete_bytes == len(whole)


def test_a_torn_line_repaired_by_pi_is_left_out_and_the_rest_is_read() -> None:
    torn = json.dumps({"type": "message", "id": "b", "parentId": "a"}).encode()[:20]
    data = (
        _lines(HEADER, {"type": "message", "id": "a", "parentId": None})
        + torn
        + b"\n"  # Pi appends the missing newline when it opens the file again
        + _lines({"type": "message", "id": "c", "parentId": "a"})
    )
    log = _log(data)
    assert [e.id for e in log.entries] == ["a", "c"] and log.malformed_lines == 1


@pytest.mark.parametrize(
    "line",
    [
        b"{not json}",
        b"\xff\xfe garbage",
        json.dumps([1, 2]).encode(),
        json.dumps({"type": "message", "parentId": None}).encode(),
        json.dumps({"type": "message", "id": 5, "parentId": None}).encode(),
        json.dumps({"type": "message", "id": "x", "parentId": 3}).encode(),
        json.dumps({"type": 1, "id": "x", "parentId": None}).encode(),
        json.dumps({"id": "x", "parentId": None}).encode(),
    ],
)
def test_an_entry_of_another_shape_is_counted_and_left_out(line: bytes) -> None:
    log = _log(_lines(HEADER) + line + b"\n" + _lines({"type": "label", "id": "ok", "parentId": None}))
    assert [e.id for e in log.entries] == ["ok"] and log.malformed_lines == 1


def test_blank_lines_are_ignored() -> None:
    log = _log(b"\n" + _lines(HEADER) + b"\n\n" + _lines({"type": "label", "id": "ok", "parentId": None}))
    assert [e.id for e in log.entries] == ["ok"] and log.malformed_lines == 0


@given(st.binary(max_size=400))
def test_nothing_raises_whatever_the_bytes(tail: bytes) -> None:
    result = parse_session_log(_lines(HEADER) + tail)
    assert isinstance(result, SessionLog | Unreadable)


def test_entry_helpers_read_the_message_fields(tmp_path: Path) -> None:
    writer = SessionWriter(tmp_path / "s.jsonl")
    writer.message(user("hello", 1234))
    writer.message({"role": "user", "content": "x", "timestamp": True})
    log = _log(writer.path.read_bytes())
    first, second = log.entries
    assert first.is_user_message and first.message_timestamp == 1234 and first.written_at is not None
    assert second.message_timestamp is None  # a JSON true is not a timestamp
