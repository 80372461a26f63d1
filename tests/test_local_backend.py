"""The embedded local backend: L0/L1 in SQLite, L2/L3 as Markdown files."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from pi_memory_bridge.backends.base import (
    BackendConfigError,
    BackendCorrupt,
    BackendRejected,
    BackendUnavailable,
    Capability,
    ConversationTurn,
    MemoryBackend,
    ToolEvidence,
)
from pi_memory_bridge.backends.local import DB_FILENAME, LocalBackend
from pi_memory_bridge.backends.local.atomic_rows import content_key
from pi_memory_bridge.backends.local.notes import summarize
from pi_memory_bridge.backends.local.schema import LATEST_VERSION, MIGRATIONS

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def turn(
    turn_id: str, user: str, assistant: str = "ok", session: str = "mem-1", minutes: int = 0
) -> ConversationTurn:
    return ConversationTurn(
        turn_id=turn_id,
        memory_session_id=session,
        user_text=user,
        assistant_text=assistant,
        created_at=T0 + timedelta(minutes=minutes),
        pi_session_id="pi-1",
    )


@pytest.fixture
async def backend(tmp_path: Path) -> AsyncIterator[LocalBackend]:
    store = LocalBackend(tmp_path / "memory-bridge", busy_timeout_ms=300)
    yield store
    await store.close()


def _db(root: Path) -> sqlite3.Connection:
    return sqlite3.connect(root / DB_FILENAME)


# --- construction and protocol ------------------------------------------------------------------


async def test_satisfies_the_protocol_and_declares_its_capabilities(backend: LocalBackend) -> None:
    assert isinstance(backend, MemoryBackend)
    assert backend.name == "local"
    # One SQLite writer: the outbox sends it one batch at a time.
    assert backend.capabilities == frozenset(Capability) - {Capability.SKILLS, Capability.CONCURRENT_SESSIONS}


async def test_creates_a_wal_database_under_the_root(backend: LocalBackend) -> None:
    assert (backend.root / DB_FILENAME).is_file()
    with _db(backend.root) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("SELECT max(version) FROM schema_migrations").fetchone()[0] == LATEST_VERSION


async def test_reopening_does_not_migrate_twice(tmp_path: Path) -> None:
    for _ in range(2):
        store = LocalBackend(tmp_path)
        await store.close()
    with _db(tmp_path) as conn:
        assert conn.execute("SELECT count(*) FROM schema_migrations").fetchone()[0] == LATEST_VERSION


async def test_a_version_1_store_is_migrated_and_keeps_its_turns(tmp_path: Path) -> None:
    db = tmp_path / DB_FILENAME
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)")
    MIGRATIONS[0](conn)
    conn.execute("INSERT INTO schema_migrations VALUES (1, 'then')")
    conn.commit()
    conn.close()
    store = LocalBackend(tmp_path)
    await store.conversation.add([turn("t-new", "tools arrive with schema 2")])
    await store.close()
    with _db(tmp_path) as conn:
        assert conn.execute("SELECT tools_json FROM turns WHERE turn_id = 't-new'").fetchone()[0] == "[]"


async def test_tool_evidence_is_stored_with_the_turn(backend: LocalBackend) -> None:
    evidence = ToolEvidence("call_1", "bash", '{"command": "make"}', "ok", False)
    base = turn("t-tools", "build it")
    await backend.conversation.add([replace(base, tools=(evidence,))])
    with _db(backend.root) as conn:
        stored = json.loads(
            conn.execute("SELECT tools_json FROM turns WHERE turn_id = 't-tools'").fetchone()[0]
        )
    assert stored == [
        {
            "toolCallId": "call_1",
            "toolName": "bash",
            "arguments": '{"command": "make"}',
            "result": "ok",
            "isError": False,
        }
    ]


async def test_a_store_from_a_newer_version_is_refused(tmp_path: Path) -> None:
    await LocalBackend(tmp_path).close()
    with _db(tmp_path) as conn:
        conn.execute("INSERT INTO schema_migrations(version, applied_at) VALUES (99, 'later')")
    with pytest.raises(BackendConfigError, match="newer"):
        LocalBackend(tmp_path)


async def test_search_skills_is_rejected(backend: LocalBackend) -> None:
    with pytest.raises(BackendRejected, match="skill"):
        await backend.search_skills("anything", 5)


async def test_calls_after_close_raise_unavailable(tmp_path: Path) -> None:
    store = LocalBackend(tmp_path)
    await store.close()
    with pytest.raises(BackendUnavailable, match="closed"):
        await store.conversation.search("go", 4)


# --- L0 ----------------------------------------------------------------------------------------


async def test_add_turns_is_idempotent_by_turn_id(backend: LocalBackend) -> None:
    first = turn("t1", "deploy with argo")
    await backend.conversation.add([first, first])
    await backend.conversation.add([turn("t1", "a different text"), turn("t2", "second")])
    status = await backend.status()
    assert status.counts["turns"] == 2
    hits = await backend.conversation.search("argo", 4)
    assert [h.user_text for h in hits] == ["deploy with argo"]


async def test_stored_turn_ids_answers_which_exist(backend: LocalBackend) -> None:
    await backend.conversation.add([turn("t1", "a"), turn("t2", "b")])
    assert await backend.conversation.stored_ids(["t1", "t3", "t2", "t1"]) == {"t1", "t2"}
    assert await backend.conversation.stored_ids([]) == set()
    many = [f"x{i}" for i in range(1500)] + ["t2"]
    assert await backend.conversation.stored_ids(many) == {"t2"}


async def test_empty_turn_id_is_rejected(backend: LocalBackend) -> None:
    with pytest.raises(BackendRejected):
        await backend.conversation.add([turn("", "x")])


async def test_seed_scenario_chinese_question_finds_the_preference(backend: LocalBackend) -> None:
    await backend.conversation.add(
        [
            turn("seed", "我负责后端，用 Go，最讨厌魔法数字", "记住了：后端用 Go，避免魔法数字。"),
            turn("other", "帮我看看前端的样式表", "样式表已经整理好了。"),
            turn("en", "How do I run the tests?", "Run make test."),
        ]
    )
    hits = await backend.conversation.search("我讨厌什么代码风格？", 4)
    assert hits and hits[0].turn_id == "seed"
    for word in ["讨厌", "魔法", "数字"]:
        assert [h.turn_id for h in await backend.conversation.search(word, 4)] == ["seed"]


async def test_hits_carry_the_stored_fields_ranked_by_score(backend: LocalBackend) -> None:
    other_zone = datetime(2026, 3, 1, 20, 0, tzinfo=timezone(timedelta(hours=8)))
    await backend.conversation.add(
        [
            ConversationTurn("a", "mem-a", "retry policy for payments", "use backoff", other_zone),
            turn("b", "retry retry retry policy policy for payments with jitter", "sure", minutes=5),
            turn("c", "unrelated question about css", "answer"),
        ]
    )
    hits = await backend.conversation.search("payments retry policy", 4)
    assert {h.turn_id for h in hits} == {"a", "b"}
    assert hits[0].score >= hits[1].score > 0
    by_id = {h.turn_id: h for h in hits}
    assert by_id["a"].memory_session_id == "mem-a"
    assert by_id["a"].assistant_text == "use backoff"
    assert by_id["a"].created_at == other_zone
    assert by_id["a"].created_at.tzinfo is not None


async def test_identifiers_and_paths_are_searchable(backend: LocalBackend) -> None:
    await backend.conversation.add(
        [
            turn("id", "rename parseHTTPResponse in src/net/client.go", "done"),
            turn("snake", "max_retry_count should come from config", "moved it"),
            turn("noise", "general chat about lunch", "pizza"),
        ]
    )
    assert (await backend.conversation.search("parseHTTPResponse", 4))[0].turn_id == "id"
    assert (await backend.conversation.search("the http response parser", 4))[0].turn_id == "id"
    assert (await backend.conversation.search("client.go", 4))[0].turn_id == "id"
    assert (await backend.conversation.search("retry count", 4))[0].turn_id == "snake"


async def test_stop_words_alone_find_nothing(backend: LocalBackend) -> None:
    await backend.conversation.add([turn("t", "what is the thing that you said", "it is what it is")])
    assert await backend.conversation.search("what is the", 4) == []
    assert await backend.conversation.search("我的是什么", 4) == []
    assert await backend.conversation.search("", 4) == []


async def test_limit_is_respected(backend: LocalBackend) -> None:
    await backend.conversation.add([turn(f"t{i}", f"deploy step {i}") for i in range(10)])
    assert len(await backend.conversation.search("deploy", 3)) == 3
    assert await backend.conversation.search("deploy", 0) == []


async def test_a_one_megabyte_query_finds_the_turn(backend: LocalBackend) -> None:
    await backend.conversation.add([turn("t", "parse the config and retry the query", "ok")])
    huge = "parse the config and retry the 数据库 query " * 25_000
    hits = await backend.conversation.search(huge, 4)  # its speed: bench/bench_bounds.py
    assert [h.turn_id for h in hits] == ["t"]


# --- L1 ----------------------------------------------------------------------------------------


async def test_save_atomic_dedupes_normalized_content(backend: LocalBackend) -> None:
    first = await backend.memories.save("User hates magic numbers.", "preference", "user")
    again = await backend.memories.save("  user HATES   magic numbers ", "fact", "model")
    other = await backend.memories.save("User hates magic strings.", "preference", "user")
    assert first.created and not again.created and other.created
    assert again.id == first.id != other.id
    assert (await backend.status()).counts["atomic"] == 2


def test_content_key_folds_case_whitespace_and_punctuation() -> None:
    assert content_key("Use Go!") == content_key("use   go") == "use go"
    assert content_key("最讨厌魔法数字。") == content_key("最讨厌魔法数字")
    assert content_key("a.b") != content_key("ab")


async def test_save_atomic_validates_type_and_content(backend: LocalBackend) -> None:
    with pytest.raises(BackendRejected, match="type"):
        await backend.memories.save("x", "opinion", "user")
    with pytest.raises(BackendRejected, match="empty"):
        await backend.memories.save(" ... ", "fact", "user")
    with pytest.raises(BackendRejected, match="too long"):
        await backend.memories.save("x" * 20_000, "fact", "user")
    with pytest.raises(BackendRejected, match="type"):
        await backend.memories.search("x", 4, type="opinion")


async def test_search_atomic_ranks_and_filters_by_type(backend: LocalBackend) -> None:
    await backend.memories.save("后端用 Go，讨厌魔法数字", "preference", "user")
    await backend.memories.save("The payments service runs Go 1.21", "fact", "model")
    await backend.memories.save("Never force-push to main", "constraint", "user")
    found = await backend.memories.search("我讨厌什么？", 6)
    assert [m.content for m in found] == ["后端用 Go，讨厌魔法数字"]
    assert found[0].type == "preference" and found[0].source == "user" and found[0].score > 0
    both = await backend.memories.search("go", 6)
    assert len(both) == 2
    facts = await backend.memories.search("go", 6, type="fact")
    assert [m.type for m in facts] == ["fact"]
    assert facts[0].created_at.tzinfo is not None


# --- forget ------------------------------------------------------------------------------------


def _file_bytes(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in root.glob(f"{DB_FILENAME}*"))


async def test_delete_conversation_removes_rows_and_index_entries(backend: LocalBackend) -> None:
    await backend.conversation.add(
        [turn("secret", "my zebracorn password hint", "noted zebracorn"), turn("keep", "zebra notes", "fine")]
    )
    assert b"zebracorn" in _file_bytes(backend.root)
    report = await backend.conversation.delete(["secret", "missing"])
    assert report.deleted == ("secret",)
    assert report.failed == (("missing", "not found"),)
    assert await backend.conversation.search("zebracorn", 4) == []
    assert await backend.conversation.stored_ids(["secret", "keep"]) == {"keep"}
    with _db(backend.root) as conn:
        assert (
            conn.execute("SELECT count(*) FROM turns_fts WHERE turns_fts MATCH 'zebracorn'").fetchone()[0]
            == 0
        )
        conn.execute("CREATE VIRTUAL TABLE temp.vocab USING fts5vocab(main, turns_fts, 'row')")
        assert conn.execute("SELECT count(*) FROM temp.vocab WHERE term = 'zebracorn'").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM turns_df WHERE term = 'zebracorn'").fetchone()[0] == 0
        assert conn.execute("SELECT df FROM turns_df WHERE term = 'zebra'").fetchone()[0] == 1
    # no copy left anywhere in the files: rows, index segments, WAL
    assert b"zebracorn" not in _file_bytes(backend.root)


async def test_delete_atomic_removes_rows_and_index_entries(backend: LocalBackend) -> None:
    saved = await backend.memories.save("the quokkaphone codename is secret", "fact", "user")
    report = await backend.memories.delete([saved.id, "at-unknown"])
    assert report.deleted == (saved.id,)
    assert report.failed == (("at-unknown", "not found"),)
    assert await backend.memories.search("quokkaphone", 4) == []
    with _db(backend.root) as conn:
        assert (
            conn.execute("SELECT count(*) FROM atomic_fts WHERE atomic_fts MATCH 'quokkaphone'").fetchone()[0]
            == 0
        )
    assert b"quokkaphone" not in _file_bytes(backend.root)
    # the same content can be saved again afterwards
    assert (await backend.memories.save("the quokkaphone codename is secret", "fact", "user")).created


# --- L2 ----------------------------------------------------------------------------------------


def test_summary_prefers_front_matter_then_heading_then_paragraph() -> None:
    assert summarize("---\ntitle: x\nsummary: Go style rules\n---\n# Heading\n") == "Go style rules"
    assert summarize("---\ntitle: x\n---\n\n## Deploy convention\nbody") == "Deploy convention"
    assert summarize("\nFirst paragraph\ncontinues here.\n\nSecond") == "First paragraph continues here."
    assert summarize("") == ""


async def test_list_scenarios_walks_l2_and_tolerates_bad_files(backend: LocalBackend, tmp_path: Path) -> None:
    l2 = backend.root / "l2"
    backend.notes.write_scenario("backend/go-style.md", "---\nsummary: 后端 Go 代码风格\n---\n不要魔法数字\n")
    backend.notes.write_scenario("deploy.md", "# Deploy convention\nArgo CD only.\n")
    (l2 / "notes.txt").write_text("not markdown")
    (l2 / "binary.md").write_bytes(b"\x00\x01\x02")
    (l2 / "dir.md").mkdir()
    (l2 / "dangling.md").symlink_to(l2 / "nowhere.md")
    outside = tmp_path / "outside.md"
    outside.write_text("# Outside secret")
    (l2 / "escape.md").symlink_to(outside)
    (l2 / ".hidden").mkdir()
    (l2 / ".hidden" / "x.md").write_text("# hidden")

    entries = await backend.notes.list_scenarios()
    assert [(e.path, e.summary) for e in entries] == [
        ("deploy.md", "Deploy convention"),
        ("backend/go-style.md", "后端 Go 代码风格"),
    ]
    assert all(e.updated_at is not None and e.updated_at.tzinfo is not None for e in entries)
    problems = (await backend.status()).problems
    assert any("binary.md" in p for p in problems)
    assert any("escape.md" in p for p in problems)


async def test_list_scenarios_without_l2_folder_is_empty(backend: LocalBackend) -> None:
    assert await backend.notes.list_scenarios() == []


async def test_list_scenarios_sees_edits(backend: LocalBackend) -> None:
    backend.notes.write_scenario("a.md", "# First")
    assert (await backend.notes.list_scenarios())[0].summary == "First"
    path = backend.root / "l2" / "a.md"
    path.write_text("# Second title")
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 1_000_000_000))
    assert (await backend.notes.list_scenarios())[0].summary == "Second title"


async def test_read_scenario_returns_the_note(backend: LocalBackend) -> None:
    backend.notes.write_scenario("backend/go-style.md", "# Go style\nNo magic numbers.\n")
    note = await backend.notes.read_scenario("backend/go-style.md")
    assert note.path == "backend/go-style.md"
    assert note.summary == "Go style"
    assert "No magic numbers." in note.content
    assert (await backend.notes.read_scenario("./backend/go-style.md")).path == "backend/go-style.md"


@pytest.mark.parametrize(
    "bad",
    [
        "../profile.md",
        "/etc/passwd",
        "a/../../x.md",
        "..",
        "",
        "a\\..\\x.md",
        "notes.txt",
        "a\x00.md",
        ".git/x.md",
    ],
)
async def test_read_scenario_refuses_paths_leaving_l2(backend: LocalBackend, bad: str) -> None:
    backend.notes.write_profile("# profile")
    with pytest.raises(BackendRejected):
        await backend.notes.read_scenario(bad)
    with pytest.raises(BackendRejected):
        backend.notes.write_scenario(bad, "x")


async def test_read_scenario_refuses_symlinks_out_of_l2(backend: LocalBackend, tmp_path: Path) -> None:
    secret = tmp_path / "secret.md"
    secret.write_text("# secret")
    backend.notes.write_scenario("inside.md", "# inside")
    (backend.root / "l2" / "link.md").symlink_to(secret)
    (backend.root / "l2" / "linkdir").symlink_to(tmp_path)
    (backend.root / "l2" / "alias.md").symlink_to(backend.root / "l2" / "inside.md")
    with pytest.raises(BackendRejected, match="symlink"):
        await backend.notes.read_scenario("link.md")
    with pytest.raises(BackendRejected, match="symlink"):
        await backend.notes.read_scenario("linkdir/secret.md")
    assert (await backend.notes.read_scenario("alias.md")).summary == "inside"


async def test_a_symlink_loop_in_l2_is_skipped_by_the_listing_and_refused_by_a_read(
    backend: LocalBackend,
) -> None:
    backend.notes.write_scenario("deploy.md", "# Deploy convention\n")
    loop = backend.root / "l2" / "loop.md"
    loop.symlink_to(loop)
    assert [e.path for e in await backend.notes.list_scenarios()] == ["deploy.md"]
    assert any(p.startswith("l2/loop.md: skipped") for p in (await backend.status()).problems)
    with pytest.raises(BackendRejected, match="cannot be resolved"):
        await backend.notes.read_scenario("loop.md")
    with pytest.raises(BackendRejected, match="cannot be resolved"):
        backend.notes.write_scenario("loop.md", "# replaced")
    assert loop.is_symlink() and os.readlink(loop) == str(loop)


async def test_read_scenario_missing_note_is_rejected(backend: LocalBackend) -> None:
    with pytest.raises(BackendRejected, match="no scenario note"):
        await backend.notes.read_scenario("missing.md")


# --- L3 ----------------------------------------------------------------------------------------


async def test_profile_absent_blank_and_present(backend: LocalBackend) -> None:
    assert await backend.notes.read_profile() is None
    backend.notes.write_profile("  \n")
    assert await backend.notes.read_profile() is None
    backend.notes.write_profile("# Me\n后端工程师，用 Go。\n")
    profile = await backend.notes.read_profile()
    assert profile is not None and "用 Go" in profile.content


async def test_unreadable_profile_raises_a_backend_error(backend: LocalBackend) -> None:
    (backend.root / "profile.md").write_bytes(b"# ok\n\xff\xfe not utf-8")
    with pytest.raises(BackendCorrupt, match="UTF-8"):
        await backend.notes.read_profile()
    (backend.root / "profile.md").unlink()
    (backend.root / "profile.md").mkdir()
    with pytest.raises(BackendUnavailable, match="profile"):
        await backend.notes.read_profile()
    status = await backend.status()
    assert status.ok and any("profile" in p for p in status.problems)


# --- status ------------------------------------------------------------------------------------


async def test_status_counts_everything(backend: LocalBackend) -> None:
    await backend.conversation.add([turn("a", "x1"), turn("b", "x2")])
    await backend.memories.save("fact one", "fact", "user")
    backend.notes.write_scenario("s.md", "# S")
    backend.notes.write_profile("# P")
    status = await backend.status()
    assert status.ok and status.backend == "local" and status.problems == ()
    assert status.counts == {"turns": 2, "atomic": 1, "scenarios": 1, "profile": 1}


# --- damaged or busy stores ---------------------------------------------------------------------


def test_random_bytes_database_raises_corrupt_at_construction(tmp_path: Path) -> None:
    (tmp_path / DB_FILENAME).write_bytes(os.urandom(8192))
    with pytest.raises(BackendCorrupt, match="damaged"):
        LocalBackend(tmp_path)


async def test_truncated_database_raises_corrupt(tmp_path: Path) -> None:
    store = LocalBackend(tmp_path)
    await store.conversation.add(
        [turn(f"t{i}", f"turn number {i} " + "filler text " * 80) for i in range(300)]
    )
    await store.close()
    db = tmp_path / DB_FILENAME
    with db.open("r+b") as handle:
        handle.truncate(db.stat().st_size // 2)
    with pytest.raises(BackendCorrupt):
        reopened = LocalBackend(tmp_path)
        await reopened.conversation.search("filler number", 4)


async def test_damaged_index_makes_searches_raise_corrupt(backend: LocalBackend) -> None:
    await backend.conversation.add([turn(f"t{i}", f"deploy note {i} " * 20) for i in range(50)])
    with _db(backend.root) as conn:
        conn.execute("UPDATE turns_fts_data SET block = randomblob(length(block)) WHERE id > 10")
    with pytest.raises(BackendCorrupt):
        await backend.conversation.search("deploy note", 4)
    status = await backend.status()
    assert status.counts["turns"] == 50  # the rows themselves are fine


_LOCK_HOLDER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
if sys.argv[2] == "exclusive-mode":
    conn.execute("PRAGMA locking_mode = EXCLUSIVE")
conn.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
sys.stdin.read()
"""


