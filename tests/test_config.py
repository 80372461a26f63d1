"""Config: sources and precedence, the project sandbox, key files, endpoint/TLS rules, writing."""

from __future__ import annotations

import json
import os
import stat
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from pi_memory_bridge.config import (
    MAX_KEY_FILE_BYTES,
    BridgeConfig,
    ConfigProblem,
    ConfigSource,
    LoadedConfig,
    MemoryCoreSettings,
    RecallSettings,
    data_dir,
    default_agent_dir,
    global_config_path,
    load_config,
    project_config_path,
    write_global_config,
)
from pi_memory_bridge.config._sandbox import CHEAPER_DIRECTION

FAKE_USER_KEY = "sk-mem-TESTONLY0000000000000000000000"
FAKE_GATEWAY_KEY = "gw-TESTONLY-not-a-real-key"
COMPLETE_MEMORYCORE = {
    "endpoint": "https://memory.example.com",
    "teamId": "team-1",
    "agentId": "agent-1",
    "userId": "user-1",
}


@pytest.fixture
def agent_dir(tmp_path: Path) -> Path:
    return tmp_path / "agent"


@pytest.fixture
def project_dir(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    return path


def write_global(agent_dir: Path, content: Any) -> Path:
    path = global_config_path(agent_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content if isinstance(content, str) else json.dumps(content, indent=2))
    return path


def write_project(project_dir: Path, content: Any) -> Path:
    path = project_config_path(project_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return path


def write_key(path: Path, text: str = FAKE_USER_KEY + "\n", mode: int = 0o600) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)
    return path


def load(
    agent_dir: Path,
    project_dir: Path | None = None,
    *,
    trusted: bool = True,
    env: Mapping[str, str] | None = None,
) -> LoadedConfig:
    return load_config(agent_dir=agent_dir, cwd=project_dir, project_trusted=trusted, env=env or {})


def messages(loaded: LoadedConfig) -> list[str]:
    return [str(problem) for problem in loaded.problems]


def only_problem(loaded: LoadedConfig, key: str) -> ConfigProblem:
    found = [problem for problem in loaded.problems if problem.key == key]
    assert len(found) == 1, messages(loaded)
    return found[0]


# --- paths -------------------------------------------------------------------------------------


def test_agent_dir_follows_pi_rules() -> None:
    assert default_agent_dir({"PI_CODING_AGENT_DIR": "/opt/pi", "HOME": "/h"}) == Path("/opt/pi")
    assert default_agent_dir({"PI_CODING_AGENT_DIR": "~/pi-agent", "HOME": "/h"}) == Path("/h/pi-agent")
    assert default_agent_dir({"PI_CODING_AGENT_DIR": "~", "HOME": "/h"}) == Path("/h")
    assert default_agent_dir({"PI_CODING_AGENT_DIR": "", "HOME": "/h"}) == Path("/h/.pi/agent")
    assert default_agent_dir({"HOME": "/home/someone"}) == Path("/home/someone/.pi/agent")


def test_file_locations() -> None:
    assert data_dir(Path("/a")) == Path("/a/memory-bridge")
    assert global_config_path(Path("/a")) == Path("/a/memory-bridge/config.json")
    assert project_config_path(Path("/p")) == Path("/p/.pi/memory-bridge.json")


# --- defaults and precedence -------------------------------------------------------------------


def test_no_files_no_env_gives_defaults(agent_dir: Path, project_dir: Path) -> None:
    loaded = load(agent_dir, project_dir)
    assert loaded.config == BridgeConfig()
    assert loaded.ok and loaded.problems == ()
    assert loaded.sources == (ConfigSource("default", None),)
    assert loaded.backend_ready
    recall = loaded.config.recall
    assert (recall.deadline_ms, recall.l0_limit, recall.l1_limit, recall.l2_limit) == (3000, 4, 6, 2)
    assert (recall.skill_limit, recall.max_chars) == (5, 12000)
    assert loaded.config.skills.enabled is False
    assert loaded.config.backend == "local"


def test_global_overrides_defaults_and_objects_merge_key_by_key(agent_dir: Path) -> None:
    path = write_global(agent_dir, {"recall": {"deadlineMs": 1500}, "logLevel": "debug"})
    loaded = load(agent_dir)
    assert loaded.ok, messages(loaded)
    assert loaded.config.recall.deadline_ms == 1500
    assert loaded.config.recall.l0_limit == 4  # untouched sibling keeps its default
    assert loaded.config.log_level == "debug"
    assert ConfigSource("global", str(path)) in loaded.sources


def test_project_overrides_global_and_env_overrides_both(agent_dir: Path, project_dir: Path) -> None:
    write_global(
        agent_dir,
        {
            "enabled": False,
            "allowProjectConfig": True,
            "recall": {"l0Limit": 3, "maxChars": 9000},
            "memorycore": {**COMPLETE_MEMORYCORE, "serviceId": "from-file"},
        },
    )
    write_project(project_dir, {"recall": {"l0Limit": 1}})
    env = {"PI_MEMORY_BRIDGE_ENABLED": "1", "TDAI_MEMORY_SERVICE_ID": "from-env"}
    loaded = load(agent_dir, project_dir, env=env)
    assert loaded.ok, messages(loaded)
    assert loaded.config.enabled is True  # env beats global
    assert loaded.config.recall.l0_limit == 1  # project beats global
    assert loaded.config.recall.max_chars == 9000  # global beats default
    assert loaded.config.memorycore is not None
    assert loaded.config.memorycore.service_id == "from-env"
    assert loaded.config.memorycore.endpoint == COMPLETE_MEMORYCORE["endpoint"]  # merged key by key
    assert [source.kind for source in loaded.sources] == ["default", "global", "project", "env"]


def test_env_builds_memorycore_settings_on_top_of_a_partial_file(agent_dir: Path) -> None:
    write_global(agent_dir, {"memorycore": {"endpoint": "https://m.example.com", "teamId": "t"}})
    env = {
        "TDAI_MEMORY_AGENT_ID": " a ",
        "TDAI_MEMORY_USER_ID": "u",
        "TDAI_MEMORY_TIMEOUT_MS": "1200",
        "TDAI_MEMORY_TEAM_ID": "",  # empty means unset, not "clear the file's value"
    }
    loaded = load(agent_dir, env=env)
    assert loaded.config.memorycore == MemoryCoreSettings(
        endpoint="https://m.example.com", team_id="t", agent_id="a", user_id="u", timeout_ms=1200
    )


# --- errors are named, never dropped ----------------------------------------------------------


def test_unknown_keys_are_named_with_the_file(agent_dir: Path) -> None:
    path = write_global(agent_dir, {"recal": {}, "recall": {"deadline_ms": 100, "maxChar": 2000}})
    loaded = load(agent_dir)
    assert f'recal in {path}: unknown key (did you mean "recall"?)' in messages(loaded)
    assert (
        f'recall.deadline_ms in {path}: unknown key (keys are camelCase: did you mean "deadlineMs"?)'
        in messages(loaded)
    )
    assert f'recall.maxChar in {path}: unknown key (did you mean "maxChars"?)' in messages(loaded)


@pytest.mark.parametrize(
    ("document", "key", "message"),
    [
        ({"recall": {"deadlineMs": 50}}, "recall.deadlineMs", "must be an integer between 100 and 30000"),
        ({"recall": {"deadlineMs": "3000"}}, "recall.deadlineMs", "must be an integer between 100 and 30000"),
        ({"recall": {"l0Limit": True}}, "recall.l0Limit", "must be an integer between 0 and 20"),
        ({"recall": {"maxChars": 12000.0}}, "recall.maxChars", "must be an integer between 1000 and 48000"),
        (
            {"recall": {"minPromptChars": 101}},
            "recall.minPromptChars",
            "must be an integer between 0 and 100",
        ),
        ({"enabled": "yes"}, "enabled", "must be true or false"),
        ({"backend": "memcore"}, "backend", 'must be one of "local", "memorycore"'),
        ({"logLevel": "trace"}, "logLevel", 'must be one of "debug", "info", "warning", "error"'),
        ({"recall": []}, "recall", "must be an object"),
        ({"memorycore": 3}, "memorycore", "must be an object or null"),
        ({"memorycore": {"userId": "a|b"}}, "memorycore.userId", 'must not contain "|"'),
        ({"memorycore": {"teamId": "  "}}, "memorycore.teamId", "must not be empty"),
        ({"memorycore": {"timeoutMs": 0}}, "memorycore.timeoutMs", "must be an integer between 1 and 30000"),
        ({"memorycore": {"userKeyFile": 7}}, "memorycore.userKeyFile", "must be a path (a string) or null"),
        ({"schemaVersion": 2}, "schemaVersion", "must be 1 (this version of pi-memory-bridge reads"),
    ],
)
def test_ill_typed_keys_are_named(agent_dir: Path, document: Any, key: str, message: str) -> None:
    path = write_global(agent_dir, document)
    problem = only_problem(load(agent_dir), key)
    assert problem.severity == "error"
    assert problem.source == str(path)
    assert str(problem).startswith(f"{key} in {path}: {message}")


def test_broken_global_file_turns_memory_off(agent_dir: Path) -> None:
    path = write_global(agent_dir, {"backend": "memorycore", "recall": {"deadlineMs": 1}})
    loaded = load(agent_dir, env={"PI_MEMORY_BRIDGE_ENABLED": "true"})
    assert not loaded.ok
    assert loaded.config.enabled is False  # not even the env switch revives a config we can't read
    assert not loaded.backend_ready
    assert f"{path}: memory is off until the problems in this file are fixed" in messages(loaded)
    assert ConfigSource("global", str(path)) in loaded.sources


def test_json_syntax_error_names_file_and_line(agent_dir: Path) -> None:
    path = write_global(agent_dir, '{\n  "enabled": true,\n  "backend": "local",,\n}\n')
    loaded = load(agent_dir)
    assert any(m.startswith(f"{path}: invalid JSON at line 3, column") for m in messages(loaded))
    assert loaded.config.enabled is False


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[]", "must hold a JSON object ({...}), not an array"),
        ("", "invalid JSON at line 1, column 1"),
        ('{"recall": {"maxChars": NaN}}', "NaN is not a JSON number"),
        (b"\xff\xfe{}", "is not UTF-8 text"),
        ('"local"', "must hold a JSON object ({...}), not a string"),
        ("null", "must hold a JSON object ({...}), not null"),
        ("true", "must hold a JSON object ({...}), not a boolean"),
        ("3", "must hold a JSON object ({...}), not a number"),
    ],
)
def test_unusable_json_documents(agent_dir: Path, text: str | bytes, expected: str) -> None:
    path = global_config_path(agent_dir)
    path.parent.mkdir(parents=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    loaded = load(agent_dir)
    assert any(expected in m for m in messages(loaded)), messages(loaded)
    assert loaded.config.enabled is False


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (os.mkfifo, "is not a regular file; a config file must be a regular file"),
        (lambda p: p.symlink_to(p), "cannot be read: Too many levels of symbolic links"),
    ],
)
def test_a_config_path_that_is_no_file_is_refused_without_blocking(
    agent_dir: Path, make: Callable[[Path], object], expected: str
) -> None:
    path = global_config_path(agent_dir)
    path.parent.mkdir(parents=True)
    make(path)
    loaded = load(agent_dir)
    assert f"{path}: {expected}" in messages(loaded), messages(loaded)
    assert loaded.config.enabled is False


