"""Unit tests of the MemoryCore backend's parts: limits, timestamps, error classification, cache."""

from __future__ import annotations

import asyncio
import importlib
import json
import ssl
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memorycore_fake import FakeParamError, FakeTDAMError, fake_sdk_bindings
from pi_memory_bridge.backends.base import (
    BackendConfigError,
    BackendRejected,
    BackendUnavailable,
    ConversationTurn,
)
from pi_memory_bridge.backends.memorycore import (
    SDK_COMMIT,
    SDK_REQUIREMENT,
    MemoryCoreBackend,
    install_command,
    load_sdk,
    target_from_config,
)
from pi_memory_bridge.backends.memorycore._cache import TtlCache
from pi_memory_bridge.backends.memorycore._chunking import (
    BODY_BUDGET_BYTES,
    MAX_CONTENT_UNITS,
    MAX_MESSAGES_PER_ADD,
    L0Message,
    iso_ms,
    parse_iso_ms,
    plan_adds,
    sanitize,
    split_content,
    timestamp_ms,
    turn_created_ms,
    turn_messages,
    utf16_units,
)
from pi_memory_bridge.backends.memorycore._errors import classify_code, translate
from pi_memory_bridge.backends.memorycore._responses import ConversationSearchData, QueryData, parse
from pi_memory_bridge.config import load_config

T0 = datetime(2026, 11, 1, 12, 0, 0, 123000, tzinfo=UTC)
BASE_BODY = {"team_id": "team-x", "agent_id": "agt-x", "user_id": "usr-x", "session_id": "s-1"}


def turn(
    user: str, assistant: str, *, at: datetime = T0, turn_id: str = "t1", session: str = "s-1"
) -> ConversationTurn:
    return ConversationTurn(turn_id, session, user, assistant, at)


# ---- limits and splitting ------------------------------------------------------------------------


def test_utf16_units_count_astral_characters_twice() -> None:
    assert utf16_units("abc") == 3
    assert utf16_units("讨厌") == 2
    assert utf16_units("😀") == 2


def test_short_content_is_one_unmarked_part() -> None:
    assert split_content("x" * MAX_CONTENT_UNITS) == ["x" * MAX_CONTENT_UNITS]


def test_long_content_splits_into_marked_parts_that_fit() -> None:
    text = "line of code\n" * 2000  # 26,000 characters
    parts = split_content(text)
    assert len(parts) == 4
    assert [p.split("] ", 1)[0] + "]" for p in parts] == [f"[part {i}/4]" for i in range(1, 5)]
    assert all(utf16_units(p) <= MAX_CONTENT_UNITS for p in parts)
    assert "".join(p.split("] ", 1)[1] for p in parts) == text
    assert all(p.endswith("\n") for p in parts)  # cut at line ends when one is near


def test_splitting_never_cuts_a_surrogate_pair() -> None:
    text = "😀" * 9000  # 18,000 UTF-16 units
    parts = split_content(text)
    assert all(utf16_units(p) <= MAX_CONTENT_UNITS for p in parts)
    assert "".join(p.split("] ", 1)[1] for p in parts) == text


@settings(max_examples=60, deadline=None)
@given(
    st.text(alphabet=st.characters(exclude_categories=["Cs"]), min_size=0, max_size=30_000),
    st.integers(32, 9000),
)
def test_split_parts_fit_and_reassemble(text: str, limit: int) -> None:
    parts = split_content(text, limit)
    assert all(utf16_units(p) <= limit for p in parts)
    if len(parts) == 1:
        assert parts[0] == text
    else:
        bodies = [p.split("] ", 1)[1] for p in parts]
        assert all(bodies)
        assert "".join(bodies) == text


def test_sanitize_replaces_unpaired_surrogates_only() -> None:
    assert sanitize("ok 😀") == "ok 😀"
    assert sanitize("bad \ud800 end") == "bad \ufffd end"


# ---- deterministic timestamps --------------------------------------------------------------------


def test_iso_round_trip_matches_javascript_form() -> None:
    ms = timestamp_ms(T0)
    assert iso_ms(ms) == "2026-11-01T12:00:00.123Z"
    assert parse_iso_ms(iso_ms(ms)) == ms
    assert parse_iso_ms("2026-11-01T12:00:00Z") == ms - 123
    assert parse_iso_ms("garbage") is None
    assert parse_iso_ms(None) is None