@contextmanager
def lock_held_by_another_process(db: Path, mode: str) -> Iterator[None]:
    holder = subprocess.Popen(
        [sys.executable, "-c", _LOCK_HOLDER, str(db), mode],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        yield
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=10)


async def test_writes_past_busy_timeout_raise_unavailable_while_reads_go_on(backend: LocalBackend) -> None:
    await backend.conversation.add([turn("t1", "deploy with argo")])
    with lock_held_by_another_process(backend.root / DB_FILENAME, "write"):
        # it waits for the lock (busy_timeout) before giving up: that wait is measured in
        # bench/bench_bounds.py ("locked store gives up"), not here
        with pytest.raises(BackendUnavailable, match="locked"):
            await backend.conversation.add([turn("t2", "blocked")])
        with pytest.raises(BackendUnavailable):
            await backend.memories.save("blocked too", "fact", "user")
        # WAL: readers are not blocked by a writer
        assert [h.turn_id for h in await backend.conversation.search("argo", 4)] == ["t1"]
    await backend.conversation.add([turn("t2", "now it works")])
    assert await backend.conversation.stored_ids(["t2"]) == {"t2"}


async def test_opening_a_store_locked_exclusively_raises_unavailable(tmp_path: Path) -> None:
    await LocalBackend(tmp_path).close()
    with (
        lock_held_by_another_process(tmp_path / DB_FILENAME, "exclusive-mode"),
        pytest.raises(BackendUnavailable),
    ):
        LocalBackend(tmp_path, busy_timeout_ms=200)