@pytest.mark.parametrize(
    ("settings", "key", "expected"),
    [
        (
            {"memorycore": {**COMPLETE_MEMORYCORE, "teamId": 5}},
            "memorycore.teamId",
            "must be a string or null",
        ),
        ({"recall": 3}, "recall", "must be an object"),
        ({"recall": {"maxChars": "big"}}, "recall.maxChars", "must be an integer between 1000 and 48000"),
    ],
)
def test_a_value_of_the_wrong_type_says_what_the_key_takes(
    agent_dir: Path, settings: dict[str, Any], key: str, expected: str
) -> None:
    path = write_global(agent_dir, {"backend": "memorycore", **settings})
    assert f"{key} in {path}: {expected}" in messages(load(agent_dir)), messages(load(agent_dir))


def test_an_integer_is_described_by_the_bounds_it_has() -> None:
    from typing import Annotated

    from pydantic import BaseModel, Field

    from pi_memory_bridge.config._explain import describe_field

    class Limits(BaseModel):
        both: Annotated[int, Field(ge=1, le=9)]
        floor: Annotated[int, Field(ge=1)]
        plain: int

    said = {name: describe_field(field) for name, field in Limits.model_fields.items()}
    assert said == {
        "both": "must be an integer between 1 and 9",
        "floor": "must be an integer of at least 1",
        "plain": "must be an integer",
    }