def test_naive_created_at_counts_as_utc() -> None:
    assert timestamp_ms(T0.replace(tzinfo=None)) == timestamp_ms(T0)


def test_turn_messages_are_deterministic_with_per_message_offsets() -> None:
    t = turn("我负责后端，用 Go", "好的")
    first, again = turn_messages(t), turn_messages(t)
    assert first == again
    base = timestamp_ms(T0)
    assert [(m.role, m.timestamp_ms) for m in first] == [("user", base), ("assistant", base + 1)]
    assert first[0].wire() == {
        "role": "user",
        "content": "我负责后端，用 Go",
        "timestamp": "2026-11-01T12:00:00.123Z",
        "recorded_at": "2026-11-01T12:00:00.123Z",
    }


def test_split_turn_keeps_order_and_never_drops_text() -> None:
    t = turn("u" * 9000, "a" * 20_000)
    messages = turn_messages(t)
    roles = [m.role for m in messages]
    assert roles == ["user", "user", "assistant", "assistant", "assistant"]
    stamps = [m.timestamp_ms for m in messages]
    assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)
    assert sum(len(m.content.split("] ", 1)[1]) for m in messages if m.role == "assistant") == 20_000


def test_empty_sides_are_not_sent_and_offsets_stay_put() -> None:
    base = timestamp_ms(T0)
    only_assistant = turn_messages(turn("   ", "answer"))
    assert [(m.role, m.timestamp_ms) for m in only_assistant] == [("assistant", base + 1)]
    assert turn_messages(turn("", "")) == []


def test_turn_created_at_is_recovered_from_a_stored_message() -> None:
    base = timestamp_ms(T0)
    for m in turn_messages(turn("question", "a" * 20_000)):
        assert turn_created_ms(m.role, m.timestamp_ms, m.content) == base


# ---- request planning ----------------------------------------------------------------------------


def _encoded_sizes(batch: list[L0Message]) -> list[int]:
    body = {**BASE_BODY, "messages": [m.wire() for m in batch]}
    compact = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
    escaped = json.dumps(body).encode()
    return [len(compact), len(escaped)]


def test_plan_respects_the_message_count_limit_and_keeps_turns_whole() -> None:
    turns = [turn(f"q{i}", f"a{i}", at=T0 + timedelta(seconds=i), turn_id=f"t{i}") for i in range(130)]
    messages = [m for t in turns for m in turn_messages(t)]
    batches = plan_adds(messages, BASE_BODY)
    assert [len(b) for b in batches] == [100, 100, 60]
    assert [m for b in batches for m in b] == messages
    for b in batches:
        assert b[0].role == "user" and b[-1].role == "assistant"  # no turn cut in two


def test_plan_respects_the_body_limit_for_the_largest_messages() -> None:
    turns = [turn("讨" * 8000, "😀" * 4000, at=T0 + timedelta(seconds=i), turn_id=f"t{i}") for i in range(40)]
    messages = [m for t in turns for m in turn_messages(t)]
    batches = plan_adds(messages, BASE_BODY)
    assert len(batches) > 1
    assert [m for b in batches for m in b] == messages
    for b in batches:
        assert len(b) <= MAX_MESSAGES_PER_ADD
        assert max(_encoded_sizes(b)) <= BODY_BUDGET_BYTES < 1_048_576


def test_plan_of_nothing_is_no_request() -> None:
    assert plan_adds([], BASE_BODY) == []


# ---- error classification ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "message", "kind"),
    [
        (401, "Unauthorized: invalid token", BackendConfigError),
        (403, "belongs to a different user", BackendConfigError),
        (408, "timeout", BackendUnavailable),
        (429, "slow down", BackendUnavailable),
        (500, "Internal server error", BackendUnavailable),
        (503, "Store not available", BackendUnavailable),
        (400, "messages.0.content: Too big", BackendRejected),
        (404, "HTTP 404", BackendRejected),
        (413, "too large", BackendRejected),
        (415, "Unsupported Content-Encoding", BackendRejected),
        (422, "Tenancy isolation required", BackendRejected),
        (-1, "API response must be a JSON object", BackendUnavailable),
        (40001, "query: Too small", BackendRejected),
        (40301, "not owner", BackendConfigError),
        (40401, "skill not found", BackendRejected),
        (4291, "quota", BackendUnavailable),
        (50301, "queue unavailable", BackendUnavailable),
        (50302, "LLM unavailable", BackendUnavailable),
        (50303, "COS required", BackendConfigError),
        (50001, "agent_not_found", BackendConfigError),
        (50001, "something broke", BackendUnavailable),
    ],
)
def test_error_codes_map_onto_the_error_tree(code: int, message: str, kind: type[Exception]) -> None:
    assert classify_code(code, message) is kind
    translated = translate(FakeTDAMError(code, message, "req-1"), "conversation/search", fake_sdk_bindings())
    assert type(translated) is kind
    assert "req-1" in str(translated)


