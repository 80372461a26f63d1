"""`/tdai-memory-sync-skills`: pagination, choice, conflicts, names, safety limits, atomicity."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flow_driver import Running, Step, start
from flow_driver import drive as drive_flow
from pi_memory_bridge.skills import (
    SyncDeps,
    _atomic,
    _bundle,
    fetch_bundle,
    install,
    is_valid_name,
    list_all_skills,
    render_skill_md,
    sanitize_name,
    split_front_matter,
    sync_skills_flow,
)
from pi_memory_bridge.skills._flow import ALL, CANCEL, CHOOSE, KEEP_BOTH, SKIP
from pi_memory_bridge.skills._frontmatter import MAX_DESCRIPTION_CHARS, clean_description
from pi_memory_bridge.skills._local import scan
from pi_memory_bridge.vocabulary.dialog import Flow
from skill_fake import FakeFile, FakeSkillClient, skill_md, source_with

RECORD = ".pi-memory-bridge.json"


Answer = object


def sync_flow(deps: SyncDeps, args: str, *, has_ui: bool) -> tuple[Flow, bool]:
    return (lambda dialog: sync_skills_flow(deps, args, dialog)), has_ui


async def drive(flow: tuple[Flow, bool], answers: list[Answer]) -> tuple[list[Step], Step]:
    """Run a flow, answering each dialog in turn; every answer must be used."""
    steps = await drive_flow(flow[0], list(answers), has_ui=flow[1], exact=True)
    return steps[:-1], steps[-1]


LOCK_HOLDER = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
fcntl.flock(fd, fcntl.LOCK_EX)
print("locked", flush=True)
time.sleep(60)
"""


def deps(client: FakeSkillClient, tmp_path: Path) -> SyncDeps:
    return SyncDeps(source_with(client), "", tmp_path / "skills")


def tree(root: Path) -> dict[str, bytes]:
    if not root.exists():
        return {}
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def front_matter(path: Path) -> dict[str, str]:
    text = path.read_text("utf-8")
    assert text.startswith("---\n")
    return split_front_matter(text).fields


@pytest.fixture
def client() -> FakeSkillClient:
    c = FakeSkillClient()
    c.add("go-style", "Go style rules", body="Use named constants.")
    c.add("sql-review", "Review SQL migrations")
    return c


# ---- front-matter ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "name"),
    [
        ("Go Style", "go-style"),
        ("--a__b--", "a-b"),
        ("Café Ünïcode", "cafe-unicode"),
        ("中文技能", ""),
        ("x" * 70, "x" * 64),
        ("a" * 63 + "-b", "a" * 63),
    ],
)
def test_names_follow_pi_rules(raw: str, name: str) -> None:
    assert sanitize_name(raw) == name
    assert name == "" or is_valid_name(name)


@given(st.text(max_size=1500), st.text(max_size=300))
def test_written_front_matter_reads_back(description: str, body: str) -> None:
    expected = clean_description(description)
    if not expected:
        return
    doc = split_front_matter(render_skill_md("my-skill", description, body))
    assert doc.fields == {"name": "my-skill", "description": expected}
    assert len(doc.fields["description"]) <= MAX_DESCRIPTION_CHARS
    assert "\n" not in doc.fields["description"]


def test_server_front_matter_is_not_copied_through() -> None:
    content = "---\nname: x\ndescription: >\n  Folded\n  text\nallowed-tools: bash\n---\nBody\n"
    doc = split_front_matter(content)
    assert doc.fields["description"] == "Folded text"
    rendered = render_skill_md("x", doc.fields["description"], doc.body)
    assert "allowed-tools" not in rendered and rendered.endswith("Body\n")


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ("---\nname: go-style\ndescription: never closed\n", "not closed with '---'"),
        ("---\nname: go-style\n- a list item\n---\nBody\n", "unreadable front-matter line"),
        ('---\ndescription: "unterminated\n---\nBody\n', "bad double-quoted value"),
        ('---\ndescription: "a" "b"\n---\nBody\n', "bad double-quoted value"),
        ("---\ndescription: 'unterminated\n---\nBody\n", "bad single-quoted value"),
    ],
)
async def test_a_skill_md_with_unreadable_front_matter_is_refused_and_the_others_synced(
    client: FakeSkillClient, tmp_path: Path, content: str, why: str
) -> None:
    client.skills[0].content = content  # from the server: its bad day, not ours to guess through
    _, last = await drive(sync_flow(deps(client, tmp_path), "", has_ui=True), [ALL, True])
    assert "FAILED  go-style" in last.message and why in last.message, last.message
    assert not (tmp_path / "skills" / "go-style").exists()
    assert (tmp_path / "skills" / "sql-review" / "SKILL.md").exists()