def test_duplicate_keys_are_errors(agent_dir: Path) -> None:
    path = write_global(agent_dir, '{"recall": {"enabled": true, "enabled": false}}')
    loaded = load(agent_dir)
    assert f"recall.enabled in {path}: appears more than once in the same object; keep only one" in (
        messages(loaded)
    )
    assert loaded.config.enabled is False


def test_utf8_bom_is_accepted(agent_dir: Path) -> None:
    path = global_config_path(agent_dir)
    path.parent.mkdir(parents=True)
    path.write_bytes(b'\xef\xbb\xbf{"logLevel": "error"}')
    assert load(agent_dir).config.log_level == "error"


def test_missing_file_and_missing_directory_are_simply_absent(tmp_path: Path) -> None:
    loaded = load(tmp_path / "no" / "such" / "agent", tmp_path / "nowhere")
    assert loaded.ok and loaded.sources == (ConfigSource("default", None),)


def test_config_file_that_is_a_fifo_is_refused_without_blocking(agent_dir: Path) -> None:
    path = global_config_path(agent_dir)
    path.parent.mkdir(parents=True)
    os.mkfifo(path)
    loaded = load(agent_dir)
    assert f"{path}: is not a regular file; a config file must be a regular file" in messages(loaded)
    assert loaded.config.enabled is False


def test_config_file_that_is_a_directory_is_refused(agent_dir: Path) -> None:
    global_config_path(agent_dir).mkdir(parents=True)
    loaded = load(agent_dir)
    assert not loaded.ok and loaded.config.enabled is False


def test_config_file_symlink_is_followed_but_a_dangling_one_is_an_error(
    agent_dir: Path, tmp_path: Path
) -> None:
    real = tmp_path / "dotfiles" / "memory.json"
    real.parent.mkdir()
    real.write_text('{"logLevel": "warning"}')
    link = global_config_path(agent_dir)
    link.parent.mkdir(parents=True)
    link.symlink_to(real)
    assert load(agent_dir).config.log_level == "warning"
    real.unlink()
    loaded = load(agent_dir)
    assert f"{link}: is a symbolic link to a file that does not exist" in messages(loaded)
    assert loaded.config.enabled is False


def test_oversized_config_file_is_refused(agent_dir: Path) -> None:
    write_global(agent_dir, '{"logLevel": "info"' + " " * (300 * 1024) + "}")
    loaded = load(agent_dir)
    assert any("is larger than" in m for m in messages(loaded))


# --- project sandbox ---------------------------------------------------------------------------


def test_project_file_ignored_unless_allowed_and_trusted(agent_dir: Path, project_dir: Path) -> None:
    write_project(project_dir, {"recall": {"l0Limit": 0}})
    # Trusted but not allowed: ignored, with a warning that says why.
    not_allowed = load(agent_dir, project_dir, trusted=True)
    assert not_allowed.config.recall.l0_limit == 4
    assert not_allowed.ok and len(not_allowed.warnings) == 1
    assert "allowProjectConfig" in not_allowed.warnings[0].message
    # Allowed but not trusted: not even looked at.
    write_global(agent_dir, {"allowProjectConfig": True})
    untrusted = load(agent_dir, project_dir, trusted=False)
    assert untrusted.config.recall.l0_limit == 4
    assert untrusted.problems == ()
    assert [source.kind for source in untrusted.sources] == ["default", "global"]
    # No cwd: nothing to read.
    assert load(agent_dir, None, trusted=True).config.recall.l0_limit == 4
    # Allowed and trusted: applied.
    assert load(agent_dir, project_dir, trusted=True).config.recall.l0_limit == 0


def test_untrusted_project_file_is_not_read_even_when_broken(agent_dir: Path, project_dir: Path) -> None:
    write_global(agent_dir, {"allowProjectConfig": True})
    write_project(project_dir, "{ this is not json")
    loaded = load(agent_dir, project_dir, trusted=False)
    assert loaded.ok and loaded.problems == ()


def test_project_may_not_set_anything_but_recall(agent_dir: Path, project_dir: Path) -> None:
    write_global(agent_dir, {"allowProjectConfig": True, "recall": {"maxChars": 8000}})
    path = write_project(
        project_dir,
        {
            "recall": {"maxChars": 4000},
            "backend": "memorycore",
            "memorycore": {"endpoint": "https://evil.example.com"},
            "allowProjectConfig": True,
        },
    )
    loaded = load(agent_dir, project_dir)
    for key in ("backend", "memorycore", "allowProjectConfig"):
        problem = only_problem(loaded, key)
        assert problem.severity == "warning" and problem.source == str(path)
        assert problem.message == (
            f"a project file may set only recall settings; set {key} in the global config; ignored"
        )
    # Each forbidden key is refused by name; the rest of the file applies and recall stays on,
    # so a cloned repository cannot silence memory by asking for what it may not have.
    assert loaded.config.backend == "local"
    assert loaded.config.memorycore is None
    assert loaded.config.recall.enabled is True
    assert loaded.config.recall.max_chars == 4000
    assert loaded.ok and loaded.config.enabled and loaded.backend_ready


def test_project_unknown_and_ill_typed_recall_keys_are_named(agent_dir: Path, project_dir: Path) -> None:
    write_global(agent_dir, {"allowProjectConfig": True})
    path = write_project(
        project_dir, {"recal": {}, "recall": {"l0Limit": "2", "verbose": True, "l1Limit": 1}}
    )
    loaded = load(agent_dir, project_dir)
    assert f'recal in {path}: unknown key (did you mean "recall"?); ignored' in messages(loaded)
    assert f"recall.l0Limit in {path}: must be an integer between 0 and 20; ignored" in messages(loaded)
    assert f"recall.verbose in {path}: unknown key; ignored" in messages(loaded)
    assert loaded.ok and loaded.config.recall.enabled is True
    assert (loaded.config.recall.l0_limit, loaded.config.recall.l1_limit) == (4, 1)  # the valid key applies