def test_a_retryable_conflict_is_transient() -> None:
    assert classify_code(409, "COS append conflict", {"retryable": True}) is BackendUnavailable
    assert classify_code(409, "duplicate") is BackendRejected


def test_transport_failures_are_transient_and_tls_failures_need_the_user() -> None:
    sdk = fake_sdk_bindings()
    assert isinstance(translate(TimeoutError(), "x", sdk), BackendUnavailable)
    reset = translate(ConnectionResetError(104, "Connection reset by peer"), "conversation/add", sdk)
    assert isinstance(reset, BackendUnavailable) and "1 MiB" in str(reset)
    assert isinstance(translate(ConnectionRefusedError(111, "refused"), "x", sdk), BackendUnavailable)
    wrapped = OSError("connect failed")
    wrapped.__cause__ = ssl.SSLCertVerificationError("certificate verify failed")
    assert isinstance(translate(wrapped, "x", sdk), BackendConfigError)
    assert isinstance(translate(FakeParamError("bad"), "x", sdk), BackendRejected)
    assert translate(KeyError("bug"), "x", sdk) is None  # programming errors are not disguised


def test_real_sdk_transport_errors_are_classified() -> None:
    httpx = pytest.importorskip("httpx", reason="httpx arrives with the SDK")
    pytest.importorskip("tencentdb_agent_memory.v3", reason="the MemoryCore SDK is not installed")
    sdk = load_sdk()
    request = httpx.Request("POST", "http://127.0.0.1:1/v3/conversation/add")
    assert isinstance(translate(httpx.ReadTimeout("t", request=request), "x", sdk), BackendUnavailable)
    assert isinstance(translate(httpx.ReadError("", request=request), "x", sdk), BackendUnavailable)
    assert isinstance(
        translate(httpx.RemoteProtocolError("gone", request=request), "x", sdk), BackendUnavailable
    )
    assert isinstance(
        translate(httpx.UnsupportedProtocol("ftp", request=request), "x", sdk), BackendConfigError
    )


# ---- response shapes -----------------------------------------------------------------------------


def test_a_response_of_the_wrong_shape_is_unavailable_with_a_clear_message() -> None:
    with pytest.raises(BackendUnavailable, match="unexpected shape"):
        parse(QueryData, {"messages": "nope"}, "conversation/query")
    with pytest.raises(BackendUnavailable, match="conversation/search"):
        parse(ConversationSearchData, {"messages": [{"id": 1}]}, "conversation/search")
    ok = parse(QueryData, {"messages": [], "total": 0, "extra": True}, "conversation/query")
    assert ok.total == 0


# ---- the SDK seam --------------------------------------------------------------------------------


def test_a_missing_sdk_is_a_config_error_with_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    real_import = importlib.import_module

    def no_sdk(name: str, package: str | None = None) -> Any:
        if name.startswith("tencentdb_agent_memory"):
            raise ModuleNotFoundError(f"No module named {name!r}")
        return real_import(name, package)

    monkeypatch.setattr(importlib, "import_module", no_sdk)
    with pytest.raises(BackendConfigError) as caught:
        load_sdk()
    assert install_command() in str(caught.value)
    assert SDK_COMMIT in SDK_REQUIREMENT and "#subdirectory=sdk/memory-core/python" in SDK_REQUIREMENT


