"""The MemoryCore setup wizard: every dialog, every refusal, and what it writes (or does not).

Identity and the L0-L3 probe go over loopback HTTP to `FakeMemoryCore` through the fake SDK; the
team/agent directory (not modelled by the fake server) is a small in-test metadata client that
keeps the fake SDK's transport for `verify_auth`.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flow_driver import Step
from flow_driver import drive as drive_flow
from memorycore_fake import (
    FAKE_API_KEY,
    FAKE_USER_KEY,
    FakeAsyncMetadataClient,
    FakeMemoryCore,
    FakeTDAMError,
    Fault,
    fake_sdk_bindings,
    serve,
)
from pi_memory_bridge.backends.memorycore import SdkBindings, install_command, load_sdk
from pi_memory_bridge.commands.setup import (
    CANCELLED,
    CREATE_AGENT,
    CREATE_TEAM,
    GATEWAY_FILE,
    GATEWAY_NONE,
    SetupDeps,
    setup_flow,
)
from pi_memory_bridge.config import global_config_path, load_config

Answer = object

JsonDict = dict[str, Any]
TEAM = "Core (team-core)"
PRIVATE = "Mine (agt-mine)"
SHARED = "Everyone (agt-shared)"


@dataclasses.dataclass
class DirectoryState:
    """The metadata store's teams and agents, as the in-test client sees and changes them."""

    teams: list[JsonDict]
    agents: list[JsonDict]
    archived: list[str] = dataclasses.field(default_factory=list)
    requests: list[tuple[str, JsonDict]] = dataclasses.field(default_factory=list)
    fail: dict[str, Exception] = dataclasses.field(default_factory=dict)  # a call's error, by name


def directory_state() -> DirectoryState:
    return DirectoryState(
        teams=[{"team_id": "team-core", "name": "Core", "status": "active"}],
        agents=[
            {"agent_id": "agt-mine", "team_id": "team-core", "name": "Mine", "visibility": "private"},
            {"agent_id": "agt-shared", "team_id": "team-core", "name": "Everyone", "visibility": "team"},
        ],
    )