def test_project_recall_section_of_the_wrong_type_is_refused(agent_dir: Path, project_dir: Path) -> None:
    write_global(agent_dir, {"allowProjectConfig": True})
    path = write_project(project_dir, {"recall": ["off"]})
    loaded = load(agent_dir, project_dir)
    assert messages(loaded) == [f"recall in {path}: must be an object of recall settings; ignored"]
    assert loaded.ok and loaded.config.recall.enabled is True


def test_unreadable_project_json_is_ignored_and_the_users_settings_apply(
    agent_dir: Path, project_dir: Path
) -> None:
    write_global(agent_dir, {"allowProjectConfig": True, "recall": {"l0Limit": 3}})
    path = write_project(project_dir, '{"recall": {\n"l0Limit": 2\n')
    loaded = load(agent_dir, project_dir)
    assert any(m.startswith(f"{path}: invalid JSON at line") for m in messages(loaded))
    assert f"{path}: ignored until it can be read; your own settings apply" in messages(loaded)
    assert loaded.ok and loaded.config.recall.enabled is True and loaded.config.recall.l0_limit == 3


def test_project_may_lower_but_never_raise_recall(agent_dir: Path, project_dir: Path) -> None:
    write_global(
        agent_dir,
        {"allowProjectConfig": True, "recall": {"deadlineMs": 2000, "l1Limit": 3, "minPromptChars": 5}},
    )
    path = write_project(
        project_dir,
        {
            "recall": {
                "deadlineMs": 30000,  # raise: ignored
                "maxChars": 48000,  # raise over the default: ignored
                "l0Limit": 2,  # lower: applied
                "l1Limit": 3,  # equal: applied
                "minPromptChars": 1,  # fewer prompts skipped = more recall: ignored
                "skipTrivialPrompts": False,  # more recall: ignored
            }
        },
    )
    loaded = load(agent_dir, project_dir)
    recall = loaded.config.recall
    assert (recall.deadline_ms, recall.max_chars, recall.l0_limit, recall.l1_limit) == (2000, 12000, 2, 3)
    assert (recall.min_prompt_chars, recall.skip_trivial_prompts) == (5, True)
    assert loaded.ok  # refused raises are warnings: the file is valid, its raises are not honoured
    ignored = {problem.key for problem in loaded.warnings}
    assert ignored == {
        "recall.deadlineMs",
        "recall.maxChars",
        "recall.minPromptChars",
        "recall.skipTrivialPrompts",
    }
    assert all(problem.source == str(path) for problem in loaded.warnings)
    assert (
        f"recall.deadlineMs in {path}: 30000 is above the current 2000; a project may make recall "
        "only cheaper, so this value is ignored" in messages(loaded)
    )


def test_project_may_turn_recall_off_but_not_on(agent_dir: Path, project_dir: Path) -> None:
    write_global(agent_dir, {"allowProjectConfig": True})
    write_project(
        project_dir, {"recall": {"enabled": False, "skipTrivialPrompts": True, "minPromptChars": 9}}
    )
    loaded = load(agent_dir, project_dir)
    assert loaded.problems == ()
    assert loaded.config.recall.enabled is False
    assert loaded.config.recall.min_prompt_chars == 9

    write_global(agent_dir, {"allowProjectConfig": True, "recall": {"enabled": False}})
    write_project(project_dir, {"recall": {"enabled": True}})
    loaded = load(agent_dir, project_dir)
    assert loaded.config.recall.enabled is False
    assert only_problem(loaded, "recall.enabled").severity == "warning"


def test_every_recall_setting_has_a_cheaper_direction() -> None:
    assert set(CHEAPER_DIRECTION) == set(RecallSettings.model_fields)


recall_values = st.fixed_dictionaries(
    {},
    optional={
        "enabled": st.booleans(),
        "deadlineMs": st.integers(100, 30000),
        "l0Limit": st.integers(0, 20),
        "l1Limit": st.integers(0, 20),
        "l2Limit": st.integers(0, 20),
        "skillLimit": st.integers(0, 20),
        "maxChars": st.integers(1000, 48000),
        "skipTrivialPrompts": st.booleans(),
        "minPromptChars": st.integers(0, 100),
    },
)


