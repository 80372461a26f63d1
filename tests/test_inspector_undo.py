"""Undo of a learning job from the inspector's learning page (real store, real jobs, HTTP via ASGI).

The page runs `/tdai-memory-undo`'s flow: it asks first (what goes, what comes back, with counts),
then answers with the command's line and one line per memory; an undone job says so and changes
nothing; a job a later one builds on is refused and nothing changes. The browser-level check with
real Pi is in e2e/test_e2e_inspector_undo.py.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from learning_helpers import ScriptedModel, active_texts, decide, extract, run, turn
from pi_memory_bridge.backends.local import LocalBackend
from pi_memory_bridge.ui.app import create_app
from pi_memory_bridge.ui.security import CSRF_FIELD, Guard
from pi_memory_bridge.ui.service import Inspector

PORT = 48125
ORIGIN = f"http://127.0.0.1:{PORT}"
TOKEN = "t0k3n-for-undo-tests"
MYSQL = "The project uses MySQL as its database."
POSTGRES = "The project moved its database from MySQL to PostgreSQL."


async def _learn_mysql_then_postgres(data: Path) -> tuple[str, str]:
    backend = LocalBackend(data)
    try:
        await backend.conversation.add([turn(1, "Our backend uses MySQL.")])
        first = await run(backend, ScriptedModel(extract(("fact", MYSQL, ["t1"]))))
        await backend.conversation.add([turn(2, "We moved from MySQL to PostgreSQL.")])
        second = await run(
            backend,
            ScriptedModel(
                extract(("decision", POSTGRES, ["t1"])),
                decide({"new": "n1", "action": "supersede", "targets": ["m1"]}),
            ),
        )
    finally:
        await backend.close()
    assert first.summary is not None and second.summary is not None
    return first.summary.job_id, second.summary.job_id


@pytest.fixture
async def jobs(tmp_path: Path) -> tuple[str, str]:
    return await _learn_mysql_then_postgres(tmp_path / "agent" / "memory-bridge")


@pytest.fixture
async def client(tmp_path: Path, jobs: tuple[str, str]) -> AsyncIterator[httpx.AsyncClient]:
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


def _csrf(html: str) -> str:
    found = re.search(rf'name="{CSRF_FIELD}" value="([0-9a-f]+)"', html)
    assert found, "no CSRF field on the page"
    return found.group(1)


async def _active(tmp_path: Path) -> list[str]:
    backend = LocalBackend(tmp_path / "agent" / "memory-bridge")
    try:
        return active_texts(backend)
    finally:
        await backend.close()


async def test_undo_asks_first_then_restores_what_the_job_replaced(
    client: httpx.AsyncClient, jobs: tuple[str, str], tmp_path: Path
) -> None:
    _, second = jobs
    page = (await client.get("/learning")).text
    assert page.count("Undo…") == 2 and second in page  # both jobs are applied
    form = {CSRF_FIELD: _csrf(page), "job": second}
    preview = await client.post("/learning/undo", data=form)
    assert preview.status_code == 200 and "Undo this learning job?" in preview.text
    assert "1 learned memory will be deleted" in preview.text and POSTGRES in preview.text
    assert "1 memory will be current again" in preview.text and MYSQL in preview.text
    assert await _active(tmp_path) == [POSTGRES]  # asked, not done

    done = await client.post("/learning/undo", data={**form, "confirm": "1"})
    lines = re.findall(r"<code>(.*?)</code>", done.text)
    assert lines[0] == f"undid job {second}: 1 learned memory removed, 1 restored"
    assert lines[1:] == [f"removed [L1 decision] {POSTGRES}", f"restored [L1 fact] {MYSQL}"]
    assert "FAILED" not in done.text
    assert await _active(tmp_path) == [MYSQL]
    # the learned profile follows the memories, as after /tdai-memory-undo in Pi
    learned = (tmp_path / "agent" / "memory-bridge" / "profile.learned.md").read_text(encoding="utf-8")
    assert MYSQL in learned and "PostgreSQL" not in learned
    after = (await client.get("/learning")).text
    assert after.count("Undo…") == 1 and "undone" in after


async def test_an_undone_job_says_so_and_changes_nothing(
    client: httpx.AsyncClient, jobs: tuple[str, str], tmp_path: Path
) -> None:
    _, second = jobs
    form = {CSRF_FIELD: _csrf((await client.get("/learning")).text), "job": second, "confirm": "1"}
    assert "undid job" in (await client.post("/learning/undo", data=form)).text
    again = await client.post("/learning/undo", data=form)  # a second submit of the same page
    assert (
        "Nothing to undo" in again.text and f"job {second} is undone: there is nothing to undo" in again.text
    )
    assert "undid" not in again.text and "Undo the job" not in again.text
    preview = await client.post("/learning/undo", data={k: v for k, v in form.items() if k != "confirm"})
    assert "Nothing to undo" in preview.text and "Undo the job" not in preview.text
    assert await _active(tmp_path) == [MYSQL]


async def test_a_job_a_later_one_builds_on_is_refused_and_nothing_changes(
    client: httpx.AsyncClient, jobs: tuple[str, str], tmp_path: Path
) -> None:
    first, second = jobs
    form = {CSRF_FIELD: _csrf((await client.get("/learning")).text), "job": first}
    preview = await client.post("/learning/undo", data=form)
    assert "A later job replaced 1 of the memories this job wrote" in preview.text
    refused = await client.post("/learning/undo", data={**form, "confirm": "1"})
    assert "FAILED  undo refused" in refused.text and second in refused.text
    assert await _active(tmp_path) == [POSTGRES]


async def test_undo_needs_the_csrf_token_and_a_known_job(client: httpx.AsyncClient, tmp_path: Path) -> None:
    csrf = _csrf((await client.get("/learning")).text)
    refused = await client.post("/learning/undo", data={"job": "x", "confirm": "1"})
    assert refused.status_code == 403
    unknown = await client.post("/learning/undo", data={CSRF_FIELD: csrf, "job": "job-nope"})
    assert "Nothing to undo" in unknown.text and "no single job matches" in unknown.text
    assert await _active(tmp_path) == [POSTGRES]
