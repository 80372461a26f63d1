"""The MemoryCore backend against a fake server that behaves as MemoryCore is documented to.

Every test runs twice: through the fake SDK (always; CI has no SDK) and through the real
official SDK over HTTP (skipped with a reason when `tencentdb_agent_memory` is not installed).
Both talk to `FakeMemoryCore` on 127.0.0.1.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from pydantic import SecretStr

from memorycore_fake import (
    FAKE_API_KEY,
    FAKE_USER_KEY,
    FakeMemoryCore,
    Fault,
    fake_sdk_bindings,
    serve,
)
from pi_memory_bridge.backends.base import (
    BackendConfigError,
    BackendRejected,
    BackendUnavailable,
    Capability,
    ConversationTurn,
    MemoryBackend,
)
from pi_memory_bridge.backends.memorycore import (
    MemoryCoreBackend,
    MemoryCoreCredentials,
    MemoryCoreTarget,
    SdkBindings,
    load_sdk,
)
from pi_memory_bridge.backends.memorycore._chunking import timestamp_ms
from pi_memory_bridge.recall import Layer, RecallBudget, recall

IDS = ("team-test", "agt-test", "usr-test")
T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(params=["fake-sdk", "real-sdk"])
def sdk(request: pytest.FixtureRequest) -> SdkBindings:
    if request.param == "fake-sdk":
        return fake_sdk_bindings()
    pytest.importorskip(
        "tencentdb_agent_memory.v3",
        reason="the MemoryCore SDK is not installed (`pi-memory-bridge install-sdk` installs it)",
    )
    return load_sdk()


@pytest.fixture
def core() -> FakeMemoryCore:
    return FakeMemoryCore()


@pytest.fixture
def url(core: FakeMemoryCore) -> Iterator[str]:
    with serve(core) as base:
        yield base


@pytest.fixture
def clock() -> Clock:
    return Clock()


def make_backend(
    url: str,
    sdk: SdkBindings,
    clock: Clock,
    *,
    key: str = FAKE_API_KEY,
    user_key: str | None = FAKE_USER_KEY,
    user: str = IDS[2],
    timeout_s: float = 5.0,
) -> MemoryCoreBackend:
    target = MemoryCoreTarget(url, "default", IDS[0], IDS[1], user, timeout_s=timeout_s)
    credentials = MemoryCoreCredentials(SecretStr(key), SecretStr(user_key) if user_key else None)
    return MemoryCoreBackend(target, credentials, sdk=sdk, clock=clock)


@pytest.fixture
async def backend(url: str, sdk: SdkBindings, clock: Clock) -> AsyncIterator[MemoryCoreBackend]:
    b = make_backend(url, sdk, clock)
    try:
        yield b
    finally:
        await b.close()


def turn(
    i: int, user: str | None = None, assistant: str | None = None, session: str = "mem-s1"
) -> ConversationTurn:
    return ConversationTurn(
        turn_id=f"turn-{session}-{i}",
        memory_session_id=session,
        user_text=user if user is not None else f"question {i}: how should the Go backend name constants?",
        assistant_text=assistant
        if assistant is not None
        else f"answer {i}: use named constants, no magic numbers",
        created_at=T0 + timedelta(seconds=10 * i),
    )


# ---- protocol and L0 writes ---------------------------------------------------------------------


async def test_it_is_a_memory_backend_with_the_layers_it_implements(backend: MemoryCoreBackend) -> None:
    assert isinstance(backend, MemoryBackend)
    assert Capability.SKILLS in backend.capabilities
    assert Capability.L1_SAVE not in backend.capabilities  # MemoryCore extracts L1 itself
    with pytest.raises(BackendRejected):
        await backend.memories.save("x", "fact", "user")


async def test_turns_are_stored_with_deterministic_utc_timestamps(
    backend: MemoryCoreBackend, core: FakeMemoryCore
) -> None:
    await backend.conversation.add([turn(0), turn(1)])
    rows = sorted(core.rows("mem-s1"), key=lambda r: r.timestamp_ms)
    assert [r.role for r in rows] == ["user", "assistant", "user", "assistant"]
    base = timestamp_ms(T0)
    assert [r.timestamp_ms for r in rows] == [base, base + 1, base + 10_000, base + 10_001]
    assert rows[0].recorded_at == "2026-11-01T12:00:00.000Z"
    assert (rows[0].team_id, rows[0].agent_id, rows[0].user_id) == IDS
    assert core.calls("/v3/conversation/add") == 1


async def test_l0_search_finds_a_turn_and_pairs_its_messages(backend: MemoryCoreBackend) -> None:
    await backend.conversation.add(
        [turn(0, "我负责后端，用 Go，最讨厌魔法数字", "记住了：后端用 Go，讨厌魔法数字")]
    )
    hits = await backend.conversation.search("讨厌魔法数字", 4)
    assert len(hits) == 1
    hit = hits[0]
    assert hit.user_text == "我负责后端，用 Go，最讨厌魔法数字"
    assert hit.assistant_text == "记住了：后端用 Go，讨厌魔法数字"
    assert hit.created_at == T0  # so recall can tell a live-context turn
    assert hit.turn_id.count("msg-") == 2


async def test_a_redelivery_stores_nothing_twice(backend: MemoryCoreBackend, core: FakeMemoryCore) -> None:
    turns = [turn(i) for i in range(3)]
    await backend.conversation.add(turns)
    await backend.conversation.add(turns)
    assert len(core.rows()) == 6
    assert core.calls("/v3/conversation/add") == 1
    assert await backend.conversation.stored_ids([t.turn_id for t in turns] + ["never-seen"]) == {
        t.turn_id for t in turns
    }


async def test_a_first_attempt_skips_the_redelivery_check(
    backend: MemoryCoreBackend, core: FakeMemoryCore
) -> None:
    await backend.conversation.add([turn(0), turn(1)], first_attempt=True)
    assert core.calls("/v3/conversation/query") == 0
    assert core.calls("/v3/conversation/add") == 1
    assert len(core.rows()) == 4
    # Without the promise the check runs, and a resend stores nothing twice.
    await backend.conversation.add([turn(0), turn(1)])
    assert core.calls("/v3/conversation/query") == 1
    assert len(core.rows()) == 4


async def test_a_lost_response_is_recognised_on_redelivery(
    backend: MemoryCoreBackend, core: FakeMemoryCore
) -> None:
    turns = [turn(0), turn(1)]
    core.inject(Fault("/v3/conversation/add", "drop"))  # stored, but the answer never arrives
    with pytest.raises(BackendUnavailable):
        await backend.conversation.add(turns)
    assert len(core.rows()) == 4
    assert await backend.conversation.stored(turns) == {t.turn_id for t in turns}
    await backend.conversation.add(turns)
    assert len(core.rows()) == 4


async def test_the_check_works_for_turns_another_process_sent(
    backend: MemoryCoreBackend, url: str, sdk: SdkBindings, clock: Clock
) -> None:
    sent, unsent = turn(0), turn(1)
    other = make_backend(url, sdk, clock)
    try:
        await other.conversation.add([sent])
    finally:
        await other.close()
    assert await backend.conversation.stored_ids([sent.turn_id]) == set()  # this process never saw it
    assert await backend.conversation.stored([sent, unsent]) == {sent.turn_id}


async def test_an_interrupted_batch_resumes_without_duplicates(
    backend: MemoryCoreBackend, core: FakeMemoryCore
) -> None:
    turns = [turn(i) for i in range(60)]  # 120 messages: two adds
    core.inject(Fault("/v3/conversation/add", "delay"), Fault("/v3/conversation/add", "reset"))
    with pytest.raises(BackendUnavailable):
        await backend.conversation.add(turns)
    assert len(core.rows()) == 100
    stored = await backend.conversation.stored(turns)
    assert stored == {t.turn_id for t in turns[:50]}
    await backend.conversation.add(turns)
    rows = core.rows()
    assert len(rows) == 120
    assert len({(r.timestamp_ms, r.role, r.content) for r in rows}) == 120


async def test_identical_turns_in_other_sessions_are_not_mistaken_for_stored(
    backend: MemoryCoreBackend, core: FakeMemoryCore
) -> None:
    first = turn(0, session="mem-a")
    twin = replace(first, turn_id="twin", memory_session_id="mem-b")
    await backend.conversation.add([first])
    assert await backend.conversation.stored([twin]) == set()
    await backend.conversation.add([twin])
    assert len(core.rows("mem-b")) == 2


async def test_many_turns_are_batched_into_adds_of_at_most_100_messages(
    backend: MemoryCoreBackend, core: FakeMemoryCore
) -> None:
    turns = [turn(i) for i in range(130)] + [turn(i, session="mem-s2") for i in range(5)]
    await backend.conversation.add(turns)
    assert len(core.rows("mem-s1")) == 260 and len(core.rows("mem-s2")) == 10
    assert core.calls("/v3/conversation/add") == 4  # 100 + 100 + 60, and 10
    assert all(r.status == 200 for r in core.requests)


async def test_long_messages_are_split_never_dropped(
    backend: MemoryCoreBackend, core: FakeMemoryCore
) -> None:
    answer = "".join(f"line {i}: some log output 😀\n" for i in range(900))  # ~27,000 characters
    await backend.conversation.add([turn(0, "show me the log", answer)])
    parts = sorted((r for r in core.rows() if r.role == "assistant"), key=lambda r: r.timestamp_ms)
    assert len(parts) == 4
    assert "".join(p.content.split("] ", 1)[1] for p in parts) == answer
    await backend.conversation.add([turn(0, "show me the log", answer)])
    assert len(core.rows()) == 5


async def test_huge_turns_stay_under_the_body_limit(backend: MemoryCoreBackend, core: FakeMemoryCore) -> None:
    turns = [turn(i, "讨" * 8000, "😀" * 4000) for i in range(30)]
    await backend.conversation.add(turns)
    assert len(core.rows()) == 60
    adds = [r for r in core.requests if r.path == "/v3/conversation/add"]
    assert len(adds) > 1
    assert all(r.status == 200 and r.body_bytes <= 1_048_576 for r in adds)


async def test_the_fake_enforces_the_documented_limits(backend: MemoryCoreBackend) -> None:
    memory = backend._clients.memory
    one = {"role": "user", "content": "x"}
    with pytest.raises(BackendRejected, match="100"):
        await backend._call("add", lambda: memory.add_conversation([one] * 101, session_id="s"))
    with pytest.raises(BackendRejected, match="8192"):
        await backend._call(
            "add", lambda: memory.add_conversation([{**one, "content": "x" * 8193}], session_id="s")
        )
    with pytest.raises(BackendRejected, match="role"):
        await backend._call(
            "add", lambda: memory.add_conversation([{**one, "role": "system"}], session_id="s")
        )
    with pytest.raises(BackendRejected, match="timestamp"):
        bad_time = {**one, "timestamp": "2026-11-01T12:00:00+08:00"}
        await backend._call("add", lambda: memory.add_conversation([bad_time], session_id="s"))
    with pytest.raises(BackendRejected, match="40001"):  # a skill error: HTTP 200, code 40001
        await backend._call("skill/search", lambda: backend._clients.skills.search("go", top_k=51))
    huge = [{"role": "user", "content": "讨" * 8000}] * 50  # 1.2 MB: a reset, not a 413
    with pytest.raises(BackendUnavailable, match="1 MiB"):
        await backend._call("conversation/add", lambda: memory.add_conversation(huge, session_id="s"))


# ---- reads ---------------------------------------------------------------------------------------


async def test_l1_search_maps_items_and_other_users_see_nothing(
    backend: MemoryCoreBackend, core: FakeMemoryCore, url: str, sdk: SdkBindings, clock: Clock
) -> None:
    core.add_atomic(IDS, "The user hates magic numbers in Go code", "work_fact")
    found = await backend.memories.search("magic numbers", 6)
    assert [(m.type, m.content, m.source) for m in found] == [
        ("work_fact", "The user hates magic numbers in Go code", "scene")
    ]
    stranger = make_backend(url, sdk, clock, user="usr-other")
    try:
        assert await stranger.memories.search("magic numbers", 6) == []
        assert await stranger.conversation.search("magic numbers", 4) == []
    finally:
        await stranger.close()


async def test_l1_is_listed_by_pages_and_by_id_but_never_edited(
    backend: MemoryCoreBackend, core: FakeMemoryCore
) -> None:
    ids = [core.add_atomic(IDS, f"listed memory {i}") for i in range(3)]
    listed = await backend.memories.list(10)
    assert sorted(m.id for m in listed) == sorted(ids)
    assert len(await backend.memories.list(2)) == 2
    assert [m.id for m in await backend.memories.list(10, ids=[ids[1]])] == [ids[1]]
    assert Capability.L1_LIST in backend.capabilities
    assert Capability.L1_UPDATE not in backend.capabilities  # atomic/update is broken on standalone
    with pytest.raises(BackendRejected, match="cannot be edited"):
        await backend.memories.update(ids[0], "changed")
    assert core.calls("/v3/atomic/update") == 0


async def test_empty_queries_and_zero_limits_make_no_request(
    backend: MemoryCoreBackend, core: FakeMemoryCore
) -> None:
    assert await backend.conversation.search("   ", 4) == []
    assert await backend.memories.search("x", 0) == []
    assert await backend.search_skills("", 5) == []
    assert core.requests == []


async def test_overlong_queries_are_clipped_to_the_server_limit(backend: MemoryCoreBackend) -> None:
    assert await backend.conversation.search("go " * 2000, 4) == []  # 6000 chars would be a 400


async def test_l2_listing_and_notes_are_cached_for_the_ttl(
    backend: MemoryCoreBackend, core: FakeMemoryCore, clock: Clock
) -> None:
    meta = "-----META-START-----\ncreated: 2026-11-01\nupdated: 2026-11-01\n-----META-END-----\n"
    body = meta + "# Go style\nNamed constants."
    core.put_scenario(IDS[0], IDS[1], "backend/go-style.md", body, "Go backend style")
    listed = await backend.notes.list_scenarios()
    assert [(e.path, e.summary) for e in listed] == [("backend/go-style.md", "Go backend style")]  # no dirs
    note = await backend.notes.read_scenario("backend/go-style.md")
    assert note.content == "# Go style\nNamed constants."
    assert note.summary == "Go backend style"
    await backend.notes.list_scenarios()
    await backend.notes.read_scenario("backend/go-style.md")
    assert (core.calls("/v3/scenario/ls"), core.calls("/v3/scenario/read")) == (1, 1)

    core.put_scenario(IDS[0], IDS[1], "backend/go-style.md", "# Go style v2", "Go backend style")
    clock.now += 61
    await backend.notes.list_scenarios()
    assert (await backend.notes.read_scenario("backend/go-style.md")).content == "# Go style v2"
    assert (core.calls("/v3/scenario/ls"), core.calls("/v3/scenario/read")) == (2, 2)


async def test_a_missing_or_unsafe_scenario_read_raises_for_that_file(backend: MemoryCoreBackend) -> None:
    with pytest.raises(BackendRejected, match="does not exist"):
        await backend.notes.read_scenario("gone.md")
    with pytest.raises(BackendRejected):
        await backend.notes.read_scenario("../etc/passwd")


async def test_l3_profile_is_cached_and_absent_when_empty(
    backend: MemoryCoreBackend, core: FakeMemoryCore, clock: Clock
) -> None:
    assert await backend.notes.read_profile() is None
    core.put_core(IDS[0], IDS[1], "Backend engineer. Writes Go. Hates magic numbers.")
    assert await backend.notes.read_profile() is None  # still the cached answer
    clock.now += 61
    profile = await backend.notes.read_profile()
    assert profile is not None and "Hates magic numbers" in profile.content
    assert core.calls("/v3/core/read") == 2


async def test_the_generated_scene_navigation_is_cut_from_the_profile(
    backend: MemoryCoreBackend, core: FakeMemoryCore
) -> None:
    navigation = (
        "\n\n---\n## 🗺️ Scene Navigation (Scene Index)\n### Path: scene_blocks/go.md\n📌 使用说明：read it\n"
    )
    core.put_core(IDS[0], IDS[1], "# Persona\nBackend engineer." + navigation)
    profile = await backend.notes.read_profile()
    assert profile is not None and profile.content == "# Persona\nBackend engineer."


async def test_skill_search_returns_ids_and_clean_snippets(
    backend: MemoryCoreBackend, core: FakeMemoryCore
) -> None:
    skill_id = core.put_skill(IDS[0], IDS[1], "go-constants", "Replace magic numbers with named Go constants")
    hits = await backend.search_skills("magic numbers constants", 5)
    assert [(h.id, h.name) for h in hits] == [(skill_id, "go-constants")]
    assert "<mark>" not in hits[0].snippet and "go-constants" in hits[0].snippet


async def test_recall_over_the_backend_uses_every_layer_and_skips_the_live_turn(
    backend: MemoryCoreBackend, core: FakeMemoryCore
) -> None:
    live = turn(0, "I write the backend in Go and hate magic numbers", "Noted: Go, no magic numbers")
    older = replace(
        turn(1, "Go backend constants question", "Use named constants in Go"),
        created_at=T0 - timedelta(days=3),
    )
    await backend.conversation.add([live, older])
    core.add_atomic(IDS, "Hates magic numbers in Go code")
    core.put_scenario(IDS[0], IDS[1], "go/style.md", "Use named constants.", "Go backend style")
    core.put_core(IDS[0], IDS[1], "Backend engineer who writes Go.")
    core.put_skill(IDS[0], IDS[1], "go-constants", "Named constants for Go backend code")
    outcome = await recall(
        backend,
        "what Go backend style do I prefer about magic numbers?",
        RecallBudget(),
        live_user_timestamps=frozenset({timestamp_ms(live.created_at)}),
    )
    assert outcome.block is not None
    states = {r.layer: r.state for r in outcome.layers}
    assert states == {layer: "ok" for layer in (Layer.L3, Layer.L1, Layer.L2, Layer.L0, Layer.SKILL)}
    assert "Use named constants in Go" in outcome.block
    assert "Noted: Go, no magic numbers" not in outcome.block  # already in the live context


# ---- deletes and status --------------------------------------------------------------------------


async def test_forget_deletes_exactly_what_it_reports(
    backend: MemoryCoreBackend, core: FakeMemoryCore
) -> None:
    await backend.conversation.add([turn(0, "secret token talk", "never store a secret token")])
    memory_id = core.add_atomic(IDS, "secret token policy")
    hits = await backend.conversation.search("secret token", 4)
    report = await backend.conversation.delete([hits[0].turn_id, "msg-000000000000"])
    assert report.deleted == (hits[0].turn_id,)
    assert [i for i, _ in report.failed] == ["msg-000000000000"]
    assert core.rows() == []
    atomic = await backend.memories.delete([memory_id, memory_id, "m_unknown"])
    assert atomic.deleted == (memory_id,) and [i for i, _ in atomic.failed] == ["m_unknown"]
    assert await backend.memories.search("secret token", 6) == []


async def test_a_delete_the_server_refuses_is_named_with_its_reason_and_the_others_go(
    backend: MemoryCoreBackend, core: FakeMemoryCore
) -> None:
    first, second = core.add_atomic(IDS, "secret token policy"), core.add_atomic(IDS, "deploy on fridays")
    core.inject(Fault("/v3/atomic/delete", "envelope", status=400, code=400, message="refused for the test"))
    report = await backend.memories.delete([first, second])  # one request per id: the first is refused
    assert len(report.deleted) == 1 and len(report.failed) == 1
    (failed_id, reason), gone = report.failed[0], report.deleted[0]
    assert {failed_id, gone} == {first, second} and "refused for the test" in reason
    assert [r.id for r in core.l1] == [failed_id]


async def test_status_verifies_keys_and_counts(backend: MemoryCoreBackend, core: FakeMemoryCore) -> None:
    await backend.conversation.add([turn(0)])
    core.add_atomic(IDS, "fact one")
    core.put_scenario(IDS[0], IDS[1], "a.md", "x")
    status = await backend.status()
    assert status.ok, status.problems
    assert status.counts == {"turns": 2, "atomic": 1, "scenarios": 1, "profile": 0}
    assert FAKE_API_KEY not in status.detail and IDS[2] in status.detail


async def test_status_reports_a_wrong_key_instead_of_raising(
    url: str, sdk: SdkBindings, clock: Clock
) -> None:
    b = make_backend(url, sdk, clock, key="wrong-key")
    try:
        status = await b.status()
        assert not status.ok
        assert any("401" in p and "gateway API key" in p for p in status.problems)
        assert "wrong-key" not in " ".join(status.problems)
        with pytest.raises(BackendConfigError, match="401"):
            await b.conversation.search("anything", 4)
    finally:
        await b.close()


async def test_status_reports_an_invalid_user_key(url: str, sdk: SdkBindings, clock: Clock) -> None:
    b = make_backend(url, sdk, clock, user_key="sk-mem-not-a-real-key")
    try:
        status = await b.status()
        assert not status.ok
        assert status.problems == ("the MemoryCore user key is not valid on this server",)
    finally:
        await b.close()


# ---- error classification over the wire ----------------------------------------------------------

GARBAGE_SHAPE = json.dumps({"code": 0, "message": "ok", "data": {"messages": "not a list"}}).encode()


@pytest.mark.parametrize(
    ("fault", "kind"),
    [
        (Fault("/v3/conversation/search", "envelope", status=401), BackendConfigError),
        (Fault("/v3/conversation/search", "envelope", status=403), BackendConfigError),
        (Fault("/v3/conversation/search", "envelope", status=408), BackendUnavailable),
        (Fault("/v3/conversation/search", "envelope", status=429), BackendUnavailable),
        (Fault("/v3/conversation/search", "envelope", status=500), BackendUnavailable),
        (Fault("/v3/conversation/search", "envelope", status=503), BackendUnavailable),
        (Fault("/v3/conversation/search", "envelope", status=400), BackendRejected),
        (Fault("/v3/conversation/search", "envelope", status=404), BackendRejected),
        (Fault("/v3/conversation/search", "envelope", status=413), BackendRejected),
        (Fault("/v3/conversation/search", "envelope", status=422), BackendRejected),
        (
            Fault("/v3/conversation/search", "garbage", status=200, body=b"<html>proxy</html>"),
            BackendUnavailable,
        ),
        (
            Fault("/v3/conversation/search", "garbage", status=502, body=b"<html>bad gateway</html>"),
            BackendUnavailable,
        ),
        (Fault("/v3/conversation/search", "garbage", status=200, body=b"[1, 2]"), BackendUnavailable),
        (Fault("/v3/conversation/search", "garbage", status=200, body=GARBAGE_SHAPE), BackendUnavailable),
        (Fault("/v3/conversation/search", "reset"), BackendUnavailable),
    ],
    ids=lambda v: f"{v.kind}-{v.status}" if isinstance(v, Fault) else v.__name__,
)
async def test_data_plane_failures_are_classified(
    backend: MemoryCoreBackend, core: FakeMemoryCore, fault: Fault, kind: type[Exception]
) -> None:
    core.inject(fault)
    with pytest.raises(kind) as caught:
        await backend.conversation.search("magic numbers", 4)
    assert type(caught.value) is kind


@pytest.mark.parametrize(
    ("code", "kind"),
    [
        (40001, BackendRejected),
        (40302, BackendConfigError),
        (50302, BackendUnavailable),
        (4291, BackendUnavailable),
    ],
)
async def test_skill_errors_arriving_as_http_200_are_classified(
    backend: MemoryCoreBackend, core: FakeMemoryCore, code: int, kind: type[Exception]
) -> None:
    core.inject(Fault("/v3/skill/search", "envelope", status=200, code=code))
    with pytest.raises(kind, match=str(code)):
        await backend.search_skills("go constants", 5)


async def test_a_slow_server_is_a_timeout(
    url: str, sdk: SdkBindings, clock: Clock, core: FakeMemoryCore
) -> None:
    b = make_backend(url, sdk, clock, timeout_s=0.2)
    core.inject(Fault("/v3/atomic/search", "delay", delay_s=0.8))
    try:
        with pytest.raises(BackendUnavailable, match="timed out"):
            await b.memories.search("anything", 4)
    finally:
        await b.close()


async def test_an_unreachable_server_is_unavailable(sdk: SdkBindings, clock: Clock) -> None:
    b = make_backend("http://127.0.0.1:9", sdk, clock)
    try:
        with pytest.raises(BackendUnavailable):
            await b.notes.read_profile()
    finally:
        await b.close()