@settings(max_examples=60, deadline=None)
@given(user=recall_values, project=recall_values)
def test_project_can_never_make_recall_more_expensive(user: dict[str, Any], project: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as temp:
        agent, cwd = Path(temp) / "agent", Path(temp) / "project"
        write_global(agent, {"allowProjectConfig": True, "recall": user})
        write_project(cwd, {"recall": project})
        ceiling = RecallSettings.model_validate(user, by_alias=True)
        effective = load(agent, cwd).config.recall
    for name, direction in CHEAPER_DIRECTION.items():
        mine, theirs = getattr(effective, name), getattr(ceiling, name)
        assert mine <= theirs if direction == "lower" else mine >= theirs, name


# --- env ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "expected"), [("0", False), ("off", False), ("TRUE", True), ("yes", True)])
def test_enabled_env_switch(agent_dir: Path, value: str, expected: bool) -> None:
    assert load(agent_dir, env={"PI_MEMORY_BRIDGE_ENABLED": value}).config.enabled is expected


@pytest.mark.parametrize(
    ("var", "value"), [("PI_MEMORY_BRIDGE_ENABLED", "maybe"), ("PI_MEMORY_BRIDGE_BACKEND", "memcore")]
)
def test_bad_env_switch_turns_memory_off(agent_dir: Path, var: str, value: str) -> None:
    loaded = load(agent_dir, env={var: value})
    problem = only_problem(loaded, var)
    assert problem.source == "environment" and problem.severity == "error"
    assert problem.message.endswith("memory is off until it is fixed")
    assert loaded.config.enabled is False and not loaded.backend_ready


def test_bad_memorycore_env_value_is_not_replaced_by_the_file_value(agent_dir: Path) -> None:
    write_key(data_dir(agent_dir) / "user.key")
    write_global(
        agent_dir,
        {"backend": "memorycore", "memorycore": {**COMPLETE_MEMORYCORE, "userKeyFile": "user.key"}},
    )
    assert load(agent_dir).backend_ready
    loaded = load(agent_dir, env={"TDAI_MEMORY_ENDPOINT": "http://memory.example.com"})
    endpoint = only_problem(loaded, "TDAI_MEMORY_ENDPOINT")
    assert "remote endpoints must use https" in str(endpoint)
    assert not loaded.backend_ready
    assert loaded.config.backend == "memorycore"  # reported, not silently switched to local
    loaded = load(agent_dir, env={"TDAI_MEMORY_TIMEOUT_MS": "3s"})
    assert str(only_problem(loaded, "TDAI_MEMORY_TIMEOUT_MS")) == (
        "TDAI_MEMORY_TIMEOUT_MS in environment: must be an integer between 1 and 30000"
    )
    assert not loaded.backend_ready


# --- memorycore completeness -------------------------------------------------------------------


def test_memorycore_incomplete_names_missing_keys_and_is_not_ready(agent_dir: Path) -> None:
    path = write_global(agent_dir, {"backend": "memorycore", "memorycore": {"teamId": "t"}})
    loaded = load(agent_dir)
    assert not loaded.backend_ready
    assert loaded.config.backend == "memorycore" and loaded.config.enabled
    problem = only_problem(loaded, "backend")
    assert problem.source == str(path)
    for missing in ("memorycore.endpoint", "TDAI_MEMORY_ENDPOINT", "memorycore.agentId", "memorycore.userId"):
        assert missing in problem.message
    assert "memorycore.teamId" not in problem.message
    assert "a key (TDAI_MEMORY_USER_KEY" in problem.message
    assert "no fallback to the local backend" in problem.message


def test_memorycore_from_env_alone(agent_dir: Path) -> None:
    env = {
        "PI_MEMORY_BRIDGE_BACKEND": "MemoryCore",
        "TDAI_MEMORY_ENDPOINT": "http://127.0.0.1:8420",
        "TDAI_MEMORY_TEAM_ID": "t",
        "TDAI_MEMORY_AGENT_ID": "a",
        "TDAI_MEMORY_USER_ID": "u",
        "TDAI_MEMORY_USER_KEY": FAKE_USER_KEY,
    }
    loaded = load(agent_dir, env=env)
    assert loaded.ok and loaded.backend_ready, messages(loaded)
    assert loaded.secrets.user_key is not None
    assert loaded.secrets.user_key.get_secret_value() == FAKE_USER_KEY
    assert loaded.secrets.user_key_source == "TDAI_MEMORY_USER_KEY"
    bearer = loaded.secrets.gateway_bearer()  # falls back to the user key
    assert bearer is not None and bearer.get_secret_value() == FAKE_USER_KEY
    loaded = load(agent_dir, env={**env, "TDAI_MEMORY_GATEWAY_API_KEY": FAKE_GATEWAY_KEY})
    bearer = loaded.secrets.gateway_bearer()
    assert bearer is not None and bearer.get_secret_value() == FAKE_GATEWAY_KEY
    assert [source.kind for source in loaded.sources] == ["default", "env"]


def test_disabled_memory_reads_no_key_files_and_reports_no_missing_keys(agent_dir: Path) -> None:
    write_global(
        agent_dir,
        {"enabled": False, "backend": "memorycore", "memorycore": {"userKeyFile": "/nonexistent/key"}},
    )
    loaded = load(agent_dir)
    assert loaded.ok and loaded.problems == () and not loaded.backend_ready


# --- key files ---------------------------------------------------------------------------------


def memorycore_global(agent_dir: Path, **extra: Any) -> Path:
    return write_global(agent_dir, {"backend": "memorycore", "memorycore": {**COMPLETE_MEMORYCORE, **extra}})


def test_key_file_relative_to_the_config_file(agent_dir: Path) -> None:
    key = write_key(data_dir(agent_dir) / "keys" / "user.key")
    memorycore_global(agent_dir, userKeyFile="keys/user.key")
    loaded = load(agent_dir)
    assert loaded.ok and loaded.backend_ready, messages(loaded)
    assert loaded.config.memorycore is not None
    assert loaded.config.memorycore.user_key_file == key
    assert loaded.secrets.user_key is not None
    assert loaded.secrets.user_key.get_secret_value() == FAKE_USER_KEY  # stripped of its newline
    assert loaded.secrets.user_key_source == f"key file {key}"


def test_key_file_home_relative(agent_dir: Path, tmp_path: Path) -> None:
    write_key(tmp_path / "home" / ".keys" / "user.key")
    memorycore_global(agent_dir, userKeyFile="~/.keys/user.key")
    loaded = load(agent_dir, env={"HOME": str(tmp_path / "home")})
    assert loaded.backend_ready, messages(loaded)


def test_env_key_file_relative_to_cwd(agent_dir: Path, project_dir: Path) -> None:
    write_key(project_dir / "secrets" / "gw.key", FAKE_GATEWAY_KEY)
    memorycore_global(agent_dir)
    env = {"TDAI_MEMORY_GATEWAY_API_KEY_FILE": "secrets/gw.key"}
    loaded = load(agent_dir, project_dir, env=env)
    assert loaded.backend_ready, messages(loaded)
    assert loaded.secrets.gateway_api_key is not None
    assert loaded.secrets.gateway_api_key.get_secret_value() == FAKE_GATEWAY_KEY
    no_cwd = load(agent_dir, None, env=env)
    assert "there is no working directory" in str(only_problem(no_cwd, "TDAI_MEMORY_GATEWAY_API_KEY_FILE"))
    assert not no_cwd.backend_ready


def test_env_key_beats_key_file_which_is_then_not_read(agent_dir: Path) -> None:
    memorycore_global(agent_dir, userKeyFile="missing.key")  # would be an error if it were read
    loaded = load(agent_dir, env={"TDAI_MEMORY_USER_KEY": FAKE_USER_KEY})
    assert loaded.ok and loaded.backend_ready, messages(loaded)
    assert loaded.secrets.user_key_source == "TDAI_MEMORY_USER_KEY"
    without_env = load(agent_dir)
    assert "does not exist" in str(only_problem(without_env, "memorycore.userKeyFile"))
    assert not without_env.backend_ready


def key_file_error(agent_dir: Path, prepare: Callable[[Path], object]) -> ConfigProblem:
    key = data_dir(agent_dir) / "user.key"
    key.parent.mkdir(parents=True, exist_ok=True)
    prepare(key)
    path = memorycore_global(agent_dir, userKeyFile="user.key")
    loaded = load(agent_dir)
    assert not loaded.backend_ready
    assert loaded.secrets.user_key is None
    assert str(only_problem(loaded, "backend")).startswith(f"backend in {path}:")
    problem = only_problem(loaded, "memorycore.userKeyFile")
    assert problem.severity == "error" and problem.source == str(path)
    assert str(key) in problem.message
    return problem


def test_key_file_symlink_is_refused(agent_dir: Path, tmp_path: Path) -> None:
    real = write_key(tmp_path / "elsewhere.key")
    problem = key_file_error(agent_dir, lambda key: key.symlink_to(real))
    assert "is a symbolic link" in problem.message


def test_key_file_directory_is_refused(agent_dir: Path) -> None:
    assert "is a directory" in key_file_error(agent_dir, lambda key: key.mkdir()).message


def test_key_file_fifo_is_refused_without_blocking(agent_dir: Path) -> None:
    assert "is a FIFO" in key_file_error(agent_dir, os.mkfifo).message


@pytest.mark.parametrize("content", ["", "  \n\t\n"])
def test_empty_key_file_is_refused(agent_dir: Path, content: str) -> None:
    problem = key_file_error(agent_dir, lambda key: write_key(key, content))
    assert problem.message.endswith("is empty")


def test_key_file_with_more_than_one_token_is_refused(agent_dir: Path) -> None:
    problem = key_file_error(agent_dir, lambda key: write_key(key, "sk-one\nsk-two\n"))
    assert "must hold one key" in problem.message
    assert "sk-one" not in problem.message


def test_oversized_key_file_is_refused(agent_dir: Path) -> None:
    problem = key_file_error(agent_dir, lambda key: write_key(key, "k" * (MAX_KEY_FILE_BYTES + 1)))
    assert f"is larger than {MAX_KEY_FILE_BYTES} bytes" in problem.message


def test_key_file_that_is_not_utf8_is_refused_without_echoing_it(agent_dir: Path) -> None:
    def latin1(key: Path) -> None:
        key.write_bytes(b"sk-caf\xe9-secret\n")
        key.chmod(0o600)

    problem = key_file_error(agent_dir, latin1)
    assert problem.message.endswith("is not UTF-8 text") and "secret" not in problem.message


def test_key_file_below_a_file_is_reported_as_unreadable(agent_dir: Path) -> None:
    blocker = write_key(data_dir(agent_dir) / "keys")  # a file where the key's folder should be
    path = memorycore_global(agent_dir, userKeyFile="keys/user.key")
    problem = only_problem(load(agent_dir), "memorycore.userKeyFile")
    assert problem.severity == "error" and problem.source == str(path)
    assert problem.message == f"{blocker / 'user.key'} cannot be read: Not a directory"


def test_key_file_that_is_a_device_is_refused(agent_dir: Path) -> None:
    memorycore_global(agent_dir, userKeyFile="/dev/null")
    problem = only_problem(load(agent_dir), "memorycore.userKeyFile")
    assert problem.message.startswith("/dev/null is not a regular file; a key file must be a regular file")


def test_key_file_at_the_size_limit_is_accepted(agent_dir: Path) -> None:
    write_key(data_dir(agent_dir) / "user.key", "k" * MAX_KEY_FILE_BYTES)
    memorycore_global(agent_dir, userKeyFile="user.key")
    assert load(agent_dir).backend_ready


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_unreadable_key_file_is_refused(agent_dir: Path) -> None:
    problem = key_file_error(agent_dir, lambda key: write_key(key, mode=0o000))
    assert "cannot be read: permission denied" in problem.message


def test_key_file_permission_error_is_reported(agent_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Runs even as root, where chmod 000 does not stop a read.
    real_open = os.open

    def refuse_key_files(path: Any, flags: int, mode: int = 0o777) -> int:
        if str(path).endswith(".key"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, flags, mode)

    monkeypatch.setattr(os, "open", refuse_key_files)
    problem = key_file_error(agent_dir, lambda key: write_key(key))
    assert problem.message.endswith("cannot be read: permission denied")


def test_group_readable_key_file_loads_with_a_warning(agent_dir: Path) -> None:
    key = write_key(data_dir(agent_dir) / "user.key", mode=0o640)
    path = memorycore_global(agent_dir, userKeyFile="user.key")
    loaded = load(agent_dir)
    assert loaded.ok and loaded.backend_ready
    problem = only_problem(loaded, "memorycore.userKeyFile")
    assert problem.severity == "warning" and problem.source == str(path)
    assert f"mode 0640); restrict it with: chmod 600 {key}" in problem.message
    key.chmod(0o600)
    assert load(agent_dir).problems == ()


def test_env_key_value_is_checked_without_echoing_it(agent_dir: Path) -> None:
    memorycore_global(agent_dir)
    loaded = load(agent_dir, env={"TDAI_MEMORY_USER_KEY": "sk-has a space"})
    problem = only_problem(loaded, "TDAI_MEMORY_USER_KEY")
    assert "sk-has" not in problem.message
    assert not loaded.backend_ready


# --- endpoint and TLS --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "endpoint",
    [
        "https://memory.example.com",
        "https://memory.example.com:8443/prefix",
        "http://127.0.0.1:8420",
        "http://127.0.0.2:8420",
        "http://127.255.255.254",
        "http://localhost:8420",
        "http://LOCALHOST",
        "http://[::1]:8420",
        "https://10.0.0.5",
    ],
)
def test_acceptable_endpoints(endpoint: str) -> None:
    assert MemoryCoreSettings(endpoint=endpoint).endpoint == endpoint


@pytest.mark.parametrize(
    ("endpoint", "reason"),
    [
        ("http://memory.example.com", "remote endpoints must use https"),
        ("http://0.0.0.0:8420", "remote endpoints must use https"),
        ("http://10.0.0.5", "remote endpoints must use https"),
        ("http://localhost.evil.example", "remote endpoints must use https"),
        ("http://[::ffff:8.8.8.8]", "remote endpoints must use https"),
        ("https://user:hunter2@memory.example.com", "must not contain a user name or password"),
        ("https://token@memory.example.com", "must not contain a user name or password"),
        ("ftp://memory.example.com", 'must use https (or http on a loopback address), not "ftp"'),
        ("not a url", "without spaces"),
        ("garbage", "must be a full URL"),
        ("localhost:8420", "must be a full URL"),
        ("https://", "must be a full URL"),
        ("https://[::1", "is not a valid URL"),
        ("https://memory.example.com/?debug=1", "query string or fragment"),
        ("https://memory.example.com:99999", "invalid port"),
        ("https://bad_host!.example", "invalid host name"),
    ],
)
def test_refused_endpoints(endpoint: str, reason: str) -> None:
    with pytest.raises(ValidationError) as caught:
        MemoryCoreSettings(endpoint=endpoint)
    assert reason in str(caught.value)


def test_endpoint_problem_in_a_file_is_named_and_hides_the_password(agent_dir: Path) -> None:
    path = write_global(agent_dir, {"memorycore": {"endpoint": "https://me:hunter2@m.example.com"}})
    loaded = load(agent_dir)
    problem = only_problem(loaded, "memorycore.endpoint")
    assert problem.source == str(path)
    assert "hunter2" not in str(problem)


@settings(max_examples=50, deadline=None)
@given(st.tuples(st.integers(0, 255), st.integers(0, 255), st.integers(0, 255)), st.integers(1, 65535))
def test_any_127_address_is_loopback(octets: tuple[int, int, int], port: int) -> None:
    host = "127.{}.{}.{}".format(*octets)
    assert MemoryCoreSettings(endpoint=f"http://{host}:{port}").endpoint is not None


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 255).filter(lambda first: first != 127), st.integers(0, 255))
def test_plain_http_to_any_other_ipv4_is_refused(first: int, last: int) -> None:
    with pytest.raises(ValidationError, match="remote endpoints must use https"):
        MemoryCoreSettings(endpoint=f"http://{first}.0.0.{last}")