def test_front_matter_values_read_as_pi_reads_them() -> None:
    doc = split_front_matter("---\nname: 'it''s'\n# a comment\n\ndescription: plain # trailing\n---\nBody")
    assert doc.fields == {"name": "it's", "description": "plain"}
    assert split_front_matter("no front matter\n---\n").fields == {}


@pytest.mark.parametrize(
    ("name", "description", "why"),
    [("Not Valid", "d", "is not a valid Pi skill name"), ("ok-name", " \n\t ", "needs a description")],
)
def test_a_skill_is_not_rendered_without_a_valid_name_and_a_description(
    name: str, description: str, why: str
) -> None:
    from pi_memory_bridge.skills import FrontMatterError

    with pytest.raises(FrontMatterError, match=why):
        render_skill_md(name, description, "body")


# ---- listing -----------------------------------------------------------------------------------


async def test_every_page_is_listed() -> None:
    client = FakeSkillClient()
    for i in range(250):
        client.add(f"skill-{i}")
    found = await list_all_skills(source_with(client))
    assert len({s.skill_id for s in found}) == 250
    assert [c[1]["pagination"]["offset"] for c in client.calls] == [0, 100, 200]


async def test_a_lying_total_does_not_loop_forever() -> None:
    client = FakeSkillClient()
    client.add("only")
    client.total_override = 10_000
    assert len(await list_all_skills(source_with(client))) == 1


# ---- choosing ----------------------------------------------------------------------------------


@pytest.mark.parametrize("answer", [None, CANCEL, "something else"])
async def test_cancel_means_nothing(client: FakeSkillClient, tmp_path: Path, answer: Answer) -> None:
    _, last = await drive(sync_flow(deps(client, tmp_path), "", has_ui=True), [answer])
    assert "nothing was written" in last.message
    assert tree(tmp_path) == {}
    assert [m for m, _ in client.calls] == ["list"]


async def test_declining_the_final_confirm_writes_nothing(client: FakeSkillClient, tmp_path: Path) -> None:
    steps, last = await drive(sync_flow(deps(client, tmp_path), "", has_ui=True), [ALL, False])
    assert str(tmp_path / "skills" / "go-style" / "SKILL.md") in steps[-1].message
    assert "nothing was written" in last.message and tree(tmp_path) == {}


async def test_choose_one_by_one(client: FakeSkillClient, tmp_path: Path) -> None:
    _, last = await drive(sync_flow(deps(client, tmp_path), "", has_ui=True), [CHOOSE, False, True, True])
    assert sorted(os.listdir(tmp_path / "skills")) == ["sql-review"]
    assert last.level == "info" and last.reload is True