def _config(tmp_path: Path, **env: str) -> Any:
    base = {
        "PI_MEMORY_BRIDGE_BACKEND": "memorycore",
        "TDAI_MEMORY_ENDPOINT": "http://127.0.0.1:18420",
        "TDAI_MEMORY_TEAM_ID": "team-a",
        "TDAI_MEMORY_AGENT_ID": "agt-a",
        "TDAI_MEMORY_USER_ID": "usr-a",
        "TDAI_MEMORY_GATEWAY_API_KEY": "synthetic-gateway-key",
        "TDAI_MEMORY_TIMEOUT_MS": "2500",
    }
    base.update(env)
    return load_config(
        agent_dir=tmp_path, cwd=None, project_trusted=False, env={k: v for k, v in base.items() if v}
    )


def test_target_comes_from_the_loaded_config(tmp_path: Path) -> None:
    target, credentials = target_from_config(_config(tmp_path))
    assert (target.endpoint, target.service_id, target.team_id, target.agent_id, target.user_id) == (
        "http://127.0.0.1:18420",
        "default",
        "team-a",
        "agt-a",
        "usr-a",
    )
    assert target.timeout_s == 2.5
    assert credentials.bearer.get_secret_value() == "synthetic-gateway-key"
    assert credentials.user_key is None


def test_incomplete_config_names_what_is_missing(tmp_path: Path) -> None:
    with pytest.raises(BackendConfigError, match=r"memorycore\.user_id.*gateway API key"):
        target_from_config(_config(tmp_path, TDAI_MEMORY_USER_ID="", TDAI_MEMORY_GATEWAY_API_KEY=""))


async def test_backend_builds_from_config_without_any_request(tmp_path: Path) -> None:
    backend = MemoryCoreBackend.from_config(_config(tmp_path), sdk=fake_sdk_bindings())
    try:
        assert backend.name == "memorycore"
        assert backend.target.team_id == "team-a"
    finally:
        await backend.close()


async def test_a_remote_plain_http_endpoint_is_refused(tmp_path: Path) -> None:
    from pi_memory_bridge.backends.memorycore import MemoryCoreTarget

    target = MemoryCoreTarget("http://memory.example.com", "default", "t", "a", "u")
    with pytest.raises(BackendConfigError, match="https"):
        MemoryCoreBackend.with_keys(target, gateway_api_key="k", sdk=fake_sdk_bindings())


# ---- cache ---------------------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def test_cache_serves_within_ttl_and_reloads_after() -> None:
    clock = Clock()
    cache: TtlCache[int] = TtlCache(60, clock=clock)
    loads = 0

    async def load() -> int:
        nonlocal loads
        loads += 1
        return loads

    assert await cache.get("k", load) == 1
    clock.now = 59.9
    assert await cache.get("k", load) == 1
    clock.now = 60.0
    assert await cache.get("k", load) == 2
    assert loads == 2


async def test_concurrent_misses_share_one_load_and_failures_are_not_cached() -> None:
    cache: TtlCache[str] = TtlCache(60, clock=Clock())
    started = asyncio.Event()
    release = asyncio.Event()
    loads = 0

    async def slow() -> str:
        nonlocal loads
        loads += 1
        started.set()
        await release.wait()
        return "v"

    first = asyncio.ensure_future(cache.get("k", slow))
    await started.wait()
    second = asyncio.ensure_future(cache.get("k", slow))
    release.set()
    assert list(await asyncio.gather(first, second)) == ["v", "v"]
    assert loads == 1

    async def broken() -> str:
        raise BackendUnavailable("down")

    with pytest.raises(BackendUnavailable):
        await cache.get("other", broken)
    assert await cache.get("other", slow) == "v"


async def test_a_caller_that_gives_up_does_not_cancel_the_shared_load() -> None:
    cache: TtlCache[str] = TtlCache(60, clock=Clock())
    release = asyncio.Event()

    async def slow() -> str:
        await release.wait()
        return "v"

    with pytest.raises(TimeoutError):
        await asyncio.wait_for(cache.get("k", slow), timeout=0.01)
    release.set()
    for _ in range(1000):  # the abandoned load still finishes in the background and fills the cache
        if cache.peek("k") is not None:
            break
        await asyncio.sleep(0)
    assert cache.peek("k") == "v"


async def test_ttl_zero_disables_caching() -> None:
    cache: TtlCache[int] = TtlCache(0, clock=Clock())
    calls = 0

    async def load() -> int:
        nonlocal calls
        calls += 1
        return calls

    assert [await cache.get("k", load) for _ in range(3)] == [1, 2, 3]