@pytest.mark.parametrize(
    ("document", "key"),
    [
        ({"rejectUnauthorized": False}, "rejectUnauthorized"),
        ({"memorycore": {"verifyTls": False}}, "memorycore.verifyTls"),
        ({"memorycore": {"insecureSkipVerify": True}}, "memorycore.insecureSkipVerify"),
        ({"memorycore": {"tls": {"verify": False}}}, "memorycore.tls"),
        ({"memorycore": {"verify": False}}, "memorycore.verify"),
    ],
)
def test_tls_verification_cannot_be_turned_off_in_a_file(agent_dir: Path, document: Any, key: str) -> None:
    path = write_global(agent_dir, document)
    loaded = load(agent_dir)
    problem = only_problem(loaded, key)
    assert str(problem).startswith(f"{key} in {path}: TLS verification cannot be turned off")
    assert loaded.config.enabled is False


def test_tls_verification_cannot_be_turned_off_from_env(agent_dir: Path) -> None:
    memorycore_global(agent_dir)
    env = {"TDAI_MEMORY_USER_KEY": FAKE_USER_KEY}
    assert load(agent_dir, env={**env, "TDAI_MEMORY_REJECT_UNAUTHORIZED": "true"}).backend_ready
    loaded = load(agent_dir, env={**env, "TDAI_MEMORY_REJECT_UNAUTHORIZED": "false"})
    problem = only_problem(loaded, "TDAI_MEMORY_REJECT_UNAUTHORIZED")
    assert problem.message.startswith("TLS verification cannot be turned off")
    assert not loaded.backend_ready


