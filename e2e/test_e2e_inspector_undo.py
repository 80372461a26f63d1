"""Undo of a learning job from the inspector's learning page, in a real headless Chromium.

Real Pi learns two jobs on the scripted model (MySQL, then the move to PostgreSQL, which
supersedes it) and starts the inspector with `/tdai-memory-ui`. In the page: the learning job's
Undo asks first (what is deleted, what comes back, with counts), then reports per memory; the
store holds the MySQL memory again and the next recall in Pi injects it instead of PostgreSQL. A
second tab that still shows the same question confirms afterwards: the page says the job is
already undone and nothing changes. A memory remembered in Pi gets its topics and questions from
an enrichment job; the page shows them per memory (hostile text inert), and undo takes just them
away. Screenshots go to e2e/out/inspector/undo-<pi>/ and enrichment-<pi>/ (not committed).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, sync_playwright

from bridge import SHIM, data_dir, use_bridge
from harness import FakeModel, PiEnv, PiRpcSession, ScriptedDialogs, TextReply
from test_e2e_inspector import (
    CHROMIUM,
    CHROMIUM_ARGS,
    DESKTOP,
    Shots,
    _inspector_url,
    _stop_inspector_left_running,
)

MYSQL = "The project uses MySQL as its database."
POSTGRES = "The project moved its database from MySQL to PostgreSQL."
FAST: dict[str, Any] = {"enabled": True, "idleSeconds": 1}


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        pytest.fail("Chromium is missing (/usr/bin/chromium): run scripts/setup.sh", pytrace=False)
    with sync_playwright() as pw:
        launched = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        yield launched
        launched.close()


def _rows(env: PiEnv, sql: str) -> list[dict[str, Any]]:
    con = sqlite3.connect(f"file:{data_dir(env) / 'memory.sqlite3'}?mode=ro", uri=True)
    con.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in con.execute(sql)]
    finally:
        con.close()


def _jobs(env: PiEnv) -> list[dict[str, Any]]:
    if not (data_dir(env) / "memory.sqlite3").exists():
        return []
    return _rows(env, "SELECT * FROM learning_jobs ORDER BY created_at")


def _active(env: PiEnv) -> list[str]:
    return sorted(str(r["content"]) for r in _rows(env, "SELECT content FROM atomic WHERE valid_to IS NULL"))


def _extract(kind: str, text: str) -> dict[str, Any]:
    return {"memories": [{"kind": kind, "text": text, "turns": ["t1"]}]}


def _learn_mysql_then_postgres(rpc: PiRpcSession, env: PiEnv, fake: FakeModel) -> None:
    fake.script_consolidation("extract", _extract("fact", MYSQL), _extract("decision", POSTGRES))
    fake.script_consolidation(
        "reconcile", {"decisions": [{"new": "n1", "action": "supersede", "targets": ["m1"]}]}
    )
    rpc.prompt_and_settle("Our service stores everything in MySQL.")
    rpc.wait_until(lambda: len(_jobs(env)) >= 1, timeout=45, interval=0.2)
    rpc.prompt_and_settle("We moved from MySQL to PostgreSQL this week.")
    rpc.wait_until(lambda: len(_jobs(env)) >= 2, timeout=45, interval=0.2)


def _l1_recalled(env: PiEnv, fake: FakeModel) -> str:
    fake.script(TextReply("ok"))
    run = env.run_print(["Which database does the project use?"], extensions=[SHIM])
    assert run.returncode == 0, run.stderr
    chat = [r for r in fake.chat_requests if r.consolidation_task is None]
    system = chat[-1].recalled_block
    start = system.find("[Facts and preferences (L1)]")
    assert start >= 0, system[-2000:]
    rest = system[start + 1 :]
    ends = [i for i in (rest.find("\n["), rest.find("</recalled_memory")) if i >= 0]
    return system[start : start + 1 + min(ends)] if ends else system[start:]


def test_undo_of_a_learning_job_in_the_page(pi_env: PiEnv, fake_model: FakeModel, browser: Browser) -> None:
    use_bridge(pi_env, config={"learning": FAST})
    rpc = pi_env.start_rpc(extensions=[SHIM], dialogs=ScriptedDialogs())
    _learn_mysql_then_postgres(rpc, pi_env, fake_model)
    assert _active(pi_env) == [POSTGRES]
    url = _inspector_url(rpc)
    assert rpc.close() == 0
    base = url.split("/?", 1)[0]
    superseding = _jobs(pi_env)[1]["job_id"]
    shots = Shots(f"undo-{pi_env.install.label}")
    context = browser.new_context(viewport=DESKTOP)
    page, other_tab = context.new_page(), context.new_page()
    page.goto(url)

    page.goto(f"{base}/learning")
    assert page.locator("button:has-text('Undo…')").count() == 2
    shots.take(page, "learning")
    for tab in (page, other_tab):  # the same question open in two tabs
        tab.goto(f"{base}/learning")
        tab.click(f"#job-{superseding} button:has-text('Undo…')")
        assert "Undo this learning job?" in tab.inner_text("main")
    preview = page.inner_text("main")
    assert "1 learned memory will be deleted" in preview and POSTGRES in preview
    assert "1 memory will be current again" in preview and MYSQL in preview
    assert _active(pi_env) == [POSTGRES]  # asked, not done
    shots.take(page, "confirm-undo")

    page.click("button:has-text('Undo the job')")
    report = page.inner_text("ul.report-lines")
    assert f"undid job {superseding}: 1 learned memory removed, 1 restored" in report
    assert f"removed [L1 decision] {POSTGRES}" in report and f"restored [L1 fact] {MYSQL}" in report
    assert "FAILED" not in report
    shots.take(page, "report-undo")
    assert _active(pi_env) == [MYSQL]
    assert not _rows(pi_env, f"SELECT 1 FROM atomic WHERE content = '{POSTGRES}'")
    undone = _jobs(pi_env)

    # the next recall in Pi reflects it
    recalled = _l1_recalled(pi_env, fake_model)
    assert MYSQL in recalled and "PostgreSQL" not in recalled

    # the other tab confirms the same undo: already undone, said so, nothing changes
    other_tab.click("button:has-text('Undo the job')")
    again = other_tab.inner_text("main")
    assert "Nothing to undo" in again and f"job {superseding} is undone: there is nothing to undo" in again
    assert "undid" not in again and other_tab.locator("button:has-text('Undo the job')").count() == 0
    assert _active(pi_env) == [MYSQL] and _jobs(pi_env) == undone
    shots.take(other_tab, "report-undo-again")
    page.goto(f"{base}/learning")
    assert page.locator("button:has-text('Undo…')").count() == 1
    assert "undone" in page.inner_text(f"#job-{superseding}")
    shots.take(page, "learning-after")
    context.close()
    _stop_inspector_left_running(pi_env, base)


DANA = "Dana reviews every database migration <b>before</b> it is merged."
DANA_TAGS = ["database migrations", "<script>window.__pwned = 1</script>"]
DANA_QUESTIONS = [
    "Who must approve a schema change?",
    '改表结构要谁批准？<img src=x onerror="window.__pwned = 2">',
]


def test_an_enrichment_job_shows_what_it_added_and_undo_takes_just_that(
    pi_env: PiEnv, fake_model: FakeModel, browser: Browser
) -> None:
    use_bridge(pi_env, config={"learning": FAST})
    enrichment = {"memories": [{"id": "m1", "tags": DANA_TAGS, "questions": DANA_QUESTIONS}]}
    fake_model.script_consolidation("enrich", enrichment)
    rpc = pi_env.start_rpc(extensions=[SHIM], dialogs=ScriptedDialogs())
    rpc.prompt_and_settle(f"/tdai-memory-remember {DANA}")  # the save alone asks for a learning run
    rpc.wait_until(lambda: any(j["enriched"] for j in _jobs(pi_env)), timeout=45, interval=0.2)
    [job] = [j["job_id"] for j in _jobs(pi_env) if j["enriched"]]
    url = _inspector_url(rpc)
    assert rpc.close() == 0
    base = url.split("/?", 1)[0]
    shots = Shots(f"enrichment-{pi_env.install.label}")
    page = browser.new_context(viewport=DESKTOP).new_page()
    page.goto(url)
    page.goto(f"{base}/learning")
    row = page.inner_text(f"#job-{job}")
    assert "gave 1 memory you saved topics and questions to be found by" in row
    assert f"[L1 preference] {DANA}" in row  # stored text shown as text, tags and all
    assert f"Topics added: database migrations, {DANA_TAGS[1]}" in row
    assert DANA_QUESTIONS[0] in row and DANA_QUESTIONS[1] in row
    assert page.locator(f"#job-{job} ul.added-questions li").count() == 2
    assert page.locator(f"#job-{job} b, #job-{job} img, #job-{job} script").count() == 0
    assert page.evaluate("window.__pwned") is None
    shots.take(page, "learning-enrichment")

    page.click(f"#job-{job} button:has-text('Undo…')")
    preview = page.inner_text("main")
    assert "1 memory will lose the topics and questions this job added" in preview
    assert DANA in preview and DANA_QUESTIONS[0] in preview and "will be deleted" not in preview
    assert len(_rows(pi_env, "SELECT 1 FROM atomic_questions")) == 2  # asked, not done
    shots.take(page, "confirm-undo-enrichment")
    page.click("button:has-text('Undo the job')")
    report = page.inner_text("ul.report-lines")
    assert f"undid job {job}" in report and "FAILED" not in report
    assert f"took away 2 tags, 2 questions from [L1 preference] {DANA}" in report
    shots.take(page, "report-undo-enrichment")
    assert _rows(pi_env, "SELECT 1 FROM atomic_questions") == []
    assert [(r["content"], r["tags"]) for r in _rows(pi_env, "SELECT content, tags FROM atomic")] == [
        (DANA, "")
    ]
    assert page.evaluate("window.__pwned") is None
    page.context.close()
    _stop_inspector_left_running(pi_env, base)