async def test_full_sync_writes_valid_pi_skills_with_records(client: FakeSkillClient, tmp_path: Path) -> None:
    client.skills[0].files["scripts/run.sh"] = FakeFile(b"echo hi\n", "text/x-sh")
    client.skills[0].files["img/logo.png"] = FakeFile(b"\x89PNG\x00\xff", "image/png")
    _, last = await drive(sync_flow(deps(client, tmp_path), "", has_ui=True), [ALL, True])
    skill_dir = tmp_path / "skills" / "go-style"
    assert front_matter(skill_dir / "SKILL.md") == {"name": "go-style", "description": "Go style rules"}
    assert (skill_dir / "img" / "logo.png").read_bytes() == b"\x89PNG\x00\xff"
    record = json.loads((skill_dir / RECORD).read_text())
    assert record["server_skill_id"] == "skl-0001" and record["version"] == 1
    assert set(record["files"]) == {"SKILL.md", "scripts/run.sh", "img/logo.png"}
    assert not [n for n in os.listdir(tmp_path / "skills") if n.startswith(".pmb-")]
    assert "FAILED" not in last.message
    # private, like everything we write (a team's skill may hold what it learned)
    assert stat.S_IMODE(skill_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE((skill_dir / "img").stat().st_mode) == 0o700
    assert {stat.S_IMODE(p.stat().st_mode) for p in skill_dir.rglob("*") if p.is_file()} == {0o600}


async def test_resync_updates_only_what_changed(client: FakeSkillClient, tmp_path: Path) -> None:
    await drive(sync_flow(deps(client, tmp_path), "", has_ui=True), [ALL, True])
    steps, last = await drive(sync_flow(deps(client, tmp_path), "", has_ui=True), [])
    assert not steps and "up to date" in last.message and "nothing to do" in last.message  # no question
    client.skills[0].version = 2
    client.skills[0].content = skill_md("go-style", "Go style rules", "Version two.")
    _, last = await drive(sync_flow(deps(client, tmp_path), "", has_ui=True), [ALL, True])
    assert "updated go-style" in last.message
    assert "Version two." in (tmp_path / "skills" / "go-style" / "SKILL.md").read_text()


# ---- local edits ---------------------------------------------------------------------------------


async def _edited_setup(client: FakeSkillClient, tmp_path: Path) -> Path:
    await drive(sync_flow(deps(client, tmp_path), "", has_ui=True), [ALL, True])
    skill_md_path = tmp_path / "skills" / "go-style" / "SKILL.md"
    skill_md_path.write_text(skill_md_path.read_text() + "\nMy own note.\n")
    client.skills[0].version = 2
    return skill_md_path


async def test_edited_skill_skip_keeps_the_edit(client: FakeSkillClient, tmp_path: Path) -> None:
    path = await _edited_setup(client, tmp_path)
    before = path.read_bytes()
    steps, last = await drive(sync_flow(deps(client, tmp_path), "", has_ui=True), [ALL, SKIP])
    assert "edited locally" in steps[1].title and "SKILL.md" in steps[1].message
    assert path.read_bytes() == before and "skipped" in last.message


async def test_edited_skill_keep_both(client: FakeSkillClient, tmp_path: Path) -> None:
    path = await _edited_setup(client, tmp_path)
    before = path.read_bytes()
    _, last = await drive(sync_flow(deps(client, tmp_path), "", has_ui=True), [ALL, KEEP_BOTH, True])
    assert path.read_bytes() == before
    assert not (path.parent / RECORD).exists()  # the edited copy is now the user's
    twin = tmp_path / "skills" / "go-style-2"
    assert front_matter(twin / "SKILL.md")["name"] == "go-style-2"
    assert json.loads((twin / RECORD).read_text())["version"] == 2
    assert "kept both" in last.message


async def test_an_edit_with_no_server_change_is_left_alone(client: FakeSkillClient, tmp_path: Path) -> None:
    path = await _edited_setup(client, tmp_path)
    client.skills[0].version = 1  # the server still has what we synced
    before = path.read_bytes()
    _, last = await drive(sync_flow(deps(client, tmp_path), "", has_ui=True), [])
    assert path.read_bytes() == before and "up to date go-style" in last.message


async def test_an_added_file_counts_as_an_edit(client: FakeSkillClient, tmp_path: Path) -> None:
    await drive(sync_flow(deps(client, tmp_path), "", has_ui=True), [ALL, True])
    (tmp_path / "skills" / "sql-review" / "notes.txt").write_text("mine")
    [synced] = [s for s in scan(tmp_path / "skills").synced if s.dir_name == "sql-review"]
    assert synced.edited == ("notes.txt",)


# ---- names ---------------------------------------------------------------------------------------


async def test_same_name_twice_and_a_user_skill(tmp_path: Path) -> None:
    client = FakeSkillClient()
    client.add("Go Style")
    client.add("go-style")
    client.add("中文技能", "A skill with a CJK name")
    user_skill = tmp_path / "skills" / "go-style"
    user_skill.mkdir(parents=True)
    (user_skill / "SKILL.md").write_text("mine")
    await drive(sync_flow(deps(client, tmp_path), "", has_ui=True), [ALL, True])
    assert (user_skill / "SKILL.md").read_text() == "mine" and not (user_skill / RECORD).exists()
    written = {
        d.name: json.loads((d / RECORD).read_text())["server_skill_id"]
        for d in (tmp_path / "skills").iterdir()
        if (d / RECORD).exists()
    }
    assert written == {"go-style-2": "skl-0001", "go-style-3": "skl-0002", "skill-skl-0003": "skl-0003"}
    for name in written:
        assert front_matter(tmp_path / "skills" / name / "SKILL.md")["name"] == name


# ---- unsafe server data ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad_path", ["../evil.sh", "a/../../evil", "/etc/passwd", "C:/x", "a\\..\\b", "skill.md", "a//b", "./a"]
)
async def test_path_traversal_is_refused(client: FakeSkillClient, tmp_path: Path, bad_path: str) -> None:
    client.skills[0].files[bad_path] = FakeFile(b"pwned")
    _, last = await drive(sync_flow(deps(client, tmp_path), "", has_ui=True), [ALL, True])
    assert "FAILED  go-style" in last.message and "refused" in last.message
    assert not (tmp_path / "skills" / "go-style").exists()
    assert (tmp_path / "skills" / "sql-review" / "SKILL.md").exists()  # the other skill is unaffected
    assert all(b"pwned" not in data for data in tree(tmp_path).values())
    assert ("read_file", {"skill_id": "skl-0001", "path": bad_path, "encoding": "utf-8"}) not in client.calls