# --- secrets never leak ------------------------------------------------------------------------


def test_secrets_never_appear_in_repr_str_or_dumps(agent_dir: Path) -> None:
    write_key(data_dir(agent_dir) / "gw.key", FAKE_GATEWAY_KEY)
    memorycore_global(agent_dir, gatewayApiKeyFile="gw.key")
    loaded = load(agent_dir, env={"TDAI_MEMORY_USER_KEY": FAKE_USER_KEY})
    assert loaded.backend_ready, messages(loaded)
    assert loaded.secrets.gateway_api_key is not None
    assert loaded.secrets.gateway_api_key.get_secret_value() == FAKE_GATEWAY_KEY
    for text in (repr(loaded), str(loaded), repr(loaded.secrets), loaded.config.model_dump_json()):
        assert FAKE_USER_KEY not in text
        assert FAKE_GATEWAY_KEY not in text


def test_a_key_pasted_into_the_config_file_is_refused_without_echoing_it(agent_dir: Path) -> None:
    write_global(agent_dir, {"memorycore": {"userKey": FAKE_USER_KEY}})
    loaded = load(agent_dir)
    assert "memorycore.userKey in" in str(only_problem(loaded, "memorycore.userKey"))
    assert all(FAKE_USER_KEY not in m for m in messages(loaded))
    assert FAKE_USER_KEY not in repr(loaded)


# --- writing -----------------------------------------------------------------------------------


def sample_config() -> BridgeConfig:
    return BridgeConfig(
        backend="memorycore",
        allow_project_config=True,
        recall=RecallSettings(deadline_ms=1500, l2_limit=0),
        memorycore=MemoryCoreSettings(
            endpoint="https://memory.example.com",
            team_id="t",
            agent_id="a",
            user_id="u",
            user_key_file=Path("/etc/pi/user.key"),
        ),
    )


def test_write_global_config_round_trips_privately_and_readably(agent_dir: Path) -> None:
    config = sample_config()
    path = write_global_config(agent_dir, config)
    assert path == global_config_path(agent_dir)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    text = path.read_text()
    assert text.endswith("}\n")
    assert text.startswith('{\n  "schemaVersion": 1,\n  "enabled": true,')
    assert '"userKeyFile": "/etc/pi/user.key"' in text
    assert "null" not in text
    assert load(agent_dir).config == config
    assert sorted(p.name for p in path.parent.iterdir()) == ["config.json"]  # no temp file left