class DirectoryClient(FakeAsyncMetadataClient):
    """`AsyncMetadataClient` with the team/agent calls answered from a `DirectoryState`."""

    def __init__(self, state: DirectoryState, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.state = state

    @staticmethod
    def _page(items: list[JsonDict], request: JsonDict) -> JsonDict:
        offset, limit = request.get("offset", 0), request.get("limit", 20)
        return {"items": items[offset : offset + limit], "total": len(items)}

    async def list_teams(self, user_id_or_request: JsonDict) -> JsonDict:
        self.state.requests.append(("list_teams", user_id_or_request))
        if "list_teams" in self.state.fail:
            raise self.state.fail["list_teams"]
        return self._page(self.state.teams, user_id_or_request)

    async def create_team(self, p: JsonDict) -> JsonDict:
        self.state.requests.append(("create_team", p))
        if "create_team" in self.state.fail:
            raise self.state.fail["create_team"]
        team = {"team_id": f"team-{len(self.state.teams)}", "name": p["name"], "owner": p["owner_user_id"]}
        self.state.teams.append(team)
        return {"team_id": team["team_id"], "created_at": "2026-01-01T00:00:00Z"}

    async def list_agents(self, p: JsonDict) -> JsonDict:
        self.state.requests.append(("list_agents", p))
        if "list_agents" in self.state.fail:
            raise self.state.fail["list_agents"]
        return self._page([a for a in self.state.agents if a["team_id"] == p["team_id"]], p)

    async def create_agent(self, p: JsonDict) -> JsonDict:
        self.state.requests.append(("create_agent", p))
        if "create_agent" in self.state.fail:
            raise self.state.fail["create_agent"]
        agent = {**p, "agent_id": f"agt-new{len(self.state.agents)}"}
        self.state.agents.append(agent)
        return agent

    async def archive_agent(self, agent_id: str) -> JsonDict:
        self.state.archived.append(agent_id)
        return {"agent_id": agent_id}


@dataclasses.dataclass
class World:
    fake: FakeMemoryCore
    url: str
    state: DirectoryState
    deps: SetupDeps
    keys: Path

    @property
    def config_path(self) -> Path:
        return global_config_path(self.deps.agent_dir)


def bindings(state: DirectoryState) -> SdkBindings:
    return dataclasses.replace(
        fake_sdk_bindings(), metadata_client=lambda *a, **kw: DirectoryClient(state, *a, **kw)
    )


def write_key(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")
    path.chmod(0o600)
    return path


@pytest.fixture
def w(tmp_path: Path) -> Iterator[World]:
    yield from make_world(tmp_path, FAKE_API_KEY)


def make_world(tmp_path: Path, api_key: str) -> Iterator[World]:
    fake = FakeMemoryCore(api_key)
    state = directory_state()
    keys = tmp_path / "keys"
    write_key(keys / "user-key", FAKE_USER_KEY)
    write_key(keys / "gateway-key", FAKE_API_KEY)
    deps = SetupDeps(agent_dir=tmp_path / "agent", cwd=tmp_path, env={"HOME": str(tmp_path)},
                     sdk=lambda: bindings(state))  # fmt: skip
    with serve(fake) as url:
        yield World(fake, url, state, deps, keys)


async def drive(deps: SetupDeps, answers: list[Answer], *, has_ui: bool = True) -> list[Step]:
    return await drive_flow(lambda dialog: setup_flow(deps, dialog), list(answers), has_ui=has_ui, exact=True)


def happy_answers(w: World) -> list[Answer]:
    return [w.url, "default", "keys/user-key", GATEWAY_FILE, "~/keys/gateway-key", TEAM, PRIVATE, True]


def assert_nothing_written(w: World) -> None:
    assert not w.config_path.exists()
    assert not w.deps.agent_dir.exists() or not any(w.deps.agent_dir.rglob("*.json"))


# ---- the happy paths ------------------------------------------------------------------------


async def test_pick_existing_team_and_private_agent_writes_a_private_secret_free_file(w: World) -> None:
    steps = await drive(w.deps, happy_answers(w))
    assert [s.kind for s in steps] == ["input", "input", "input", "select", "input", "select", "select",
                                       "confirm", "done"]  # fmt: skip
    final = steps[-1]
    assert final.level == "info" and final.reload is True
    assert str(w.config_path) in final.message
    assert stat.S_IMODE(os.stat(w.config_path).st_mode) == 0o600
    text = w.config_path.read_text()
    assert FAKE_USER_KEY not in text and FAKE_API_KEY not in text
    data = json.loads(text)
    assert data["enabled"] is True and data["backend"] == "memorycore"
    assert data["memorycore"] == {
        "endpoint": w.url,
        "serviceId": "default",
        "teamId": "team-core",
        "agentId": "agt-mine",
        "userId": "usr-fake",
        "userKeyFile": str(w.keys / "user-key"),  # relative to cwd, made absolute
        "gatewayApiKeyFile": str(w.keys / "gateway-key"),  # ~ expanded
        "timeoutMs": 3000,
        "cacheTtlS": 60,
        "deliveryConcurrency": 8,
    }
    # the preview showed the file to be, the access check and no key
    preview = steps[-2].message
    assert '+  "backend": "memorycore"' in preview and "L3 profile read: ok" in preview
    assert FAKE_USER_KEY not in preview and FAKE_API_KEY not in preview
    # identity and the four layer reads went over HTTP to the server
    assert w.fake.calls("/v3/meta/auth/verify") == 1
    for route in ("/v3/conversation/search", "/v3/atomic/search", "/v3/scenario/ls", "/v3/core/read"):
        assert w.fake.calls(route) == 1, route
    # and the sidecar can start from what was written
    loaded = load_config(agent_dir=w.deps.agent_dir, cwd=None, project_trusted=False, env={})
    assert loaded.backend_ready and loaded.ok
    assert loaded.secrets.gateway_api_key is not None
    assert loaded.secrets.gateway_api_key.get_secret_value() == FAKE_API_KEY


async def test_create_team_and_private_agent_with_the_user_key_as_bearer(tmp_path: Path) -> None:
    for w in make_world(tmp_path, FAKE_USER_KEY):  # a local gateway whose Bearer is the user key
        answers: list[Answer] = [w.url, "", str(w.keys / "user-key"), GATEWAY_NONE, CREATE_TEAM, "Pi team",
                                 CREATE_AGENT, "", True]  # fmt: skip
        steps = await drive(w.deps, answers)
        assert steps[-1].reload is True, steps[-1].message
        assert "was created" in steps[-1].message
        created_team = next(r for name, r in w.state.requests if name == "create_team")
        assert created_team == {"name": "Pi team", "owner_user_id": "usr-fake"}
        created_agent = next(r for name, r in w.state.requests if name == "create_agent")
        assert created_agent["visibility"] == "private" and created_agent["name"] == "Pi"
        assert created_agent["team_id"] == "team-1" and created_agent["owner_user_id"] == "usr-fake"
        section = json.loads(w.config_path.read_text())["memorycore"]
        assert (section["serviceId"], section["teamId"], section["agentId"]) == (
            "default",
            "team-1",
            "agt-new2",
        )
        assert "gatewayApiKeyFile" not in section
        assert w.state.archived == []


async def test_a_team_visible_agent_needs_an_explicit_yes(w: World) -> None:
    answers: list[Answer] = [w.url, "default", "keys/user-key", GATEWAY_FILE, "keys/gateway-key", TEAM,
                             SHARED, False, SHARED, True, True]  # fmt: skip
    steps = await drive(w.deps, answers)
    warning = steps[7]
    assert warning.kind == "confirm" and "shared" in warning.message and "team visibility" in warning.message
    assert steps[8].kind == "select" and steps[8].title == "MemoryCore agent"  # declined: asked again
    assert "TEAM-VISIBLE" in steps[-2].message
    assert json.loads(w.config_path.read_text())["memorycore"]["agentId"] == "agt-shared"


async def test_a_key_file_others_can_read_is_used_with_a_warning(w: World) -> None:
    (w.keys / "user-key").chmod(0o644)
    steps = await drive(w.deps, happy_answers(w))
    assert "Warning:" in steps[-2].message and "chmod 600" in steps[-2].message
    assert steps[-1].reload is True


# ---- refusals -----------------------------------------------------------------------------


async def test_a_wrong_gateway_key_is_a_clear_401_and_nothing_is_written(w: World) -> None:
    write_key(w.keys / "gateway-key", "not-the-gateway-key")
    steps = await drive(w.deps, happy_answers(w)[:5])
    final = steps[-1]
    assert final.level == "error" and final.reload is False
    assert "Could not verify your identity" in final.message and "401" in final.message
    assert "gateway API key" in final.message and "Nothing was written" in final.message
    assert "not-the-gateway-key" not in final.message
    assert_nothing_written(w)


async def test_a_user_key_the_server_does_not_know_is_refused(w: World) -> None:
    write_key(w.keys / "user-key", "sk-mem-unknownunknownunknown")
    steps = await drive(w.deps, happy_answers(w)[:5])
    assert steps[-1].level == "error" and "does not accept this user key" in steps[-1].message
    assert_nothing_written(w)


@pytest.mark.parametrize(
    ("endpoint", "expected"),
    [
        ("http://memory.example.com", "remote endpoints must use https"),
        ("https://alice:hunter2@memory.example.com", "must not contain a user name or password"),
        ("ftp://127.0.0.1", 'not "ftp"'),
        ("memory.example.com", "full URL"),
    ],
)
async def test_an_endpoint_that_breaks_the_rules_is_asked_again(
    w: World, endpoint: str, expected: str
) -> None:
    steps = await drive(w.deps, [endpoint, None])
    assert steps[1].kind == "input" and steps[1].title == "MemoryCore endpoint URL"
    assert expected in steps[1].message
    assert "hunter2" not in steps[1].message
    assert steps[-1].message == CANCELLED
    assert_nothing_written(w)


def _symlink(keys: Path) -> str:
    (keys / "link").symlink_to(keys / "user-key")
    return "keys/link"


def _empty(keys: Path) -> str:
    (keys / "empty").write_text("\n")
    return "keys/empty"


def _directory(keys: Path) -> str:
    (keys / "dir").mkdir()
    return "keys/dir"


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (_symlink, "is a symbolic link"),
        (_empty, "is empty"),
        (_directory, "is a directory"),
        (lambda keys: "keys/missing", "does not exist"),
    ],
    ids=["symlink", "empty", "directory", "missing"],
)
async def test_a_key_file_that_breaks_the_rules_is_asked_again(w: World, make: Any, expected: str) -> None:
    typed = make(w.keys)
    steps = await drive(w.deps, [w.url, "default", typed, None])
    assert steps[3].kind == "input" and steps[3].title == "User key file"
    assert expected in steps[3].message and "Cannot use that file" in steps[3].message
    assert FAKE_USER_KEY not in steps[3].message
    assert_nothing_written(w)
    # the same rules hold for the gateway key file
    steps = await drive(w.deps, [w.url, "default", "keys/user-key", GATEWAY_FILE, typed, None])
    assert steps[5].title == "Gateway API key file" and expected in steps[5].message
    assert_nothing_written(w)


