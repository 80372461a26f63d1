"""`/tdai-memory-setup` and `pi-memory-bridge setup`: connect to a MemoryCore team server, checked.

Memory works without this (the built-in local store needs no setup); setup switches Pi to the
optional MemoryCore server, whose memory can be shared across machines or a team. The wizard, as
steps: the connection (endpoint, service id), the keys (file paths only: Pi has no masked input,
and a key typed into a dialog would end up in terminal scrollback and logs), the identity check,
the team and the agent (picked or created), a cheap read of every layer L0-L3, a preview of the
config file, a confirmation, and an atomic 0600 write that keeps the user's other settings.
Nothing is written unless the user says yes at the end; without an interactive UI nothing is
asked and nothing is written. A dismissed dialog (`Cancelled`) or a failed step (`SetupFailed`)
ends the wizard in one place.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import SecretStr, ValidationError

from pi_memory_bridge.backends.base import BackendError
from pi_memory_bridge.backends.memorycore import SdkBindings, install_command, load_sdk
from pi_memory_bridge.commands._setup_checks import probe_layers, summary
from pi_memory_bridge.commands._setup_directory import Agent, Directory, Team, VerifiedUser
from pi_memory_bridge.config import (
    MemoryCoreSettings,
    endpoint_problem,
    expand_home,
    read_key_file,
    write_global_config,
)
from pi_memory_bridge.operations.global_config import ExistingConfig, merged_config, preview, read_existing
from pi_memory_bridge.redact import redact_text
from pi_memory_bridge.vocabulary.dialog import Cancelled, Dialog, Outcome

SETUP_TIMEOUT_S = 5.0
ENDPOINT_EXAMPLE = "https://memory.example.com or http://127.0.0.1:8420"
DEFAULT_SERVICE_ID = "default"
DEFAULT_AGENT_NAME = "Pi"
MAX_NAME_CHARS = 120

GATEWAY_NONE = "No separate gateway key: the user key is also the gateway Bearer"
GATEWAY_FILE = "Read a gateway API key from a file"
CREATE_TEAM = "+ Create a new team"
CREATE_AGENT = "+ Create a private agent for Pi"

HEADLESS_MESSAGE = (
    "Memory setup asks questions, so it needs an interactive UI: run /tdai-memory-setup in "
    "interactive Pi, or `pi-memory-bridge setup` in a terminal. Nothing was written."
)
TEAM_SERVER = (
    "Memory already works on this machine without setup (the built-in local store). "
    "/tdai-memory-setup connects Pi to a MemoryCore server instead, whose memory can be shared "
    "across machines or with a team. That needs a running MemoryCore server (deploy/README.md "
    "in the pi-memory-bridge repository), your MemoryCore user key in a file, and the MemoryCore SDK."
)
INTRO = (
    "Setup connects pi-memory-bridge to a MemoryCore server, checks every memory layer, shows the "
    "config it would write and asks before writing. The endpoint must use https (plain http only on "
    "this machine: 127.0.0.1, localhost, [::1])."
)
CANCELLED = "Setup cancelled: nothing was written."


@dataclass(frozen=True, slots=True)
class SetupDeps:
    """Where to write, how to resolve relative paths, and how to reach the SDK (tests inject it)."""

    agent_dir: Path
    cwd: Path
    env: Mapping[str, str] = field(default_factory=dict)
    sdk: Callable[[], SdkBindings] = load_sdk
    timeout_s: float = SETUP_TIMEOUT_S


class SetupFailed(Exception):
    """A step that cannot go on: what failed and why (redacted); nothing is written."""

    def __init__(self, what: str, reason: BaseException | str, extra: str = "") -> None:
        why = reason if isinstance(reason, str) else _safe(reason)
        super().__init__(f"{what}: {why}\n{extra}Nothing was written.")


def _safe(exc: BaseException) -> str:
    return redact_text(str(exc)).text


@dataclass(frozen=True, slots=True)
class _KeyChoice:
    path: Path
    key: SecretStr
    warning: str | None


@dataclass(frozen=True, slots=True)
class _Answers:
    """What the user told the wizard before it talks to the server."""

    endpoint: str
    service_id: str
    user_key: _KeyChoice
    gateway_key: _KeyChoice | None

    @property
    def bearer(self) -> SecretStr:
        return self.gateway_key.key if self.gateway_key is not None else self.user_key.key


def _resolve(deps: SetupDeps, typed: str) -> Path:
    path = expand_home(typed, deps.env)
    return path if path.is_absolute() else deps.cwd / path


async def setup_flow(deps: SetupDeps, dialog: Dialog) -> Outcome:
    if not dialog.has_ui:
        return Outcome(HEADLESS_MESSAGE, "warning")
    existing = await asyncio.to_thread(read_existing, deps.agent_dir)
    if existing.exists and existing.config is None:
        problems = "\n".join(f"- {p}" for p in existing.problems)
        return Outcome(
            f"{existing.path} has errors, so setup will not overwrite it (fix or move it, then run "
            f"setup again):\n{problems}\nNothing was written.",
            "error",
        )
    on_team_server = existing.config is not None and existing.config.backend == "memorycore"
    try:
        sdk = deps.sdk()
    except BackendError:
        # on the local backend nothing is wrong: say what setup is for and what it needs
        return Outcome(
            f"{TEAM_SERVER} The SDK is not installed; install it with:\n    {install_command()}\n"
            "Nothing was written.",
            "error" if on_team_server else "info",
        )
    intro = INTRO if on_team_server else f"{TEAM_SERVER}\n{INTRO}"
    try:
        answers = _Answers(*await _ask_connection(dialog, intro), *await _ask_keys(deps, dialog))
        return await _connect_and_write(deps, sdk, existing, answers, dialog)
    except Cancelled:
        return Outcome(CANCELLED, "warning")
    except SetupFailed as exc:
        return Outcome(str(exc), "error")


# ---- the connection and the keys: asked again until usable ------------------------------------


async def _ask_connection(dialog: Dialog, intro: str) -> tuple[str, str]:
    note = intro
    while True:
        typed = await dialog.input("MemoryCore endpoint URL", note, ENDPOINT_EXAMPLE)
        if not typed:
            raise Cancelled
        problem = endpoint_problem(typed)
        if problem is None:
            break
        note = f"That endpoint {problem}."
    endpoint = typed.rstrip("/")
    note = ""
    while True:
        typed = await dialog.input(
            f'MemoryCore service id (usually "{DEFAULT_SERVICE_ID}")', note, DEFAULT_SERVICE_ID
        )
        try:
            return endpoint, MemoryCoreSettings(service_id=typed or DEFAULT_SERVICE_ID).service_id
        except ValidationError as exc:
            note = f"That service id {exc.errors()[0]['msg'].removeprefix('Value error, ')}."


async def _ask_key_file(
    deps: SetupDeps, dialog: Dialog, title: str, note: str, placeholder: str
) -> _KeyChoice:
    while True:
        typed = await dialog.input(title, note, placeholder)
        if not typed:
            raise Cancelled
        key, problem = _read_key(deps, typed)
        if key is not None:
            return key
        note = f"Cannot use that file: {problem}"


async def _ask_keys(deps: SetupDeps, dialog: Dialog) -> tuple[_KeyChoice, _KeyChoice | None]:
    user_key = await _ask_key_file(
        deps,
        dialog,
        "User key file",
        "Give the path of the file that holds your MemoryCore user key (never the key itself).",
        "~/.config/memorycore/user-key",
    )
    choice = await dialog.select(
        "Gateway API key", [GATEWAY_NONE, GATEWAY_FILE], "Does the MemoryCore gateway need its own API key?"
    )
    if choice == GATEWAY_NONE:
        return user_key, None
    gateway_key = await _ask_key_file(
        deps,
        dialog,
        "Gateway API key file",
        "Give the path of the file that holds the gateway API key (never the key itself).",
        "~/.config/memorycore/gateway-key",
    )
    return user_key, gateway_key


def _read_key(deps: SetupDeps, typed: str) -> tuple[_KeyChoice | None, str]:
    path = _resolve(deps, typed)
    read = read_key_file(path)
    if read.key is None:
        return None, read.error or f"{path} holds no key"
    return _KeyChoice(path, read.key, read.warning), ""


# ---- the server: who am I, team, agent, layers, then write ------------------------------------


async def _connect_and_write(
    deps: SetupDeps, sdk: SdkBindings, existing: ExistingConfig, answers: _Answers, dialog: Dialog
) -> Outcome:
    try:
        directory = Directory(
            sdk, answers.endpoint, answers.service_id, deps.timeout_s, answers.bearer, answers.user_key.key
        )
    except BackendError as exc:
        raise SetupFailed("Cannot talk to MemoryCore", exc) from None
    created: list[Agent] = []
    saved = False
    try:
        user = await _verify(directory)
        team = await _pick_team(directory, user, dialog)
        agent = await _pick_agent(directory, user, team, dialog, created)
        settings = _settings(answers, user, team, agent)
        access = await probe_layers(sdk, settings, deps.timeout_s, answers.bearer, answers.user_key.key)
        failures = [f"- {line}" for line in access if not line.endswith(": ok")]
        if failures:
            raise SetupFailed(
                "The data plane is not usable with these settings", "\n" + "\n".join(failures), "\n"
            )
        new_config = merged_config(existing.config, settings)
        warnings = [k.warning for k in (answers.user_key, answers.gateway_key) if k is not None and k.warning]
        checked = summary(user, team, agent, access, warnings, existing)
        if not await dialog.confirm(
            f"Write this configuration to {existing.path}?", f"{checked}\n\n{preview(existing, new_config)}"
        ):
            raise Cancelled
        try:
            path = await asyncio.to_thread(write_global_config, deps.agent_dir, new_config)
        except (OSError, ValidationError) as exc:
            raise SetupFailed(f"Could not write {existing.path}", exc) from None
        saved = True
        made = f" A private agent {agent.label()} was created." if created else ""
        return Outcome(
            f"Memory setup saved to {path} (mode 0600; keys stay in their files).{made} "
            "Pi reloads now to use it.",
            "info",
            reload=True,
        )
    finally:
        if created and not saved:
            # An agent made for a setup that did not finish would be an orphan memory space.
            with contextlib.suppress(BackendError):
                await directory.archive_agent(created[0].agent_id)
        await directory.close()


async def _verify(directory: Directory) -> VerifiedUser:
    try:
        user = await directory.verify()
    except BackendError as exc:
        raise SetupFailed("Could not verify your identity with MemoryCore", exc) from None
    try:
        MemoryCoreSettings(user_id=user.user_id)
    except ValidationError:
        raise SetupFailed(
            "MemoryCore returned a user id this bridge cannot use", "it contains '|' or control characters"
        ) from None
    return user


def _checked_name(what: str, name: str) -> str:
    if len(name) > MAX_NAME_CHARS:
        raise SetupFailed(f"{what} name refused", f"at most {MAX_NAME_CHARS} characters")
    return name


async def _pick_team(directory: Directory, user: VerifiedUser, dialog: Dialog) -> Team:
    try:
        teams = await directory.teams(user.user_id)
    except BackendError as exc:
        raise SetupFailed("Could not list your teams", exc) from None
    labels = {t.label(): t for t in teams}
    picked = await dialog.select(
        "MemoryCore team",
        [*labels, CREATE_TEAM],
        f"Signed in as {user.username or user.user_id} ({user.user_id}). Pick the team whose memory Pi uses.",
    )
    if picked != CREATE_TEAM:
        return labels[picked]
    name = await dialog.input("Name for the new team", "", "Pi")
    if not name:
        raise Cancelled
    try:
        return await directory.create_team(_checked_name("Team", name), user.user_id)
    except BackendError as exc:
        raise SetupFailed("Could not create the team", exc) from None


async def _pick_agent(
    directory: Directory, user: VerifiedUser, team: Team, dialog: Dialog, created: list[Agent]
) -> Agent:
    """The agent to use: a private one (picked or created, recorded in `created` for clean-up), or
    a team-visible one the user explicitly accepts."""
    try:
        agents = await directory.agents(team.team_id)
    except BackendError as exc:
        raise SetupFailed("Could not list the team's agents", exc) from None
    labels = {a.label(): a for a in agents}
    while True:
        picked = await dialog.select(
            "MemoryCore agent",
            [CREATE_AGENT, *labels],
            f"Team {team.label()}. Memory lives per agent; a private agent keeps it yours.",
        )
        if picked == CREATE_AGENT:
            typed = await dialog.input(
                f'Name for the new private agent (e.g. "{DEFAULT_AGENT_NAME}")', "", DEFAULT_AGENT_NAME
            )
            name = _checked_name("Agent", typed or DEFAULT_AGENT_NAME)
            try:
                agent = await directory.create_agent(team.team_id, name, user.user_id)
            except BackendError as exc:
                raise SetupFailed("Could not create the agent", exc) from None
            created.append(agent)
            return agent
        candidate = labels[picked]
        if candidate.private or await dialog.confirm(
            "Use a team-visible agent?",
            f"{candidate.label()} is not private ({candidate.visibility or 'unknown'} visibility): "
            "everything Pi remembers there (your conversations, preferences, profile) is shared "
            "with the whole team. Continue with this agent?",
        ):
            return candidate


def _settings(answers: _Answers, user: VerifiedUser, team: Team, agent: Agent) -> MemoryCoreSettings:
    """The settings, checked as they will be saved."""
    try:
        return MemoryCoreSettings(
            endpoint=answers.endpoint,
            service_id=answers.service_id,
            team_id=team.team_id,
            agent_id=agent.agent_id,
            user_id=user.user_id,
            user_key_file=answers.user_key.path,
            gateway_api_key_file=answers.gateway_key.path if answers.gateway_key is not None else None,
        )
    except ValidationError as exc:
        raise SetupFailed("MemoryCore returned ids this bridge cannot use", _first_error(exc)) from None


def _first_error(exc: ValidationError) -> str:
    first = exc.errors()[0]
    fields = MemoryCoreSettings.model_fields
    # the key as the config file spells it (teamId), not the Python name the settings were built with
    where = ".".join(
        fields[p].alias or p if isinstance(p, str) and p in fields else str(p) for p in first["loc"]
    )
    return f"{where}: {first['msg'].removeprefix('Value error, ')}"