def test_write_global_config_replaces_loosely_permitted_file(agent_dir: Path) -> None:
    path = write_global(agent_dir, {"logLevel": "debug"})
    path.chmod(0o644)
    write_global_config(agent_dir, BridgeConfig(log_level="error"))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load(agent_dir).config.log_level == "error"


def test_write_global_config_never_writes_secrets(agent_dir: Path) -> None:
    write_key(data_dir(agent_dir) / "user.key")
    memorycore_global(agent_dir, userKeyFile="user.key")
    loaded = load(agent_dir, env={"TDAI_MEMORY_GATEWAY_API_KEY": FAKE_GATEWAY_KEY})
    assert loaded.secrets.user_key is not None and loaded.secrets.gateway_api_key is not None
    text = write_global_config(agent_dir, loaded.config).read_text()
    assert FAKE_USER_KEY not in text and FAKE_GATEWAY_KEY not in text


def test_write_global_config_is_atomic_when_the_rename_fails(
    agent_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_global(agent_dir, {"logLevel": "debug"})
    before = path.read_text()

    def fail(source: Any, target: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError, match="No space left"):
        write_global_config(agent_dir, BridgeConfig(log_level="error"))
    assert path.read_text() == before
    assert sorted(p.name for p in path.parent.iterdir()) == ["config.json"]


def test_write_global_config_through_a_symlink_loop_is_the_oserror_it_promises(agent_dir: Path) -> None:
    path = global_config_path(agent_dir)
    path.parent.mkdir(parents=True)
    path.symlink_to(path)  # callers (setup, pause) report an OSError; anything else was a traceback
    with pytest.raises(OSError, match="Too many levels of symbolic links"):
        write_global_config(agent_dir, BridgeConfig(log_level="error"))
    assert path.is_symlink() and os.readlink(path) == str(path)
    assert sorted(p.name for p in path.parent.iterdir()) == ["config.json"]


def test_write_global_config_refuses_an_unvalidated_config(agent_dir: Path) -> None:
    bad = BridgeConfig.model_construct(
        memorycore=MemoryCoreSettings.model_construct(endpoint="http://x.example")
    )
    with pytest.raises(ValidationError):
        write_global_config(agent_dir, bad)
    assert not global_config_path(agent_dir).exists()


def test_write_global_config_keeps_a_dotfile_symlink(agent_dir: Path, tmp_path: Path) -> None:
    real = tmp_path / "dotfiles" / "memory.json"
    real.parent.mkdir()
    real.write_text("{}")
    link = global_config_path(agent_dir)
    link.parent.mkdir(parents=True)
    link.symlink_to(real)
    write_global_config(agent_dir, BridgeConfig(log_level="warning"))
    assert link.is_symlink()
    assert json.loads(real.read_text())["logLevel"] == "warning"


configs = st.builds(
    BridgeConfig,
    enabled=st.booleans(),
    backend=st.sampled_from(["local", "memorycore"]),
    allow_project_config=st.booleans(),
    recall=st.builds(
        RecallSettings,
        deadline_ms=st.integers(100, 30000),
        l0_limit=st.integers(0, 20),
        max_chars=st.integers(1000, 48000),
        skip_trivial_prompts=st.booleans(),
    ),
    memorycore=st.none()
    | st.builds(
        MemoryCoreSettings,
        endpoint=st.sampled_from(["https://m.example.com", "http://127.0.0.1:8420", "http://[::1]:1"]),
        team_id=st.text(st.characters(codec="utf-8", exclude_characters="|"), min_size=1, max_size=20).filter(
            lambda text: text.strip() == text and text.isprintable() and text != ""
        ),
        timeout_ms=st.integers(1, 30000),
    ),
    log_level=st.sampled_from(["debug", "info", "warning", "error"]),
)


@settings(max_examples=40, deadline=None)
@given(configs)
def test_written_config_loads_back_identically(config: BridgeConfig) -> None:
    with tempfile.TemporaryDirectory() as temp:
        agent = Path(temp)
        write_global_config(agent, config)
        loaded = load(agent)
        assert loaded.config == config


def test_memorycore_cache_ttl_is_configurable_and_bounded(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    (agent / "memory-bridge").mkdir(parents=True)
    path = agent / "memory-bridge" / "config.json"
    path.write_text(json.dumps({"memorycore": {"cacheTtlS": 5}}), encoding="utf-8")
    loaded = load_config(agent_dir=agent, cwd=None, project_trusted=False, env={})
    assert loaded.config.memorycore is not None and loaded.config.memorycore.cache_ttl_s == 5
    path.write_text(json.dumps({"memorycore": {"cacheTtlS": 700}}), encoding="utf-8")
    loaded = load_config(agent_dir=agent, cwd=None, project_trusted=False, env={})
    assert any(p.key == "memorycore.cacheTtlS" for p in loaded.problems), loaded.problems


def test_memorycore_delivery_concurrency_is_configurable_and_bounded(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    (agent / "memory-bridge").mkdir(parents=True)
    path = agent / "memory-bridge" / "config.json"
    path.write_text(json.dumps({"memorycore": {}}), encoding="utf-8")
    loaded = load_config(agent_dir=agent, cwd=None, project_trusted=False, env={})
    assert loaded.config.memorycore is not None and loaded.config.memorycore.delivery_concurrency == 8
    path.write_text(json.dumps({"memorycore": {"deliveryConcurrency": 1}}), encoding="utf-8")
    loaded = load_config(agent_dir=agent, cwd=None, project_trusted=False, env={})
    assert loaded.config.memorycore is not None and loaded.config.memorycore.delivery_concurrency == 1
    for bad in (0, 33, "many"):
        path.write_text(json.dumps({"memorycore": {"deliveryConcurrency": bad}}), encoding="utf-8")
        loaded = load_config(agent_dir=agent, cwd=None, project_trusted=False, env={})
        assert any(p.key == "memorycore.deliveryConcurrency" for p in loaded.problems), loaded.problems