@pytest.mark.parametrize("at", range(8))
async def test_cancel_at_any_dialog_writes_nothing(w: World, at: int) -> None:
    answers = [*happy_answers(w)[:at], None if at < 7 else False]
    steps = await drive(w.deps, answers)
    assert steps[-1].kind == "done" and steps[-1].message == CANCELLED
    assert_nothing_written(w)


async def test_cancel_after_creating_an_agent_archives_it(w: World) -> None:
    answers: list[Answer] = [w.url, "default", "keys/user-key", GATEWAY_FILE, "keys/gateway-key", TEAM,
                             CREATE_AGENT, "Scratch", False]  # fmt: skip
    steps = await drive(w.deps, answers)
    assert steps[-1].message == CANCELLED
    assert w.state.archived == ["agt-new2"]
    assert_nothing_written(w)


async def test_headless_explains_and_writes_nothing(w: World) -> None:
    steps = await drive(w.deps, [], has_ui=False)
    assert len(steps) == 1 and steps[0].level == "warning"
    assert "pi-memory-bridge setup" in steps[0].message and "/tdai-memory-setup" in steps[0].message
    assert "Nothing was written" in steps[0].message
    assert w.fake.requests == []
    assert_nothing_written(w)


async def test_a_missing_sdk_names_the_install_command(w: World, monkeypatch: pytest.MonkeyPatch) -> None:
    real_import = importlib.import_module

    def no_sdk(name: str, package: str | None = None) -> Any:
        if name.startswith("tencentdb_agent_memory"):
            raise ModuleNotFoundError(f"No module named {name!r}")
        return real_import(name, package)

    monkeypatch.setattr(importlib, "import_module", no_sdk)
    # on the local backend nothing is wrong: setup says what it is for and what it needs, once
    steps = await drive(dataclasses.replace(w.deps, sdk=load_sdk), [])
    assert len(steps) == 1 and steps[0].level == "info"
    text = steps[0].message
    assert "already works on this machine" in text and "MemoryCore server" in text
    assert text.count(install_command()) == 1 and "Nothing was written" in text
    assert_nothing_written(w)
    # with MemoryCore selected, the missing SDK is an error
    write_global(w, {"schemaVersion": 1, "backend": "memorycore"})
    steps = await drive(dataclasses.replace(w.deps, sdk=load_sdk), [])
    assert len(steps) == 1 and steps[0].level == "error" and install_command() in steps[0].message