async def test_sizes_are_checked_on_decoded_content(
    client: FakeSkillClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_bundle, "MAX_FILE_BYTES", 1000)
    client.skills[0].files["big.bin"] = FakeFile(b"\x00" * 1001, "application/octet-stream", reported_size=10)
    with pytest.raises(_bundle.SkillBundleError, match="over 1000"):
        await fetch_bundle(source_with(client), "skl-0001")


async def test_bad_base64_is_refused(client: FakeSkillClient) -> None:
    client.skills[0].files["x.bin"] = FakeFile(b"", "application/octet-stream", raw_base64="not*base64!")
    with pytest.raises(_bundle.SkillBundleError, match="invalid base64"):
        await fetch_bundle(source_with(client), "skl-0001")


async def test_oversized_skill_md_is_refused(
    client: FakeSkillClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_bundle, "MAX_SKILL_MD_BYTES", 100)
    client.skills[0].content = skill_md("go-style", "d", "é" * 60)  # 120 bytes of body in 60 chars
    with pytest.raises(_bundle.SkillBundleError, match=r"SKILL\.md is"):
        await fetch_bundle(source_with(client), "skl-0001")


# ---- atomicity -----------------------------------------------------------------------------------


async def test_a_failure_mid_write_leaves_the_previous_version(
    client: FakeSkillClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    client.skills[0].files["a.md"] = FakeFile(b"v1 a")
    client.skills[0].files["b.md"] = FakeFile(b"v1 b")
    skills = tmp_path / "skills"
    install(skills, await fetch_bundle(source_with(client), "skl-0001"), "go-style")
    before = tree(skills)
    client.skills[0].files = {"a.md": FakeFile(b"v2 a"), "b.md": FakeFile(b"v2 b")}
    client.skills[0].version = 2
    bundle = await fetch_bundle(source_with(client), "skl-0001")
    real_open, opened = os.open, []

    def failing_open(path: str, flags: int, mode: int = 0o777, **kw: object) -> int:
        if flags & os.O_CREAT:  # count only the files the install writes
            opened.append(path)
            if len(opened) == 2:
                raise OSError(28, "No space left on device")
        return real_open(path, flags, mode, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", failing_open)
    with pytest.raises(OSError, match="No space"):
        install(skills, bundle, "go-style")
    monkeypatch.undo()
    assert tree(skills) == before
    assert sorted(os.listdir(skills)) == ["go-style"]  # no staging left behind


@pytest.mark.parametrize("atomic_exchange", [True, False])
async def test_replace_with_and_without_rename_exchange(
    client: FakeSkillClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, atomic_exchange: bool
) -> None:
    if not atomic_exchange:
        monkeypatch.setattr(_atomic, "exchange", lambda a, b: False)
    skills = tmp_path / "skills"
    install(skills, await fetch_bundle(source_with(client), "skl-0001"), "go-style")
    client.skills[0].content = skill_md("go-style", "Go style rules", "Second.")
    install(skills, await fetch_bundle(source_with(client), "skl-0001"), "go-style")
    assert "Second." in (skills / "go-style" / "SKILL.md").read_text()
    assert sorted(os.listdir(skills)) == ["go-style"]


def test_recover_restores_an_orphaned_backup(tmp_path: Path) -> None:
    skills = tmp_path / "skills"
    (skills / ".pmb-old-go-style-1234abcd").mkdir(parents=True)
    (skills / ".pmb-old-go-style-1234abcd" / "SKILL.md").write_text("old")
    (skills / ".pmb-stage-deadbeef").mkdir()
    assert _atomic.recover(skills) == ["go-style"]
    assert sorted(os.listdir(skills)) == ["go-style"]


def test_a_file_in_the_way_is_never_deleted(tmp_path: Path) -> None:
    skills = tmp_path / "skills"
    skills.mkdir()
    (skills / "x").write_text("a user file")
    stage = skills / ".pmb-stage-1"
    stage.mkdir()
    with pytest.raises(OSError):
        _atomic.swap_in(stage, skills / "x")
    assert (skills / "x").read_text() == "a user file"


# ---- headless and server deletions ---------------------------------------------------------------


async def test_headless_lists_only(client: FakeSkillClient, tmp_path: Path) -> None:
    _, last = await drive(sync_flow(deps(client, tmp_path), "  ", has_ui=False), [])
    assert "go-style" in last.message and "nothing was written" in last.message
    assert tree(tmp_path) == {}


async def test_headless_yes_writes_but_never_overwrites_edits(
    client: FakeSkillClient, tmp_path: Path
) -> None:
    path = await _edited_setup(client, tmp_path)
    before = path.read_bytes()
    client.add("new-one")
    client.skills[1].status = "archived"  # deleted on the server
    _, last = await drive(sync_flow(deps(client, tmp_path), " --yes ", has_ui=False), [])
    assert path.read_bytes() == before and "skipped" in last.message
    assert (tmp_path / "skills" / "new-one" / "SKILL.md").exists()
    assert (tmp_path / "skills" / "sql-review").exists() and "not removed sql-review" in last.message


@pytest.mark.parametrize("agree", [True, False])
async def test_server_deletions_removed_only_when_agreed(
    client: FakeSkillClient, tmp_path: Path, agree: bool
) -> None:
    await drive(sync_flow(deps(client, tmp_path), "", has_ui=True), [ALL, True])
    client.skills[1].status = "archived"
    answers: list[Answer] = [ALL, agree, True] if agree else [ALL, agree]
    steps, _ = await drive(sync_flow(deps(client, tmp_path), "", has_ui=True), answers)
    assert "sql-review/" in steps[1].message
    assert (tmp_path / "skills" / "sql-review").exists() is not agree
    assert (tmp_path / "skills" / "go-style").exists()


# ---- two syncs at once ----------------------------------------------------------------------------


async def confirm_later(flow: tuple[Flow, bool], answers: list[Answer]) -> Running:
    """Run a flow up to its last dialog (the final confirm) and return it there, unanswered."""
    running = await start(flow[0], has_ui=flow[1])
    for answer in answers:
        await running.answer(answer)
    assert running.step.kind == "confirm", running.step
    return running


async def test_a_sync_confirmed_while_another_wrote_the_same_skills_writes_nothing_twice(
    client: FakeSkillClient, tmp_path: Path
) -> None:
    first = await confirm_later(sync_flow(deps(client, tmp_path), "", has_ui=True), [ALL])
    await drive(sync_flow(deps(client, tmp_path), "", has_ui=True), [ALL, True])
    last = await first.answer(True)
    assert last.message.count("already up to date (synced meanwhile by another Pi)") == 2
    assert sorted(os.listdir(tmp_path / "skills")) == ["go-style", "sql-review"]


async def test_a_name_taken_after_the_confirm_gives_way_to_the_next_free_one(
    client: FakeSkillClient, tmp_path: Path
) -> None:
    flow = await confirm_later(sync_flow(deps(client, tmp_path), "", has_ui=True), [ALL])
    (tmp_path / "skills" / "go-style").mkdir(parents=True)
    (tmp_path / "skills" / "go-style" / "SKILL.md").write_text("the user's own")
    last = await flow.answer(True)
    assert (tmp_path / "skills" / "go-style" / "SKILL.md").read_text() == "the user's own"
    assert str(tmp_path / "skills" / "go-style-2" / "SKILL.md") in last.message
    assert (
        json.loads((tmp_path / "skills" / "go-style-2" / RECORD).read_text())["server_skill_id"] == "skl-0001"
    )


async def test_an_edit_made_after_the_confirm_is_not_replaced(
    client: FakeSkillClient, tmp_path: Path
) -> None:
    await drive(sync_flow(deps(client, tmp_path), "", has_ui=True), [ALL, True])
    client.skills[0].version = 2
    client.skills[1].status = "archived"
    flow = await confirm_later(sync_flow(deps(client, tmp_path), "", has_ui=True), [ALL, True])
    # update go-style, remove sql-review
    for name in ("go-style", "sql-review"):
        (tmp_path / "skills" / name / "SKILL.md").write_text("edited meanwhile")
    last = await flow.answer(True)
    assert "edited locally since you confirmed" in last.message
    assert "kept sql-review/: edited locally since you confirmed" in last.message
    for name in ("go-style", "sql-review"):
        assert (tmp_path / "skills" / name / "SKILL.md").read_text() == "edited meanwhile"


async def test_a_sync_that_cannot_get_the_lock_says_so_and_touches_nothing(
    client: FakeSkillClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    skills = tmp_path / "skills"
    stage = skills / ".pmb-stage-another-writer"  # another process's write in progress
    stage.mkdir(parents=True)
    holder = await asyncio.create_subprocess_exec(
        sys.executable, "-c", LOCK_HOLDER, str(skills), stdout=asyncio.subprocess.PIPE
    )
    try:
        assert holder.stdout is not None and (await holder.stdout.readline()).strip() == b"locked"
        monkeypatch.setattr("pi_memory_bridge.skills._sync.LOCK_WAIT_S", 0.2)
        _, last = await drive(sync_flow(deps(client, tmp_path), "", has_ui=True), [])
        assert last.level == "warning" and "another skill sync is writing" in last.message
        assert "Nothing was written" in last.message
        assert stage.is_dir() and sorted(os.listdir(skills)) == [stage.name]
    finally:
        holder.kill()
        await holder.wait()
    # the holder is gone (a crash releases the lock too): the next sync proceeds
    _, last = await drive(sync_flow(deps(client, tmp_path), "", has_ui=True), [ALL, True])
    assert "FAILED" not in last.message and (skills / "go-style" / "SKILL.md").exists()
    assert not stage.exists()  # a stage nobody holds the lock for is a leftover


async def test_list_failure_writes_nothing(client: FakeSkillClient, tmp_path: Path) -> None:
    client.fail("list", 429, "slow down")
    _, last = await drive(sync_flow(deps(client, tmp_path), "", has_ui=True), [])
    assert last.level == "error" and "429" in last.message and tree(tmp_path) == {}


async def test_no_source_explains_why(tmp_path: Path) -> None:
    flow = sync_flow(SyncDeps(None, "the local backend has no skills", tmp_path), "", has_ui=True)
    _, last = await drive(flow, [])
    assert "local backend has no skills" in last.message
