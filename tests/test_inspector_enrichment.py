"""An enrichment job on the inspector's learning page (real store, a real job on scripted answers,
HTTP via ASGI): the job says in plain words which memories it gave which topics and questions,
escaped like every stored text; its Undo asks first with that list and reports per memory, and
the store holds none of it afterwards. The browser-level check is in
e2e/test_e2e_inspector_undo.py."""

from __future__ import annotations

import html
import re
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from learning_helpers import ScriptedModel, enrich
from pi_memory_bridge.backends.local import LocalBackend
from pi_memory_bridge.backends.local.learning.memories import LearnedMemories
from pi_memory_bridge.learning.consolidate import JobSettings
from pi_memory_bridge.learning.enrich_job import enrich_once
from pi_memory_bridge.ui.app import create_app
from pi_memory_bridge.ui.security import CSRF_FIELD, Guard
from pi_memory_bridge.ui.service import Inspector

PORT = 48126
ORIGIN = f"http://127.0.0.1:{PORT}"
TOKEN = "t0k3n-for-enrichment-tests"
DANA = "Dana reviews every database migration before it is merged."
HELM = "The team deploys with <b>Helm</b>."
DANA_TAGS = ["database migrations", "数据库迁移"]
DANA_QUESTIONS = ["Who must approve a schema change?", "改数据库表结构要谁批准？"]
HOSTILE_TAG = "<script>x()</script>"
HOSTILE_QUESTION = 'How do we ship? <img src=x onerror="x()">'


async def _enriched(data: Path) -> str:
    backend = LocalBackend(data)
    try:
        await backend.memories.save(DANA, "preference", "user")
        await backend.memories.save(HELM, "fact", "model")
        answer = enrich(
            ("m1", ["deployment", HOSTILE_TAG], [HOSTILE_QUESTION]), ("m2", DANA_TAGS, DANA_QUESTIONS)
        )
        outcome = await enrich_once(LearnedMemories(backend.store), ScriptedModel(answer), JobSettings())
    finally:
        await backend.close()
    assert outcome.kind == "applied" and outcome.summary is not None
    return outcome.summary.job_id


@pytest.fixture
async def job(tmp_path: Path) -> str:
    return await _enriched(tmp_path / "agent" / "memory-bridge")


@pytest.fixture
async def client(tmp_path: Path, job: str) -> AsyncIterator[httpx.AsyncClient]:
    agent = tmp_path / "agent"
    env = {"PI_CODING_AGENT_DIR": str(agent), "HOME": str(tmp_path)}
    inspector = await Inspector.open(agent, tmp_path, env)
    transport = httpx.ASGITransport(app=create_app(inspector, Guard(port=PORT, token=TOKEN)))
    try:
        async with httpx.AsyncClient(transport=transport, base_url=ORIGIN) as c:
            c.cookies.set(f"pmb_inspector_{PORT}", TOKEN)
            c.headers["origin"] = ORIGIN
            yield c
    finally:
        await inspector.close()


def _csrf(page: str) -> str:
    found = re.search(rf'name="{CSRF_FIELD}" value="([0-9a-f]+)"', page)
    assert found, "no CSRF field on the page"
    return found.group(1)


def _text(page: str) -> str:
    """The page as a reader sees it: tags dropped, entities decoded, whitespace folded."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())


def _questions(tmp_path: Path) -> int:
    import sqlite3

    with sqlite3.connect(tmp_path / "agent" / "memory-bridge" / "memory.sqlite3") as conn:
        return int(conn.execute("SELECT count(*) FROM atomic_questions").fetchone()[0])


async def test_the_job_shows_what_it_added_to_each_memory_escaped(
    client: httpx.AsyncClient, job: str
) -> None:
    page = (await client.get("/learning")).text
    row = page[page.index(f'id="job-{job}"') :]
    row = row[: row.index("</tr>")]
    seen = _text(row)
    assert "gave 2 memories you saved topics and questions to be found by" in seen
    assert "0 turns" not in seen  # it learned from memories, not from conversation
    assert f"[L1 preference] {DANA}" in seen and f"[L1 fact] {HELM}" in seen
    assert "Topics added: database migrations, 数据库迁移" in seen
    assert "Questions it answers: Who must approve a schema change? 改数据库表结构要谁批准？" in seen
    assert f"Topics added: deployment, {HOSTILE_TAG}" in seen and HOSTILE_QUESTION in seen
    # stored text is text: nothing of it is markup in the page
    assert "<script>x()" not in page and "<img src=x" not in page and "<b>Helm</b>" not in page
    assert "&lt;script&gt;x()&lt;/script&gt;" in row and "&lt;b&gt;Helm&lt;/b&gt;" in row
    assert row.count("Undo…") == 1


async def test_undo_lists_what_goes_then_takes_exactly_that_away(
    client: httpx.AsyncClient, job: str, tmp_path: Path
) -> None:
    form = {CSRF_FIELD: _csrf((await client.get("/learning")).text), "job": job}
    preview = await client.post("/learning/undo", data=form)
    seen = _text(preview.text)
    assert "Undo this learning job?" in seen and "2 memories will lose the topics and questions" in seen
    assert f"[L1 preference] {DANA} Topics: database migrations, 数据库迁移" in seen
    assert "Questions: Who must approve a schema change? · 改数据库表结构要谁批准？" in seen
    assert "learned memories will be deleted" not in seen and "<script>x()" not in preview.text
    assert _questions(tmp_path) == 3  # asked, not done

    done = await client.post("/learning/undo", data={**form, "confirm": "1"})
    lines = [html.unescape(line) for line in re.findall(r"<code>(.*?)</code>", done.text)]
    assert lines[0].startswith(f"undid job {job}") and "FAILED" not in done.text
    assert lines[1:] == [
        f"took away 2 tags, 2 questions from [L1 preference] {DANA}",
        f"took away 2 tags, 1 question from [L1 fact] {HELM}",
    ]
    assert _questions(tmp_path) == 0
    after = _text((await client.get("/learning")).text)
    assert "undone" in after and "Topics added" not in after and "Undo…" not in after