async def test_a_layer_that_cannot_be_read_stops_setup_and_archives_the_new_agent(w: World) -> None:
    w.fake.inject(Fault("/v3/atomic/search", "envelope", status=403, message="forbidden"))
    answers: list[Answer] = [w.url, "default", "keys/user-key", GATEWAY_FILE, "keys/gateway-key", TEAM,
                             CREATE_AGENT, "Pi"]  # fmt: skip
    steps = await drive(w.deps, answers)
    final = steps[-1]
    assert final.level == "error" and "L1 memory search" in final.message and "403" in final.message
    assert "L0" not in final.message  # only the failing layer is listed
    assert w.state.archived == ["agt-new2"]
    assert_nothing_written(w)


@pytest.mark.parametrize(
    ("call", "answers_after_keys", "said"),
    [
        ("list_teams", [], "Could not list your teams"),
        ("create_team", [CREATE_TEAM, "Pi team"], "Could not create the team"),
        ("list_agents", [TEAM], "Could not list the team's agents"),
        ("create_agent", [TEAM, CREATE_AGENT, "Pi"], "Could not create the agent"),
    ],
)
async def test_a_directory_call_the_server_fails_stops_setup_with_what_failed(
    w: World, call: str, answers_after_keys: list[Answer], said: str
) -> None:
    w.state.fail[call] = FakeTDAMError(500, "the directory is down for maintenance")
    keys: list[Answer] = [w.url, "default", "keys/user-key", GATEWAY_FILE, "keys/gateway-key"]
    steps = await drive(w.deps, keys + answers_after_keys)
    final = steps[-1]
    assert final.level == "error" and final.message.startswith(f"{said}: "), final.message
    assert "Nothing was written" in final.message
    assert w.state.archived == []  # nothing was created that needs taking back
    assert_nothing_written(w)


