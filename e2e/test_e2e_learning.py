"""Learning on real Pi: turns become L1 memories on the user's model (through the shim), a change
of mind supersedes the old memory, undo restores it, doubtful answers write nothing, hand-saved
memories win and get tags and questions to be found by, and consent is asked once in an
interactive session and never in print mode.

The scripted model answers the consolidation prompts from `script_consolidation`; Pi runs those
calls through its model registry (`model/complete`), so they reach the same fake server as chat.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

from bridge import SHIM, SIDECAR, data_dir, use_bridge, write_config
from harness import FakeModel, PiEnv, PiRpcSession, RecordedRequest, ScriptedDialogs, TextReply

CONSENT_YES = "Yes, learn from my sessions"
UNDO_YES = "Yes, undo this job"
FAST: dict[str, Any] = {"enabled": True, "idleSeconds": 1}


def _db(env: PiEnv) -> sqlite3.Connection:
    con = sqlite3.connect(f"file:{data_dir(env) / 'memory.sqlite3'}?mode=ro", uri=True)
    con.row_factory = sqlite3.Row
    return con


def memories(env: PiEnv, *, active: bool | None = None) -> list[dict[str, Any]]:
    """L1 rows straight from the store."""
    where = "" if active is None else ("WHERE valid_to IS NULL" if active else "WHERE valid_to IS NOT NULL")
    with _db(env) as con:
        return [dict(r) for r in con.execute(f"SELECT * FROM atomic {where} ORDER BY id")]


def jobs(env: PiEnv) -> list[dict[str, Any]]:
    path = data_dir(env) / "memory.sqlite3"
    if not path.exists():
        return []
    with _db(env) as con:
        if con.execute("SELECT 1 FROM sqlite_master WHERE name = 'learning_jobs'").fetchone() is None:
            return []  # the sidecar created the file and has not migrated it yet (a loaded machine)
        return [dict(r) for r in con.execute("SELECT * FROM learning_jobs ORDER BY created_at")]


def chat_only(fake: FakeModel) -> list[RecordedRequest]:
    return [r for r in fake.chat_requests if r.consolidation_task is None]


def recalled(fake: FakeModel) -> str:
    system = chat_only(fake)[-1].recalled_block
    start = system.find("<recalled_memory")
    return system[start:] if start >= 0 else ""


def l1_section(block: str) -> str:
    start = block.find("[Facts and preferences (L1)]")
    if start < 0:
        return ""
    rest = block[start + 1 :]
    ends = [i for i in (rest.find("\n["), rest.find("</recalled_memory")) if i >= 0]
    return block[start : start + 1 + min(ends)] if ends else block[start:]


def extract(*memories: tuple[str, str], **enrichment: list[str]) -> dict[str, Any]:
    """An extract answer (prompt v2); `tags=` / `questions=` enrich every memory in it."""
    return {"memories": [{"kind": k, "text": t, "turns": ["t1"], **enrichment} for k, t in memories]}


def learned(rpc: PiRpcSession, env: PiEnv, count: int, timeout: float = 45) -> None:
    """Wait until `count` jobs have been recorded."""
    rpc.wait_until(lambda: len(jobs(env)) >= count, timeout=timeout, interval=0.2)


def test_a_preference_is_learned_in_one_session_and_recalled_in_the_next(
    pi_env: PiEnv, fake_model: FakeModel
) -> None:
    use_bridge(pi_env, config={"learning": FAST})
    memory = "The user wants table-driven tests for Go code."
    questions = ["How do I like my Go tests written?", "Go 代码的测试我喜欢怎么写？"]
    tags = ["Go testing", "table-driven tests", "测试风格", "单元测试"]
    answer = extract(("preference", memory), tags=tags, questions=questions)
    fake_model.script_consolidation("extract", answer)
    rpc = pi_env.start_rpc(extensions=[SHIM])
    rpc.prompt_and_settle("For Go code I always want table-driven tests, please remember that.")
    learned(rpc, pi_env, 1)
    [row] = memories(pi_env)
    assert (row["content"], row["type"], row["origin"], row["valid_to"], row["tags"]) == (
        memory,
        "preference",
        "learned",
        None,
        "\n".join(tags),
    )
    with _db(pi_env) as con:  # the questions it answers are stored with it, for recall by meaning
        assert [r[0] for r in con.execute("SELECT text FROM atomic_questions ORDER BY id")] == questions
    rpc.wait_until(lambda: any("+1 learned" in n.message for n in rpc.ui.notifications), timeout=10)
    profile = data_dir(pi_env) / "profile.learned.md"  # the learned profile follows the memories
    rpc.wait_until(lambda: profile.exists() and memory in profile.read_text(encoding="utf-8"), timeout=10)
    [request] = fake_model.consolidation_requests("extract")
    assert "table-driven tests" in request.all_text and "[t1]" in request.all_text
    assert rpc.close() == 0
    # the consolidation call is not a session turn: nothing of it is in Pi's transcript
    transcript = "\n".join(p.read_text(encoding="utf-8") for p in pi_env.session_files())
    assert "pi-memory-bridge:extract" not in transcript and "table-driven" in transcript

    fake_model.script(TextReply("ok"))
    run = pi_env.run_print(["How should I lay out the unit tests for the Go parser?"], extensions=[SHIM])
    assert run.returncode == 0, run.stderr
    block = recalled(fake_model)
    assert memory in l1_section(block)
    assert "[Profile (L3)]" in block and "Learned profile" in block

    # asked in other words (no word of the memory, its tags or its questions), in a new session
    # once its embedding model is up: recalled by meaning (how much the questions written beside
    # a memory lift it among near-topic lures is measured in bench/bench_memory_quality.py)
    log = data_dir(pi_env) / "logs" / "sidecar.log"
    loads_before = _model_loads(log)
    rpc = pi_env.start_rpc(extensions=[SHIM])
    rpc.wait_until(lambda: _model_loads(log) > loads_before and _question_vectors(pi_env) == 2, timeout=60)
    fake_model.script(TextReply("ok"))
    rpc.prompt_and_settle("Which style of unit checks do I prefer for my parser?")
    assert memory in l1_section(recalled(fake_model))
    assert rpc.close() == 0
    assert fake_model.consolidation_unscripted == []


def _model_loads(log: Path) -> int:
    """How many sidecars have logged their embedding model loaded."""
    lines = log.read_text(encoding="utf-8").splitlines() if log.exists() else []
    return sum(1 for line in lines if "embedding model" in line and " loaded (" in line)


def _question_vectors(env: PiEnv) -> int:
    with _db(env) as con:
        return int(con.execute("SELECT count(*) FROM atomic_question_vectors").fetchone()[0])


def _atomic_vectors(env: PiEnv) -> int:
    with _db(env) as con:
        return int(con.execute("SELECT count(*) FROM atomic_vectors").fetchone()[0])


def test_a_hand_saved_memory_is_enriched_by_learning_and_then_recalled_in_other_words(
    pi_env: PiEnv, fake_model: FakeModel
) -> None:
    memory = "Dana reviews every database migration before it is merged."
    asked = "Who has to sign off on schema changes?"  # no word of the memory or its tags
    tags = ["database migrations", "code review", "数据库迁移"]
    questions = ["Who must approve a change to the database schema?", "改数据库表结构要谁批准？"]
    log = data_dir(pi_env) / "logs" / "sidecar.log"
    # saved by hand while learning is off: nothing is sent to any model, and its sentence alone
    # is too far from the question to be recalled
    use_bridge(pi_env, config={"learning": {"enabled": False}})
    rpc = pi_env.start_rpc(extensions=[SHIM])
    rpc.prompt_and_settle(f"/tdai-memory-remember {memory}")
    rpc.wait_until(lambda: _model_loads(log) >= 1 and _atomic_vectors(pi_env) == 1, timeout=60)
    fake_model.script(TextReply("ok"))
    rpc.prompt_and_settle(asked)
    assert memory not in recalled(fake_model)
    assert rpc.close() == 0
    assert fake_model.consolidation_requests() == []
    [saved] = memories(pi_env)
    assert (saved["origin"], saved["tags"]) == ("user", "")

    write_config(pi_env, {"learning": FAST})
    answer = {"memories": [{"id": "m1", "tags": tags, "questions": questions}]}
    fake_model.script_consolidation("enrich", answer)
    rpc = pi_env.start_rpc(extensions=[SHIM])
    rpc.prompt_and_settle("Let us continue with the release notes.")
    rpc.wait_until(lambda: any(j["enriched"] == 1 for j in jobs(pi_env)), timeout=45, interval=0.2)
    [job] = [j["job_id"] for j in jobs(pi_env) if j["enriched"]]
    rpc.wait_until(lambda: any("enriched 1 memory" in n.message for n in rpc.ui.notifications), timeout=10)
    [request] = fake_model.consolidation_requests("enrich")
    assert f"[m1] (preference) {memory}" in request.all_text and "at-" not in request.all_text
    [row] = memories(pi_env)  # its text, origin and validity as they were; the aids beside it
    assert (row["content"], row["origin"], row["valid_to"], row["tags"]) == (
        memory,
        "user",
        None,
        "\n".join(tags),
    )
    assert row["updated_at"] == saved["updated_at"]
    with _db(pi_env) as con:
        assert [r[0] for r in con.execute("SELECT text FROM atomic_questions ORDER BY id")] == questions
    rpc.wait_until(lambda: _question_vectors(pi_env) == 2 and _atomic_vectors(pi_env) == 1, timeout=60)
    rpc.prompt_and_settle("/tdai-memory-status")
    assert any("enriched 1 memory" in n.message for n in rpc.ui.notifications if "learning:" in n.message)
    assert rpc.close() == 0

    # a new session, asked in other words: recalled by the questions the learning job wrote
    loads_before = _model_loads(log)
    rpc = pi_env.start_rpc(extensions=[SHIM], dialogs=ScriptedDialogs().select(UNDO_YES))
    rpc.wait_until(lambda: _model_loads(log) > loads_before, timeout=60)
    fake_model.script(TextReply("ok"))
    rpc.prompt_and_settle(asked)
    assert memory in l1_section(recalled(fake_model))
    # undo of that job takes the tags and questions away again, and the memory stays
    rpc.prompt_and_settle(f"/tdai-memory-undo {job}")
    rpc.wait_until(lambda: any("tags and questions taken from 1" in n.message for n in rpc.ui.notifications))
    assert rpc.close() == 0
    [row] = memories(pi_env)
    assert (row["content"], row["origin"], row["tags"]) == (memory, "user", "")
    assert _question_vectors(pi_env) == 0


def test_a_memory_remembered_mid_session_is_enriched_and_found_in_other_words_in_that_session(
    pi_env: PiEnv, fake_model: FakeModel
) -> None:
    memory = "Dana reviews every database migration before it is merged."
    asked = "Who has to sign off on schema changes?"  # no word of the memory or its tags
    tags = ["database migrations", "code review", "数据库迁移"]
    questions = ["Who must approve a change to the database schema?", "改数据库表结构要谁批准？"]
    log = data_dir(pi_env) / "logs" / "sidecar.log"
    use_bridge(pi_env, config={"learning": FAST})
    fake_model.script_consolidation("extract", {"memories": []})
    fake_model.script_consolidation(
        "enrich", {"memories": [{"id": "m1", "tags": tags, "questions": questions}]}
    )
    rpc = pi_env.start_rpc(extensions=[SHIM])
    rpc.prompt_and_settle("Let us start on the release notes.")
    learned(rpc, pi_env, 1)  # that turn's run is over: no run is due any more
    rpc.wait_until(lambda: _model_loads(log) >= 1, timeout=60)
    rpc.prompt_and_settle(f"/tdai-memory-remember {memory}")
    # the save alone asks for a run: enriched without another turn
    rpc.wait_until(lambda: any(j["enriched"] == 1 for j in jobs(pi_env)), timeout=30, interval=0.2)
    [request] = fake_model.consolidation_requests("enrich")
    assert f"[m1] (preference) {memory}" in request.all_text
    rpc.wait_until(lambda: _question_vectors(pi_env) == 2 and _atomic_vectors(pi_env) == 1, timeout=60)
    fake_model.script(TextReply("ok"))
    rpc.prompt_and_settle(asked)
    assert memory in l1_section(recalled(fake_model))
    assert rpc.close() == 0
    assert fake_model.consolidation_unscripted == []


def _supersede_mysql(env: PiEnv, fake: FakeModel) -> None:
    fake.script_consolidation("extract", extract(("fact", "The project uses MySQL as its database.")))
    fake.script_consolidation(
        "extract", extract(("decision", "The project moved its database from MySQL to PostgreSQL."))
    )
    fake.script_consolidation(
        "reconcile", {"decisions": [{"new": "n1", "action": "supersede", "targets": ["m1"]}]}
    )
    rpc = env.start_rpc(extensions=[SHIM])
    rpc.prompt_and_settle("Our service stores everything in MySQL.")
    learned(rpc, env, 1)
    rpc.prompt_and_settle("We moved from MySQL to PostgreSQL this week.")
    learned(rpc, env, 2)
    assert rpc.close() == 0


def test_a_move_from_mysql_to_postgresql_supersedes_and_undo_restores_it(
    pi_env: PiEnv, fake_model: FakeModel
) -> None:
    use_bridge(pi_env, config={"learning": FAST})
    _supersede_mysql(pi_env, fake_model)
    assert [r["content"] for r in memories(pi_env, active=True)] == [
        "The project moved its database from MySQL to PostgreSQL."
    ]
    [old] = memories(pi_env, active=False)
    assert old["content"] == "The project uses MySQL as its database." and old["superseded_by"]
    reconcile = fake_model.consolidation_requests("reconcile")[0].all_text
    assert "[m1]" in reconcile and "at-" not in reconcile  # local ids only

    fake_model.script(TextReply("ok"))
    assert pi_env.run_print(["Which database does the project use?"], extensions=[SHIM]).returncode == 0
    current = l1_section(recalled(fake_model))
    assert "MySQL to PostgreSQL" in current and "uses MySQL as its database" not in current

    rpc = pi_env.start_rpc(extensions=[SHIM], dialogs=ScriptedDialogs().select(UNDO_YES))
    rpc.prompt_and_settle("/tdai-memory-undo")
    rpc.wait_until(lambda: any("undid job" in n.message for n in rpc.ui.notifications), timeout=15)
    [dialog] = rpc.ui.dialogs
    assert dialog.request.options == ["No, keep it", UNDO_YES]  # the first, default answer is No
    # a select has no body: what the choice is about is shown just before it
    assert any("replaced: The project uses MySQL" in n.message for n in rpc.ui.notifications)
    assert rpc.close() == 0
    assert [r["content"] for r in memories(pi_env)] == ["The project uses MySQL as its database."]
    assert memories(pi_env)[0]["valid_to"] is None

    fake_model.script(TextReply("ok"))
    assert pi_env.run_print(["Which database does the project use?"], extensions=[SHIM]).returncode == 0
    restored = l1_section(recalled(fake_model))
    assert "uses MySQL as its database" in restored and "PostgreSQL" not in restored


def test_garbage_a_timeout_a_cut_off_answer_or_a_refusal_write_nothing(
    pi_env: PiEnv, fake_model: FakeModel
) -> None:
    use_bridge(pi_env, config={"learning": {**FAST, "timeoutMs": 1500}})
    good = json.dumps(extract(("fact", "The project uses MySQL as its database.")))
    fake_model.script_consolidation(
        "extract",
        "Here are some memories: the user likes MySQL.",
        TextReply(good, delay_s=6.0),
        TextReply(good, finish_reason="length"),
        "I'm sorry, but I can't help with that.",
    )
    rpc = pi_env.start_rpc(extensions=[SHIM])
    for n in range(4):
        rpc.prompt_and_settle(f"Note {n}: our service stores everything in MySQL.")
        learned(rpc, pi_env, n + 1)
    assert memories(pi_env) == []
    reasons = [j["reason"].split(":")[0] for j in jobs(pi_env)]
    assert reasons == [
        "unparseable answer",
        "model timed out",
        "model did not finish normally",
        "unparseable answer",
    ]
    assert {j["state"] for j in jobs(pi_env)} <= {"failed", "dropped"}
    rpc.prompt_and_settle("/tdai-memory-status")
    report = next(n.message for n in rpc.ui.notifications if "learning:" in n.message)
    assert "model timed out x1" in report and "tokens today" in report
    assert rpc.close() == 0


def test_a_hand_saved_memory_is_never_superseded(pi_env: PiEnv, fake_model: FakeModel) -> None:
    use_bridge(pi_env, config={"learning": FAST})
    fake_model.script_consolidation(
        "extract", extract(("decision", "The project moved from MySQL to PostgreSQL."))
    )
    fake_model.script_consolidation(
        "reconcile", {"decisions": [{"new": "n1", "action": "supersede", "targets": ["m1"]}]}
    )
    rpc = pi_env.start_rpc(extensions=[SHIM])
    rpc.prompt_and_settle("/tdai-memory-remember The project uses MySQL.")
    rpc.prompt_and_settle("We moved to PostgreSQL.")
    learned(rpc, pi_env, 1)
    rpc.wait_until(lambda: any("proposal" in n.message for n in rpc.ui.notifications), timeout=10)
    assert rpc.close() == 0
    assert [(r["content"], r["origin"], r["valid_to"]) for r in memories(pi_env)] == [
        ("The project uses MySQL.", "user", None)
    ]
    # the consolidation job (an enrichment job may follow it for the hand-saved memory)
    [job] = [j for j in jobs(pi_env) if j["turns"]]
    assert (job["proposed"], job["superseded"], job["added"]) == (1, 0, 0)


def test_consent_is_asked_once_in_rpc_mode_and_never_in_print_mode(
    pi_env: PiEnv, fake_model: FakeModel
) -> None:
    use_bridge(pi_env)  # learning never allowed nor refused
    pi_env.write_models(fake_model.base_url, cost={"input": 3, "output": 15})  # Pi's catalog price
    fake_model.script(TextReply("noted"))
    run = pi_env.run_print(["In this repo we use pnpm, never npm."], extensions=[SHIM])
    assert run.returncode == 0, run.stderr
    assert "learn from your sessions" not in run.stderr + run.stdout
    config = data_dir(pi_env) / "config.json"
    assert not config.exists() and fake_model.consolidation_requests() == []

    fake_model.script_consolidation("extract", extract(("preference", "The user uses pnpm instead of npm.")))
    rpc = pi_env.start_rpc(extensions=[SHIM], dialogs=ScriptedDialogs().select(CONSENT_YES))
    rpc.prompt_and_settle("Also: lint with eslint before every commit.")
    rpc.wait_until(lambda: any("learning is on" in n.message for n in rpc.ui.notifications), timeout=15)
    [dialog] = rpc.ui.dialogs
    assert dialog.request.title == "Let Pi learn from your sessions?"
    assert dialog.request.options[0].startswith("No")  # the default answer is No
    question = next(n.message for n in rpc.ui.notifications if "tokens a day" in n.message)
    assert "the model fake-model from provider fake" in question and "/tdai-memory-undo" in question
    # 2,000 tokens at $3/M in, 8,000 and the day's 200,000 at $15/M: the money next to the tokens
    assert "$3 per million input tokens, $15 per million output tokens" in question
    assert "about $0.006-$0.12 a consolidation and at most $3.00 a day" in question
    assert json.loads(config.read_text(encoding="utf-8"))["learning"]["enabled"] is True
    assert config.stat().st_mode & 0o777 == 0o600
    learned(rpc, pi_env, 2)  # one job per session: the print run's turn is learned too
    extract_text = "\n".join(r.all_text for r in fake_model.consolidation_requests("extract"))
    assert "pnpm" in extract_text and "eslint" in extract_text
    assert rpc.close() == 0

    rpc = pi_env.start_rpc(extensions=[SHIM], dialogs=ScriptedDialogs())
    rpc.prompt_and_settle("Another thing worth knowing.")
    assert rpc.close() == 0
    assert rpc.ui.dialogs == []  # asked once: the answer is remembered

    # asked by hand, the question names and prices the model exactly as the first time
    rpc = pi_env.start_rpc(extensions=[SHIM], dialogs=ScriptedDialogs().select(CONSENT_YES))
    rpc.prompt_and_settle("/tdai-memory-learning")
    rpc.wait_until(lambda: len(rpc.ui.dialogs) == 1, timeout=15)
    assert rpc.close() == 0
    assert [n.message for n in rpc.ui.notifications if "tokens a day" in n.message] == [question]


def test_consolidate_runs_without_pi_on_a_configured_endpoint(pi_env: PiEnv, fake_model: FakeModel) -> None:
    use_bridge(pi_env, config={"learning": {"enabled": False}})
    fake_model.script(TextReply("noted"))
    assert pi_env.run_print(["Our CI runs on Buildkite."], extensions=[SHIM]).returncode == 0
    env = pi_env.environ()

    def consolidate(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(SIDECAR), *args], env=env, cwd=pi_env.work_dir, capture_output=True, text=True, timeout=60
        )

    refused = consolidate("consolidate")
    assert refused.returncode == 1 and "learning.enabled is false" in refused.stderr
    config_path = data_dir(pi_env) / "config.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    config["learning"] = {"enabled": True, "endpoint": fake_model.base_url, "model": "fake-model"}
    config_path.write_text(json.dumps(config), encoding="utf-8")
    fake_model.script_consolidation("extract", extract(("fact", "The project's CI runs on Buildkite.")))
    done = consolidate("consolidate")
    assert done.returncode == 0, done.stderr
    assert "+1 added" in done.stdout
    [request] = fake_model.consolidation_requests("extract")
    assert request.body.get("stream") is False and request.body.get("model") == "fake-model"
    assert [r["content"] for r in memories(pi_env)] == ["The project's CI runs on Buildkite."]
    undone = subprocess.run(
        [str(SIDECAR), "undo"],
        env=env,
        cwd=pi_env.work_dir,
        input="2\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert undone.returncode == 0, undone.stderr
    assert "undid job" in undone.stdout and memories(pi_env) == []


def test_consolidate_without_pi_also_enriches_a_hand_saved_memory(
    pi_env: PiEnv, fake_model: FakeModel
) -> None:
    use_bridge(pi_env, config={"learning": {"enabled": False}})
    saved = pi_env.run_print(["/tdai-memory-remember Deploys go out on Tuesdays."], extensions=[SHIM])
    assert saved.returncode == 0, saved.stderr
    endpoint = {"enabled": True, "endpoint": fake_model.base_url, "model": "fake-model"}
    write_config(pi_env, {"learning": endpoint})
    tags, questions = ["release day", "发布日"], ["When do deploys go out?", "哪天发布？"]
    fake_model.script_consolidation(
        "enrich", {"memories": [{"id": "m1", "tags": tags, "questions": questions}]}
    )
    done = subprocess.run(
        [str(SIDECAR), "consolidate"],
        env=pi_env.environ(),
        cwd=pi_env.work_dir,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "enriched 1 memory" in done.stdout
    [request] = fake_model.consolidation_requests("enrich")
    assert request.body.get("stream") is False and "Deploys go out on Tuesdays." in request.all_text
    [row] = memories(pi_env)
    assert (row["content"], row["origin"], row["tags"]) == (
        "Deploys go out on Tuesdays.",
        "user",
        "\n".join(tags),
    )


def test_pi_about_to_compact_consolidates_at_once(pi_env: PiEnv, fake_model: FakeModel) -> None:
    # no idle pause or turn count would start a job within this test: only the compaction does
    use_bridge(pi_env, config={"learning": {"enabled": True, "idleSeconds": 3600, "everyTurns": 100}})
    pi_env.write_settings({"compaction": {"keepRecentTokens": 1}})  # so two short turns can be compacted
    fake_model.script_consolidation("extract", extract(("fact", "The project's CI runs on Buildkite.")))
    rpc = pi_env.start_rpc(extensions=[SHIM])
    rpc.prompt_and_settle("Our CI runs on Buildkite.")
    rpc.prompt_and_settle("And the deploys go through Argo CD.")
    assert jobs(pi_env) == []
    assert rpc.request({"type": "compact"}, timeout=60).get("success"), "Pi did not compact"
    learned(rpc, pi_env, 1, timeout=30)
    assert [r["content"] for r in memories(pi_env)] == ["The project's CI runs on Buildkite."]
    assert rpc.close() == 0