# --- concurrency ---------------------------------------------------------------------------------


async def test_concurrent_async_calls_share_the_store(backend: LocalBackend) -> None:
    await backend.conversation.add([turn("seed", "我负责后端，用 Go，最讨厌魔法数字")])
    writes = [backend.conversation.add([turn(f"w{i}", f"concurrent write {i} 讨厌")]) for i in range(20)]
    reads = [backend.conversation.search("讨厌", 4) for _ in range(20)]
    results = await asyncio.gather(*writes, *reads)
    assert all(isinstance(r, list) and r for r in results[20:])
    assert (await backend.status()).counts["turns"] == 21


def test_two_threads_and_two_instances_write_and_read_together(tmp_path: Path) -> None:
    # Two LocalBackend instances on one directory stand for two Pi sessions (processes).
    stores = [LocalBackend(tmp_path, busy_timeout_ms=5000), LocalBackend(tmp_path, busy_timeout_ms=5000)]
    errors: list[BaseException] = []

    def writer(index: int) -> None:
        store = stores[index].store
        try:
            for i in range(60):
                store.conversation.add([turn(f"{index}-{i}", f"writer {index} message {i} 数据库 migration")])
                store.memories.save(f"fact {index}-{i}", "fact", "test")
                assert store.conversation.search("migration 数据库", 4)
        except BaseException as exc:
            errors.append(exc)

    def reader() -> None:
        try:
            for _ in range(120):
                stores[0].store.conversation.search("writer message", 4)
                stores[1].store.memories.search("fact", 4)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(0,)), threading.Thread(target=writer, args=(1,))]
    threads.append(threading.Thread(target=reader))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    counts = stores[0].store.counts()
    assert (counts.turns, counts.atomic) == (120, 120)
    for store in stores:
        asyncio.run(store.close())


# --- tokenizer upgrades ----------------------------------------------------------------------


async def test_a_store_indexed_by_another_tokenizer_version_is_reindexed(tmp_path: Path) -> None:
    store = LocalBackend(tmp_path)
    await store.conversation.add([turn("t", "最讨厌魔法数字", "noted")])
    await store.close()
    with _db(tmp_path) as conn:
        # what an older tokenizer might have left: other tokens, and an old version mark
        conn.execute("UPDATE turns SET user_tokens = 'stale', assistant_tokens = 'stale'")
        conn.execute("UPDATE meta SET value = '0' WHERE key = 'tokenizer_version'")
    reopened = LocalBackend(tmp_path)
    try:
        assert [h.turn_id for h in await reopened.conversation.search("讨厌", 4)] == ["t"]
        assert await reopened.conversation.search("stale", 4) == []
        with _db(tmp_path) as conn:
            assert conn.execute("SELECT count(*) FROM turns_df WHERE term = 'stale'").fetchone()[0] == 0
    finally:
        await reopened.close()