async def test_ids_the_bridge_cannot_use_stop_setup_and_archive_the_new_agent(w: World) -> None:
    w.state.teams = [{"team_id": "team|core", "name": "Core", "status": "active"}]
    w.state.agents = []
    answers: list[Answer] = [w.url, "default", "keys/user-key", GATEWAY_FILE, "keys/gateway-key",
                             "Core (team|core)", CREATE_AGENT, "Pi"]  # fmt: skip
    steps = await drive(w.deps, answers)
    final = steps[-1]
    assert final.level == "error", final.message
    assert final.message.startswith(
        'MemoryCore returned ids this bridge cannot use: teamId: must not contain "|"'
    ), final.message
    assert w.state.archived == ["agt-new0"]
    assert_nothing_written(w)


# ---- the existing global file ---------------------------------------------------------------


def write_global(w: World, data: object) -> str:
    w.config_path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(data) if not isinstance(data, str) else data
    w.config_path.write_text(text)
    return text


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ('{"backend": "local",', "invalid JSON"),
        ({"recall": {"l0Limit": "many"}}, "recall.l0Limit"),
        ({"recal": {}}, "unknown key"),
    ],
    ids=["bad-json", "bad-value", "unknown-key"],
)
async def test_a_global_file_with_errors_is_not_overwritten(w: World, content: object, expected: str) -> None:
    before = write_global(w, content)
    steps = await drive(w.deps, [])
    assert len(steps) == 1 and steps[0].level == "error"
    assert "will not overwrite" in steps[0].message and expected in steps[0].message
    assert w.config_path.read_text() == before


async def test_the_users_other_settings_are_kept(w: World) -> None:
    write_global(w, {
        "enabled": False,
        "logLevel": "debug",
        "allowProjectConfig": True,
        "recall": {"l0Limit": 7, "deadlineMs": 1500},
        "skills": {"enabled": True},
        "memorycore": {"endpoint": "https://old.example.com", "teamId": "old", "timeoutMs": 4000},
    })  # fmt: skip
    steps = await drive(w.deps, happy_answers(w))
    assert steps[-1].reload is True
    preview = steps[-2].message
    assert '-    "endpoint": "https://old.example.com"' in preview and "other settings" in preview
    data = json.loads(w.config_path.read_text())
    assert data["logLevel"] == "debug" and data["allowProjectConfig"] is True
    assert data["recall"]["l0Limit"] == 7 and data["recall"]["deadlineMs"] == 1500
    assert data["skills"]["enabled"] is True
    assert data["enabled"] is True and data["backend"] == "memorycore"
    assert data["memorycore"]["teamId"] == "team-core" and data["memorycore"]["timeoutMs"] == 4000
    assert stat.S_IMODE(os.stat(w.config_path).st_mode) == 0o600
