"""Turns from session files, as live capture would have captured them: same parser, redaction,
branch identity and key; trees, forks, compactions; open tails; shape changes fail closed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from catchup_files import DATA, PI_VERSIONS, SessionWriter, assistant, tool_result, user
from pi_memory_bridge.capture.identity import BranchIdentity, EntryLink, derive_branch, entry_turn_id
from pi_memory_bridge.capture.prepare import live_user_entries, prepare_capture
from pi_memory_bridge.catchup.reader import SessionLog, parse_session_log
from pi_memory_bridge.catchup.segments import Captured, LogTurns, Open, Skipped, log_turns
from pi_memory_bridge.wire import EntryRef

MESSAGES = Path(__file__).parent / "data" / "pi_messages"
TREE_MARKERS = ("M1 M2 M3 M4 M5 M6 M7 S1 S2 S3 S4 S5 T1 T2 N1").split()


def _read(path: Path) -> SessionLog:
    log = parse_session_log(path.read_bytes())
    assert isinstance(log, SessionLog), log
    return log


def _turns(path: Path, **kw: Any) -> LogTurns:
    return log_turns(_read(path), **kw)


def _marker(c: Captured) -> str:
    return c.turn.user_text.split()[0]


def _prompt_marker(outcome: Captured | Skipped | Open) -> str:
    message = outcome.user_entry.message
    assert isinstance(message, dict)
    return str(message["content"][0]["text"]).split()[0]


def _ref(entry: dict[str, Any]) -> EntryRef:
    """The entry as the shim projects it (extension-shim/src/entries.ts)."""
    message = entry.get("message") if entry.get("type") == "message" else None
    fields: dict[str, Any] = {"id": entry["id"], "parentId": entry.get("parentId"), "type": entry["type"]}
    if isinstance(message, dict):
        fields["role"] = message.get("role")
        if isinstance(message.get("timestamp"), int):
            fields["ts"] = message["timestamp"]
    return EntryRef.model_validate(fields)


def _live(
    entries: list[dict[str, Any]], session_id: str, runs: list[list[object]], aborted: bool | None
) -> Any:
    """What live capture stores for a settle whose session had `entries` at settle time."""
    refs = [_ref(e) for e in entries]
    leaf = refs[-1].id if refs else None
    ident = BranchIdentity(
        session_id, derive_branch([EntryLink(r.id, r.parent_id, r.type) for r in refs], leaf)
    )
    return prepare_capture(runs, aborted=aborted, identity=ident, user_entries=live_user_entries(refs))


# ---- recorded files --------------------------------------------------------------------------


@pytest.mark.parametrize("version", PI_VERSIONS)
def test_every_turn_of_a_recorded_tree_is_captured_once_as_live_capture_did(version: str) -> None:
    path = DATA / f"tree-{version}.jsonl"
    lines = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    header, entries = lines[0], lines[1:]
    turns = _turns(path)
    assert sorted(_marker(c) for c in turns.captured) == sorted(TREE_MARKERS)
    assert not turns.skipped and not turns.open
    for captured in turns.captured:
        # live capture settled right after the reply: the file up to the reply, the reply as leaf
        reply = next(
            i
            for i, e in enumerate(entries)
            if e.get("parentId") == captured.user_entry.id and e["message"]["role"] == "assistant"
        )
        user_message = captured.user_entry.message
        reply_message = entries[reply]["message"]
        live = _live(entries[: reply + 1], header["id"], [[user_message, reply_message]], aborted=False)
        (expected,) = live.turns
        assert captured.turn == expected
        assert captured.turn.turn_id == entry_turn_id(header["id"], captured.user_entry.id)
    branches = {_marker(c)[0]: set() for c in turns.captured}
    for c in turns.captured:
        branches[_marker(c)[0]].add(c.turn.memory_session_id)
    assert all(len(ids) == 1 for ids in branches.values())  # one identity per branch letter
    assert len({next(iter(ids)) for ids in branches.values()}) == 4  # M, S, T, N apart


@pytest.mark.parametrize("version", PI_VERSIONS)
@pytest.mark.parametrize(("kind", "own"), [("fork", "F1"), ("clone", "C1")])
def test_a_fork_or_clone_captures_only_what_was_said_in_it(kind: str, own: str, version: str) -> None:
    # the copied turns belong to the parent's file (which was deleted here: they stay gone)
    turns = _turns(DATA / f"{kind}-{version}.jsonl")
    assert [_marker(c) for c in turns.captured] == [own]
    assert not turns.skipped and not turns.open


# ---- the recorded runs of real Pi, written into a file the way Pi persists them ---------------


def _file_from_settles(
    path: Path, settles: list[dict[str, Any]]
) -> tuple[SessionWriter, list[list[dict[str, Any]]]]:
    """Every message of every settle appended at the leaf; what the shim had at each settle."""
    writer = SessionWriter(path)
    writer.start()
    at_settle: list[list[dict[str, Any]]] = []
    for settle in settles:
        for run in settle["runs"]:
            for message in run:
                if message.get("role") == "custom":
                    writer.append(
                        "custom_message", customType=message.get("customType"), content="x", display=False
                    )
                else:
                    writer.message(message)
        at_settle.append([json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()[1:]])
    return writer, at_settle


@pytest.mark.parametrize("recording", sorted(p.name for p in MESSAGES.glob("*.json")))
def test_recorded_runs_of_real_pi_give_the_same_turns_from_the_file(recording: str, tmp_path: Path) -> None:
    data = json.loads((MESSAGES / recording).read_text(encoding="utf-8"))
    writer, at_settle = _file_from_settles(tmp_path / "s.jsonl", data["settles"])
    live = [
        turn
        for settle, entries in zip(data["settles"], at_settle, strict=True)
        for turn in _live(entries, writer.session_id, settle["runs"], settle["aborted"]).turns
    ]
    from_file = [c.turn for c in _turns(writer.path).captured]
    assert from_file == live
    assert all(t.turn_id.startswith(tuple("0123456789abcdef")) for t in live)


# ---- open turns and the file moving on --------------------------------------------------------


def test_a_turn_without_its_answer_at_the_end_of_the_file_is_open_until_the_file_moves_on(
    tmp_path: Path,
) -> None:
    w = SessionWriter(tmp_path / "s.jsonl")
    w.start()
    w.turn("first question")
    asked = w.message(user("run the build", w.tick()))
    call = {"id": "call_1", "name": "bash", "args": {"command": "make"}}
    w.message(assistant("", w.tick(), "toolUse", [call]))
    turns = _turns(w.path)
    assert [type(o) for o in turns.outcomes] == [Captured, Open]
    assert turns.open[0].user_entry.id == asked
    w.message(tool_result("call_1", "bash", "ok", w.tick()))
    assert isinstance(_turns(w.path).outcomes[1], Open)  # still working
    w.message(assistant("the build passed", w.tick()))
    done = _turns(w.path)
    assert [type(o) for o in done.outcomes] == [Captured, Captured]
    (tool,) = done.captured[1].turn.tools
    assert tool.tool_name == "bash" and tool.result == "ok"


def test_an_unanswered_turn_the_file_moved_on_from_is_skipped(tmp_path: Path) -> None:
    w = SessionWriter(tmp_path / "s.jsonl")
    w.message(user("killed mid-tool", w.tick()))
    w.message(assistant("", w.tick(), "toolUse", [{"id": "c", "name": "bash", "args": {}}]))
    w.turn("the next prompt after a resume")
    outcomes = _turns(w.path).outcomes
    assert isinstance(outcomes[0], Skipped) and outcomes[0].reasons == ("stop-reason:toolUse",)
    assert isinstance(outcomes[1], Captured)


def test_an_error_at_the_end_waits_for_the_retry_and_the_failed_attempt_leaves_no_tools(
    tmp_path: Path,
) -> None:
    w = SessionWriter(tmp_path / "s.jsonl")
    w.message(user("CALL_TOOL then fail", w.tick()))
    w.message(assistant("", w.tick(), "toolUse", [{"id": "c1", "name": "bash", "args": {"command": "x"}}]))
    w.message(tool_result("c1", "bash", "out", w.tick()))
    w.message(assistant("", w.tick(), "error"))
    assert isinstance(_turns(w.path).outcomes[0], Open)
    w.message(assistant("retried answer", w.tick()))
    (captured,) = _turns(w.path).captured
    assert captured.turn.assistant_text == "retried answer" and captured.turn.tools == ()


def test_an_aborted_turn_is_never_captured(tmp_path: Path) -> None:
    w = SessionWriter(tmp_path / "s.jsonl")
    w.message(user("stop me", w.tick()))
    w.message(assistant("partial", w.tick(), "aborted"))
    w.turn("next")
    outcomes = _turns(w.path).outcomes
    assert isinstance(outcomes[0], Skipped) and outcomes[0].reasons == ("stop-reason:aborted",)


# ---- tree shapes -------------------------------------------------------------------------------


def test_a_turn_follows_the_entries_appended_while_it_ran_not_later_branches(tmp_path: Path) -> None:
    w = SessionWriter(tmp_path / "s.jsonl")
    first = w.message(user("main question", w.tick()))
    call = w.message(assistant("", w.tick(), "toolUse", [{"id": "c", "name": "read", "args": {"path": "a"}}]))
    w.message(tool_result("c", "read", "file a", w.tick()))
    w.message(assistant("main answer", w.tick()))
    w.leaf = call  # /tree back to the tool call, then a new prompt there: a later sibling
    branch = w.message(user("side question", w.tick()))
    w.message(assistant("side answer", w.tick()))
    by_user = {c.user_entry.id: c.turn for c in _turns(w.path).captured}
    assert by_user[first].assistant_text == "main answer"
    assert by_user[branch].assistant_text == "side answer"
    assert by_user[first].memory_session_id.endswith("-main")
    assert by_user[branch].memory_session_id.endswith(f"-{branch}")


def test_see_through_entries_inside_a_turn_change_nothing(tmp_path: Path) -> None:
    w = SessionWriter(tmp_path / "s.jsonl")
    w.message(user("question", w.tick()))
    w.append("custom_message", customType="probe", content="injected", display=False)
    for entry_type in ("label", "custom", "session_info", "usage", "compaction", "branch_summary"):
        w.append(entry_type)
    w.message(assistant("answer", w.tick()))
    (captured,) = _turns(w.path).captured
    assert captured.turn.assistant_text == "answer"


def test_a_custom_message_after_the_answer_starts_a_run_of_its_own(tmp_path: Path) -> None:
    w = SessionWriter(tmp_path / "s.jsonl")
    w.turn("question", "first answer")
    w.append("custom_message", customType="nudge", content="go on", display=True)
    w.message(assistant("answer to the extension", w.tick()))
    (captured,) = _turns(w.path).captured
    assert captured.turn.assistant_text == "first answer"


@pytest.mark.parametrize(
    ("entry_type", "body"),
    [("context_window_edit", {}), ("memory", {"note": "x"})],
)
def test_an_entry_type_we_do_not_know_inside_a_turn_skips_it(
    tmp_path: Path, entry_type: str, body: dict[str, Any]
) -> None:
    w = SessionWriter(tmp_path / "s.jsonl")
    w.append(entry_type, **body)  # outside any turn: harmless
    w.message(user("question", w.tick()))
    w.append(entry_type, **body)
    w.message(assistant("answer", w.tick()))
    w.turn("next")
    outcomes = _turns(w.path).outcomes
    assert isinstance(outcomes[0], Skipped) and outcomes[0].reasons == (f"entry-type-unknown:{entry_type}",)
    assert isinstance(outcomes[1], Captured)


def test_a_turn_whose_message_was_edited_later_is_skipped(tmp_path: Path) -> None:
    w = SessionWriter(tmp_path / "s.jsonl")
    w.message(user("question", w.tick()))
    reply = w.message(assistant("answer with a secret", w.tick()))
    w.turn("next")
    w.append("context_edit", targetId=reply, replacement=None)
    outcomes = _turns(w.path).outcomes
    assert isinstance(outcomes[0], Skipped) and outcomes[0].reasons == ("context-edited",)
    assert isinstance(outcomes[1], Captured)


def test_a_duplicated_entry_id_skips_the_turns_it_touches(tmp_path: Path) -> None:
    w = SessionWriter(tmp_path / "s.jsonl")
    w.turn("fine")
    asked = w.message(user("question", w.tick()))
    w.message(assistant("answer", w.tick()))
    with w.path.open("a", encoding="utf-8") as f:
        f.write(json.dumps({"type": "label", "id": asked, "parentId": None, "timestamp": "x"}) + "\n")
    outcomes = _turns(w.path).outcomes
    assert isinstance(outcomes[0], Captured)
    assert isinstance(outcomes[1], Skipped) and outcomes[1].reasons == ("entry-id-duplicated",)


# ---- shape changes (the parser's fail-closed rules, reached through the file) ------------------


@pytest.mark.parametrize(
    "reply",
    [
        {"role": "assistant", "content": "plain string", "stopReason": "stop", "timestamp": 5},
        {"role": "assistant", "content": [{"type": "output_text", "text": "x"}], "stopReason": "stop"},
        {"role": "model", "content": [{"type": "text", "text": "x"}], "stopReason": "stop"},
        {"role": "assistant", "content": [{"type": "text", "text": "x"}], "stopReason": "end_turn"},
        {"role": "assistant", "content": [{"type": "text", "text": "x"}]},
    ],
    ids=["content string", "block renamed", "role renamed", "stop reason renamed", "no stop reason"],
)
def test_an_answer_of_another_shape_is_not_captured(tmp_path: Path, reply: dict[str, Any]) -> None:
    w = SessionWriter(tmp_path / "s.jsonl")
    w.message(user("question", w.tick()))
    w.message(reply)
    w.turn("next")
    outcomes = _turns(w.path).outcomes
    assert isinstance(outcomes[0], Skipped)
    assert isinstance(outcomes[1], Captured)


def test_redaction_applies_before_anything_leaves_the_reader(tmp_path: Path) -> None:
    token = "ghp_" + "Qm4Zt7Lp2Xv9Rk1Wn6Hs3Jd8Fb5Gc0Ya2Ue7"
    w = SessionWriter(tmp_path / "s.jsonl")
    w.turn(f"my token is {token}", f"noted {token}")
    (captured,) = _turns(w.path).captured
    assert token not in captured.turn.user_text + captured.turn.assistant_text
    assert captured.redactions >= 2


# ---- what is eligible -------------------------------------------------------------------------


def test_only_turns_said_since_the_start_and_after_the_offset_are_considered(tmp_path: Path) -> None:
    w = SessionWriter(tmp_path / "s.jsonl")
    w.turn("old one")
    since = w.tick()
    w.turn("new one")
    offset_after = _read(w.path).complete_bytes
    w.turn("newest")
    assert [_marker(c) for c in _turns(w.path, since_ms=since).captured] == ["new", "newest"]
    assert [_marker(c) for c in _turns(w.path, from_offset=offset_after).captured] == ["newest"]
    w.message({"role": "user", "content": "no timestamp"})
    w.message(assistant("answer", w.tick()))
    assert [_marker(c) for c in _turns(w.path, since_ms=since).captured] == ["new", "newest"]


def test_two_user_messages_sharing_a_timestamp_keep_content_derived_keys(tmp_path: Path) -> None:
    w = SessionWriter(tmp_path / "s.jsonl")
    ts = w.tick()
    w.message(user("same instant a", ts))
    w.message(assistant("a", w.tick()))
    w.message(user("same instant b", ts))
    w.message(assistant("b", w.tick()))
    first, second = _turns(w.path).captured
    assert first.turn.turn_id == first.legacy_id and second.turn.turn_id == second.legacy_id
    assert first.turn.turn_id != second.turn.turn_id


def test_the_edit_pi_writes_before_an_auto_retry_keeps_the_turn(tmp_path: Path) -> None:
    # Pi 1.6 drops the failed response from the context (replacement null), then asks again
    w = SessionWriter(tmp_path / "s.jsonl")
    w.message(user("a tool call, then the server fails once", w.tick()))
    w.message(assistant("", w.tick(), "toolUse", [{"id": "c1", "name": "bash", "args": {"command": "x"}}]))
    w.message(tool_result("c1", "bash", "first try", w.tick()))
    failed = w.message(assistant("", w.tick(), "error"))
    w.append("context_edit", targetId=failed, replacement=None)
    w.message(assistant("FINAL: tool said first try", w.tick()))
    (captured,) = _turns(w.path).captured
    assert captured.turn.assistant_text == "FINAL: tool said first try"
    # the same edit of an answer that did not fail is a rewrite: fail-closed
    answered = w.message(user("another", w.tick()))
    reply = w.message(assistant("kept?", w.tick()))
    w.append("context_edit", targetId=reply, replacement=None)
    w.turn("after")
    outcomes = {o.user_entry.id: o for o in _turns(w.path).outcomes}
    assert isinstance(outcomes[answered], Skipped) and outcomes[answered].reasons == ("context-edited",)


@pytest.mark.parametrize("version", PI_VERSIONS)
def test_the_recorded_turn_shapes_of_real_pi_are_captured_as_live_capture_captures_them(version: str) -> None:
    # tests/data/pi_sessions/scenarios-*.jsonl (e2e/record_sessions.py); 1.6 writes a context_edit
    # before its auto-retry. P6 ends in a tool call the steer P7 answered: skipped, as live.
    outcomes = {_prompt_marker(o): o for o in _turns(DATA / f"scenarios-{version}.jsonl").outcomes}
    answers = {k: o.turn.assistant_text for k, o in outcomes.items() if isinstance(o, Captured)}
    assert answers == {
        "P1": "ECHO: P1 a plain turn",
        "P2": "FINAL: tool said tool-ok",
        "P3": "FINAL: tool said first try",
        "P4": "slow first answer",
        "P5": "answer to the follow-up",
        "P7": "steered answer",
        "P9": "ECHO: P9 the last plain turn",
    }
    skipped = {k: o.reasons for k, o in outcomes.items() if isinstance(o, Skipped)}
    assert skipped == {"P6": ("stop-reason:toolUse",), "P8": ("stop-reason:aborted",)}
    p2 = outcomes["P2"]
    assert isinstance(p2, Captured) and [t.tool_name for t in p2.turn.tools] == ["bash"]
    p3 = outcomes["P3"]
    assert isinstance(p3, Captured) and p3.turn.tools == ()  # the failed attempt's call is dropped
