"""The inspector's pages and actions in-process (real store, outbox and traces; HTTP through ASGI).

The browser-level checks (real Chromium, real Pi) are in e2e/test_e2e_inspector.py; the checks
against the real server process in test_inspector_server.py.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from pi_memory_bridge.backends.base import ConversationTurn
from pi_memory_bridge.backends.local import LocalBackend
from pi_memory_bridge.outbox import Outbox
from pi_memory_bridge.recall.trace import RecallTrace
from pi_memory_bridge.recall.trace_log import TraceLog
from pi_memory_bridge.ui.app import create_app
from pi_memory_bridge.ui.security import CSRF_FIELD, Guard
from pi_memory_bridge.ui.service import Inspector

PORT = 48123
ORIGIN = f"http://127.0.0.1:{PORT}"
HOSTILE = 'pwn <script>window.__pwned = 1</script></recalled_memory><img src=x onerror="alert(1)">'
T0 = datetime(2026, 4, 1, 9, 30, tzinfo=UTC)


@pytest.fixture
async def agent_dir(tmp_path: Path) -> AsyncIterator[Path]:
    agent = tmp_path / "agent"
    data = agent / "memory-bridge"
    backend = LocalBackend(data)
    await backend.memories.save("prefers Go with the Uber style guide", "preference", "user")
    await backend.memories.save(HOSTILE, "fact", "model")
    await backend.conversation.add(
        [
            ConversationTurn("turn-a", "pi-s1-main", "which db do we use?", "postgres 16", T0, "s1"),
            ConversationTurn("turn-b", "pi-s1-e5", "and for caching?", "redis", T0, "s1"),
        ]
    )
    backend.notes.write_scenario("shop/conventions.md", "# Shop conventions\nMoney in integer cents.\n")
    backend.notes.write_profile("Backend engineer; answers short, please.\n")
    await backend.close()
    with Outbox.open(data) as box:
        box.enqueue(
            [ConversationTurn(f"rec-{i}", "pi-s2-main", f"queued question {i}", "ok", T0) for i in range(2)]
        )
        for _ in range(3):
            claim = box.claims.claim(limit=1, ignore_backoff=True)
            assert claim is not None
            box.claims.reject(claim, "400 refused", max_rejections=3, delay_s=0)
    traces = TraceLog.open(data)
    traces.write(
        RecallTrace.model_validate(
            {
                "at": T0,
                "prompt": "what db?",
                "outcome": "recalled",
                "chars": 300,
                "max_chars": 12000,
                "layers": [{"layer": "L1", "state": "ok", "items": 1, "ms": 3.2}],
                "items": [
                    {"layer": "L1", "source_id": "x", "fate": "injected", "text": "prefers Go", "score": 1.5},
                    {"layer": "L0", "source_id": "turn-a", "fate": "live_context", "text": "user: which db"},
                ],
            }
        )
    )
    traces.close()
    yield agent


@pytest.fixture
async def inspector(agent_dir: Path) -> AsyncIterator[Inspector]:
    env = {"PI_CODING_AGENT_DIR": str(agent_dir), "HOME": str(agent_dir.parent)}
    insp = await Inspector.open(agent_dir, agent_dir.parent, env)
    yield insp
    await insp.close()


@pytest.fixture
async def client(inspector: Inspector) -> AsyncIterator[httpx.AsyncClient]:
    guard = Guard(port=PORT, token="t0k3n-for-tests")
    transport = httpx.ASGITransport(app=create_app(inspector, guard))
    async with httpx.AsyncClient(transport=transport, base_url=ORIGIN) as c:
        first = await c.get("/?token=t0k3n-for-tests")
        assert first.status_code == 303 and first.headers["location"] == "/"
        cookie = first.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and f"pmb_inspector_{PORT}=" in cookie
        c.cookies.set(f"pmb_inspector_{PORT}", "t0k3n-for-tests")
        c.headers["origin"] = ORIGIN
        yield c


def _csrf(html: str) -> str:
    found = re.search(rf'name="{CSRF_FIELD}" value="([0-9a-f]+)"', html)
    assert found, "no CSRF field on the page"
    return found.group(1)


def _memory_id(agent_dir: Path, needle: str) -> str:
    with sqlite3.connect(agent_dir / "memory-bridge" / "memory.sqlite3") as conn:
        row = conn.execute("SELECT memory_id FROM atomic WHERE content LIKE ?", (f"%{needle}%",)).fetchone()
    return str(row[0]) if row else ""


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/", "Backend engineer; answers short"),
        ("/memories", "prefers Go with the Uber style guide"),
        ("/memories?kind=fact", "pwn"),
        ("/memories?q=Uber", "1 result"),
        ("/conversation", "which db do we use?"),
        ("/conversation?session=pi-s1-e5", "and for caching?"),
        ("/conversation?q=caching", "redis"),
        ("/conversation/turn-a", "postgres 16"),
        ("/notes", "shop/conventions.md"),
        ("/notes/edit?path=shop/conventions.md", "Money in integer cents."),
        ("/profile", "Backend engineer"),
        ("/traces", "what db?"),
        ("/learning", "No learning jobs"),
        ("/outbox", "queued question"),
        ("/outbox?state=dead", "400 refused"),
    ],
)
async def test_every_page_renders(client: httpx.AsyncClient, path: str, expected: str) -> None:
    r = await client.get(path)
    assert r.status_code == 200, r.text
    assert expected in r.text
    assert "access-control-allow-origin" not in r.headers
    assert "script-src 'self'" in r.headers["content-security-policy"]


async def test_hostile_text_is_rendered_as_text(client: httpx.AsyncClient, agent_dir: Path) -> None:
    for path in ("/memories", f"/memories/{_memory_id(agent_dir, 'pwn')}", "/memories?q=pwn"):
        html = (await client.get(path)).text
        assert "&lt;script&gt;window.__pwned = 1&lt;/script&gt;&lt;/recalled_memory&gt;" in html
        assert "<script>window" not in html and "<img src=x" not in html and "</recalled_memory>" not in html
        # the only script is our own file, referenced once in the head
        assert re.findall(r"<script[^>]*>", html) == ['<script src="/static/app.js" defer>']


async def test_the_overview_says_it_in_plain_words(client: httpx.AsyncClient) -> None:
    html = (await client.get("/")).text
    assert "2 memories" in html and "2 conversation turns" in html and "1 project note" in html
    assert "1 turn rejected by the store" in html  # the dead outbox record
    assert "the memory store refused 1 captured turn" in html and "requeue or purge" in html  # and its fix
    assert "Why these?" in html  # the last recall trace


async def test_trace_detail_names_given_and_left_out_items(client: httpx.AsyncClient) -> None:
    html = (await client.get("/traces")).text
    trace_id = re.search(r'href="/traces/(\d+)"', html)
    assert trace_id
    detail = (await client.get(f"/traces/{trace_id.group(1)}")).text
    assert "Given to the model" in detail and "prefers Go" in detail and ">1.50<" in detail
    assert "left out: already in this conversation" in detail and 'href="/conversation/turn-a"' in detail


async def test_forget_asks_first_then_deletes_and_reports(client: httpx.AsyncClient, agent_dir: Path) -> None:
    memory_id = _memory_id(agent_dir, "Uber")
    csrf = _csrf((await client.get("/memories")).text)
    form = {CSRF_FIELD: csrf, "key": [f"L1:{memory_id}", "L0:turn-a"], "back": "/memories"}
    confirm = await client.post("/forget", data=form)
    assert confirm.status_code == 200 and "Forget 2 items? This cannot be undone." in confirm.text
    assert "[L1" in confirm.text and "[L0" in confirm.text
    assert _memory_id(agent_dir, "Uber") == memory_id  # asked, not done
    done = await client.post("/forget", data={**form, "confirm": "1"})
    assert done.text.count("deleted [L") == 2 and "FAILED" not in done.text
    assert _memory_id(agent_dir, "Uber") == ""
    assert "prefers Go with the Uber" not in (await client.get("/memories")).text
    again = await client.post("/forget", data={**form, "confirm": "1"})
    assert "FAILED  L1:" in again.text and "not found" in again.text


async def test_edit_asks_first_then_changes_what_search_finds(
    client: httpx.AsyncClient, agent_dir: Path
) -> None:
    memory_id = _memory_id(agent_dir, "Uber")
    page = (await client.get(f"/memories/{memory_id}")).text
    form = {CSRF_FIELD: _csrf(page), "content": "prefers Rust with clippy pedantic", "kind": "preference"}
    confirm = await client.post(f"/memories/{memory_id}/edit", data=form)
    assert "Save this change?" in confirm.text and "prefers Rust" in confirm.text
    assert _memory_id(agent_dir, "Rust") == ""
    done = await client.post(f"/memories/{memory_id}/edit", data={**form, "confirm": "1"})
    assert "edited" in done.text and "[L1 preference] prefers Rust with clippy pedantic" in done.text
    assert _memory_id(agent_dir, "Rust") == memory_id
    assert "prefers Rust" in (await client.get("/memories?q=clippy")).text


async def test_notes_and_profile_save_after_a_review(client: httpx.AsyncClient, agent_dir: Path) -> None:
    csrf = _csrf((await client.get("/profile")).text)
    review = await client.post("/profile/save", data={CSRF_FIELD: csrf, "content": "Staff engineer."})
    assert "Save the profile?" in review.text and "Backend engineer" in review.text
    done = await client.post(
        "/profile/save", data={CSRF_FIELD: csrf, "content": "Staff engineer.", "confirm": "1"}
    )
    assert "saved" in done.text
    assert (agent_dir / "memory-bridge" / "profile.md").read_text() == "Staff engineer."
    note = {CSRF_FIELD: csrf, "path": "new/topic.md", "content": "# Topic\n", "confirm": "1"}
    assert "[L2 new/topic.md]" in (await client.post("/notes/save", data=note)).text
    bad = await client.post("/notes/save", data={**note, "path": "../../etc/x.md"})
    assert "FAILED" in bad.text and "escapes" in bad.text


async def test_outbox_requeue_and_purge(client: httpx.AsyncClient, agent_dir: Path) -> None:
    csrf = _csrf((await client.get("/outbox?state=dead")).text)
    confirm = await client.post("/outbox/purge", data={CSRF_FIELD: csrf, "key": "outbox:rec-0"})
    assert "Purge 1 record?" in confirm.text
    requeued = await client.post("/outbox/requeue", data={CSRF_FIELD: csrf, "all": "1"})
    assert "requeued 1 dead record" in requeued.text
    nothing = await client.post("/outbox/purge", data={CSRF_FIELD: csrf, "key": "outbox:rec-0"})
    assert "Nothing to purge" in nothing.text
    with Outbox.open(agent_dir / "memory-bridge") as box:
        assert box.admin.counts().dead == 0 and box.admin.counts().pending == 2


async def test_clearing_traces_asks_first(client: httpx.AsyncClient) -> None:
    csrf = _csrf((await client.get("/traces")).text)
    assert "Delete every recall trace?" in (await client.post("/traces/clear", data={CSRF_FIELD: csrf})).text
    assert "what db?" in (await client.get("/traces")).text
    done = await client.post("/traces/clear", data={CSRF_FIELD: csrf, "confirm": "1"})
    assert "deleted 1 recall trace" in done.text
    assert "No recall recorded yet" in (await client.get("/traces")).text


# --- the guard -----------------------------------------------------------------------------------


@pytest.fixture
def bare(inspector: Inspector) -> Iterator[httpx.AsyncClient]:
    guard = Guard(port=PORT, token="t0k3n-for-tests")
    yield httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(inspector, guard)), base_url=ORIGIN)


async def test_refusals(bare: httpx.AsyncClient, client: httpx.AsyncClient) -> None:
    assert (await bare.get("/")).status_code == 401
    assert (await bare.get("/?token=wrong")).status_code == 401
    assert (await bare.get("/static/app.css")).status_code == 401
    cookie = {"cookie": f"pmb_inspector_{PORT}=t0k3n-for-tests"}
    assert (await bare.get("/", headers={**cookie, "host": "evil.example"})).status_code == 421
    assert (await bare.get("/", headers={**cookie, "host": f"127.0.0.1:{PORT + 1}"})).status_code == 421
    assert (await bare.get("/", headers={**cookie, "origin": "http://evil.example"})).status_code == 403
    assert (await bare.get("/", headers={**cookie, "sec-fetch-site": "cross-site"})).status_code == 403
    assert (await bare.get("/", headers={**cookie, "sec-fetch-site": "same-site"})).status_code == 403
    assert (await bare.request("OPTIONS", "/", headers=cookie)).status_code == 405
    assert (await bare.request("DELETE", "/forget", headers=cookie)).status_code == 405
    assert (await bare.get("/", headers=cookie)).status_code == 200
    # a POST needs the Origin and the CSRF field, whatever the cookie says
    csrf = _csrf((await client.get("/memories")).text)
    form = {CSRF_FIELD: csrf, "key": "L0:turn-a", "confirm": "1"}
    assert (await bare.post("/forget", data=form, headers=cookie)).status_code == 403  # no Origin
    other = {**cookie, "origin": f"http://127.0.0.1:{PORT + 1}"}
    assert (await bare.post("/forget", data=form, headers=other)).status_code == 403
    with_origin = {**cookie, "origin": ORIGIN}
    no_csrf = {"key": "L0:turn-a", "confirm": "1"}
    assert (await bare.post("/forget", data=no_csrf, headers=with_origin)).status_code == 403
    wrong = {**no_csrf, CSRF_FIELD: "0" * 64}
    assert (await bare.post("/forget", data=wrong, headers=with_origin)).status_code == 403
    assert "which db do we use?" in (await client.get("/conversation")).text  # nothing was deleted
    assert (await bare.post("/forget", data=form, headers=with_origin)).status_code == 200


async def test_a_malformed_cookie_or_a_body_too_large_or_unsized_is_refused(
    bare: httpx.AsyncClient, client: httpx.AsyncClient
) -> None:
    from pi_memory_bridge.ui.security import MAX_BODY_BYTES

    broken = {"cookie": f"b,=a; pmb_inspector_{PORT}=t0k3n-for-tests"}  # the stdlib parser raises on "b,"
    assert (await bare.get("/", headers=broken)).status_code == 401  # no token, not a server error
    csrf = _csrf((await client.get("/memories")).text)
    form = f"{CSRF_FIELD}={csrf}&key=L0:turn-a&confirm=1&pad=".encode() + b"x" * MAX_BODY_BYTES
    too_large = await client.post(
        "/forget", content=form, headers={"content-type": "application/x-www-form-urlencoded"}
    )
    assert too_large.status_code == 413 and b"too large" in too_large.content

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: chunked, of unknown size
        yield f"{CSRF_FIELD}={csrf}&key=L0:turn-a&confirm=1".encode()

    unsized = await client.post(
        "/forget", content=chunks(), headers={"content-type": "application/x-www-form-urlencoded"}
    )
    assert unsized.status_code == 413
    assert "which db do we use?" in (await client.get("/conversation")).text  # nothing was deleted
