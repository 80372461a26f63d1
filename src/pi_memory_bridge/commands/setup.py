"""`/tdai-memory-setup` and `pi-memory-bridge setup`: configure the MemoryCore backend, checked.

Endpoint, service id, key files (paths only: Pi has no masked input, and a key typed into a
dialog would end up in terminal scrollback and logs), identity check, team and agent (picked or
created), a cheap read of every layer L0-L3, a preview of the config file, a confirmation, and
an atomic 0600 write that keeps the user's other settings. Nothing is written unless the user
says yes at the end; without an interactive UI nothing is asked and nothing is written.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import SecretStr, ValidationError

from pi_memory_bridge.backends.base import BackendError
from pi_memory_bridge.backends.memorycore import (
    MemoryCoreBackend,
    MemoryCoreCredentials,
    MemoryCoreTarget,
    SdkBindings,
    load_sdk,
)
from pi_memory_bridge.commands._setup_config import ExistingConfig, merged_config, preview, read_existing
from pi_memory_bridge.commands._setup_directory import Agent, Directory, Team, VerifiedUser
from pi_memory_bridge.commands.flows import Answer, Flow, done, step
from pi_memory_bridge.config import (
    MemoryCoreSettings,
    endpoint_problem,
    expand_home,
    read_key_file,
    write_global_config,
)
from pi_memory_bridge.redact import redact_text
from pi_memory_bridge.sidecar.protocol import CommandStep

SETUP_TIMEOUT_S = 5.0
ENDPOINT_EXAMPLE = "https://memory.example.com or http://127.0.0.1:8420"
DEFAULT_SERVICE_ID = "default"
DEFAULT_AGENT_NAME = "Pi"
MAX_NAME_CHARS = 120
PROBE_QUERY = "setup access check"

GATEWAY_NONE = "No separate gateway key: the user key is also the gateway Bearer"
GATEWAY_FILE = "Read a gateway API key from a file"
CREATE_TEAM = "+ Create a new team"
CREATE_AGENT = "+ Create a private agent for Pi"

HEADLESS_MESSAGE = (
    "Memory setup asks questions, so it needs an interactive UI: run /tdai-memory-setup in "
    "interactive Pi, or `pi-memory-bridge setup` in a terminal. Nothing was written."
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


def _text(answer: Answer) -> str | None:
    """The typed text, or None when the dialog was dismissed (or answered with something else)."""
    return answer.strip() if isinstance(answer, str) else None


def _safe(exc: BaseException) -> str:
    return redact_text(str(exc)).text


def _failed(what: str, exc: BaseException | str, extra: str = "") -> CommandStep:
    reason = exc if isinstance(exc, str) else _safe(exc)
    return done(f"{what}: {reason}\n{extra}Nothing was written.", "error")


@dataclass(frozen=True, slots=True)
class _KeyChoice:
    path: Path
    key: SecretStr
    warning: str | None


def _resolve(deps: SetupDeps, typed: str) -> Path:
    path = expand_home(typed, deps.env)
    return path if path.is_absolute() else deps.cwd / path


async def setup_flow(deps: SetupDeps, *, has_ui: bool) -> Flow:
    if not has_ui:
        yield done(HEADLESS_MESSAGE, "warning")
        return
    try:
        sdk = deps.sdk()
    except BackendError as exc:
        yield done(f"{exc}\nNothing was written.", "error")
        return
    existing = await asyncio.to_thread(read_existing, deps.agent_dir)
    if existing.exists and existing.config is None:
        problems = "\n".join(f"- {p}" for p in existing.problems)
        yield done(
            f"{existing.path} has errors, so setup will not overwrite it (fix or move it, then run "
            f"setup again):\n{problems}\nNothing was written.",
            "error",
        )
        return

    # ---- connection ------------------------------------------------------------------------
    endpoint: str | None = None
    note = INTRO
    while endpoint is None:
        typed = _text((yield step("input", "MemoryCore endpoint URL", note, placeholder=ENDPOINT_EXAMPLE)))
        if not typed:
            yield done(CANCELLED, "warning")
            return
        problem = endpoint_problem(typed)
        if problem is None:
            endpoint = typed.rstrip("/")
        else:
            note = f"That endpoint {problem}."
    service_id: str | None = None
    note = ""
    while service_id is None:
        answer: Answer = yield step(
            "input",
            f'MemoryCore service id (usually "{DEFAULT_SERVICE_ID}")',
            note,
            placeholder=DEFAULT_SERVICE_ID,
        )
        typed = _text(answer)
        if typed is None:
            yield done(CANCELLED, "warning")
            return
        try:
            service_id = MemoryCoreSettings(service_id=typed or DEFAULT_SERVICE_ID).service_id
        except ValidationError as exc:
            note = f"That service id {exc.errors()[0]['msg'].removeprefix('Value error, ')}."

    # ---- keys, as file paths ---------------------------------------------------------------
    user_key: _KeyChoice | None = None
    note = "Give the path of the file that holds your MemoryCore user key (never the key itself)."
    while user_key is None:
        typed = _text(
            (yield step("input", "User key file", note, placeholder="~/.config/memorycore/user-key"))
        )
        if not typed:
            yield done(CANCELLED, "warning")
            return
        user_key, problem_text = _read_key(deps, typed)
        note = f"Cannot use that file: {problem_text}" if problem_text else ""
    gateway_key: _KeyChoice | None = None
    choice: Answer = yield step(
        "select",
        "Gateway API key",
        "Does the MemoryCore gateway need its own API key?",
        [GATEWAY_NONE, GATEWAY_FILE],
    )
    if choice == GATEWAY_FILE:
        note = "Give the path of the file that holds the gateway API key (never the key itself)."
        while gateway_key is None:
            answer = yield step(
                "input", "Gateway API key file", note, placeholder="~/.config/memorycore/gateway-key"
            )
            typed = _text(answer)
            if not typed:
                yield done(CANCELLED, "warning")
                return
            gateway_key, problem_text = _read_key(deps, typed)
            note = f"Cannot use that file: {problem_text}" if problem_text else ""
    elif choice != GATEWAY_NONE:
        yield done(CANCELLED, "warning")
        return

    bearer = gateway_key.key if gateway_key is not None else user_key.key
    try:
        directory = Directory(sdk, endpoint, service_id, deps.timeout_s, bearer, user_key.key)
    except BackendError as exc:
        yield _failed("Cannot talk to MemoryCore", exc)
        return
    created_agent: Agent | None = None
    saved = False
    try:
        # ---- who am I ----------------------------------------------------------------------
        try:
            user = await directory.verify()
        except BackendError as exc:
            yield _failed("Could not verify your identity with MemoryCore", exc)
            return
        try:
            MemoryCoreSettings(user_id=user.user_id)
        except ValidationError:
            yield _failed(
                "MemoryCore returned a user id this bridge cannot use",
                "it contains '|' or control characters",
            )
            return

        # ---- team --------------------------------------------------------------------------
        try:
            teams = await directory.teams(user.user_id)
        except BackendError as exc:
            yield _failed("Could not list your teams", exc)
            return
        labels = {t.label(): t for t in teams}
        team: Team
        picked: Answer = yield step(
            "select",
            "MemoryCore team",
            f"Signed in as {user.username or user.user_id} ({user.user_id}). "
            "Pick the team whose memory Pi uses.",
            [*labels, CREATE_TEAM],
        )
        if picked == CREATE_TEAM:
            name = _text((yield step("input", "Name for the new team", "", placeholder="Pi")))
            if not name:
                yield done(CANCELLED, "warning")
                return
            if len(name) > MAX_NAME_CHARS:
                yield _failed("Team name refused", f"at most {MAX_NAME_CHARS} characters")
                return
            try:
                team = await directory.create_team(name, user.user_id)
            except BackendError as exc:
                yield _failed("Could not create the team", exc)
                return
        elif isinstance(picked, str) and picked in labels:
            team = labels[picked]
        else:
            yield done(CANCELLED, "warning")
            return

        # ---- agent -------------------------------------------------------------------------
        try:
            agents = await directory.agents(team.team_id)
        except BackendError as exc:
            yield _failed("Could not list the team's agents", exc)
            return
        agent_labels = {a.label(): a for a in agents}
        agent: Agent | None = None
        while agent is None:
            picked = yield step(
                "select",
                "MemoryCore agent",
                f"Team {team.label()}. Memory lives per agent; a private agent keeps it yours.",
                [CREATE_AGENT, *agent_labels],
            )
            if picked == CREATE_AGENT:
                answer = yield step(
                    "input",
                    f'Name for the new private agent (e.g. "{DEFAULT_AGENT_NAME}")',
                    "",
                    placeholder=DEFAULT_AGENT_NAME,
                )
                typed = _text(answer)
                if typed is None:
                    yield done(CANCELLED, "warning")
                    return
                name = typed or DEFAULT_AGENT_NAME
                if len(name) > MAX_NAME_CHARS:
                    yield _failed("Agent name refused", f"at most {MAX_NAME_CHARS} characters")
                    return
                try:
                    agent = created_agent = await directory.create_agent(team.team_id, name, user.user_id)
                except BackendError as exc:
                    yield _failed("Could not create the agent", exc)
                    return
            elif isinstance(picked, str) and picked in agent_labels:
                candidate = agent_labels[picked]
                if candidate.private:
                    agent = candidate
                    continue
                sure: Answer = yield step(
                    "confirm",
                    "Use a team-visible agent?",
                    f"{candidate.label()} is not private ({candidate.visibility or 'unknown'} visibility): "
                    "everything Pi remembers there (your conversations, preferences, profile) is shared "
                    "with the whole team. Continue with this agent?",
                )
                if sure is True:
                    agent = candidate
            else:
                yield done(CANCELLED, "warning")
                return

        # ---- settings, checked as they will be saved ----------------------------------------
        try:
            settings = MemoryCoreSettings(
                endpoint=endpoint,
                service_id=service_id,
                team_id=team.team_id,
                agent_id=agent.agent_id,
                user_id=user.user_id,
                user_key_file=user_key.path,
                gateway_api_key_file=gateway_key.path if gateway_key is not None else None,
            )
        except ValidationError as exc:
            yield _failed("MemoryCore returned ids this bridge cannot use", _first_error(exc))
            return

        # ---- L0-L3 access ------------------------------------------------------------------
        access = await _probe_layers(sdk, settings, deps.timeout_s, bearer, user_key.key)
        failures = [f"- {line}" for line in access if not line.endswith(": ok")]
        if failures:
            yield _failed(
                "The data plane is not usable with these settings", "\n" + "\n".join(failures), "\n"
            )
            return

        # ---- preview, confirm, write --------------------------------------------------------
        new_config = merged_config(existing.config, settings)
        warnings = [w for w in (user_key.warning, gateway_key.warning if gateway_key else None) if w]
        summary = _summary(user, team, agent, access, warnings, existing)
        sure = yield step(
            "confirm",
            f"Write this configuration to {existing.path}?",
            f"{summary}\n\n{preview(existing, new_config)}",
        )
        if sure is not True:
            yield done(CANCELLED, "warning")
            return
        try:
            path = await asyncio.to_thread(write_global_config, deps.agent_dir, new_config)
        except (OSError, ValidationError) as exc:
            yield _failed(f"Could not write {existing.path}", exc)
            return
        saved = True
        created = f" A private agent {agent.label()} was created." if created_agent is not None else ""
        yield done(
            f"Memory setup saved to {path} (mode 0600; keys stay in their files).{created} "
            "Pi reloads now to use it.",
            "info",
            reload=True,
        )
    finally:
        if created_agent is not None and not saved:
            # An agent made for a setup that did not finish would be an orphan memory space.
            with contextlib.suppress(BackendError):
                await directory.archive_agent(created_agent.agent_id)
        await directory.close()


def _read_key(deps: SetupDeps, typed: str) -> tuple[_KeyChoice | None, str]:
    path = _resolve(deps, typed)
    read = read_key_file(path)
    if read.key is None:
        return None, read.error or f"{path} holds no key"
    return _KeyChoice(path, read.key, read.warning), ""


def _first_error(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"])
    return f"{where}: {first['msg'].removeprefix('Value error, ')}"


async def _probe_layers(
    sdk: SdkBindings, settings: MemoryCoreSettings, timeout_s: float, bearer: SecretStr, user_key: SecretStr
) -> list[str]:
    """One cheap read per layer, as the sidecar will do them; `<layer>: ok` or the reason."""
    assert settings.endpoint and settings.team_id and settings.agent_id and settings.user_id
    target = MemoryCoreTarget(
        settings.endpoint,
        settings.service_id,
        settings.team_id,
        settings.agent_id,
        settings.user_id,
        timeout_s,
    )
    try:
        backend = MemoryCoreBackend(target, MemoryCoreCredentials(bearer=bearer, user_key=user_key), sdk=sdk)
    except BackendError as exc:
        return [f"client: {_safe(exc)}"]
    try:
        probes = {
            "L0 conversation search": backend.search_conversation(PROBE_QUERY, 1),
            "L1 memory search": backend.search_atomic(PROBE_QUERY, 1),
            "L2 scenario list": backend.list_scenarios(),
            "L3 profile read": backend.read_profile(),
        }
        results = await asyncio.gather(*probes.values(), return_exceptions=True)
    finally:
        await backend.close()
    lines = []
    for name, result in zip(probes, results, strict=True):
        if isinstance(result, BackendError):
            lines.append(f"{name}: {_safe(result)}")
        elif isinstance(result, BaseException):
            raise result
        else:
            lines.append(f"{name}: ok")
    return lines


def _summary(
    user: VerifiedUser,
    team: Team,
    agent: Agent,
    access: list[str],
    warnings: list[str],
    existing: ExistingConfig,
) -> str:
    lines = [
        f"User:  {user.username or '?'} ({user.user_id})",
        f"Team:  {team.label()}",
        f"Agent: {agent.label()}{'' if agent.private else ' - TEAM-VISIBLE'}",
        "Access: " + "; ".join(access),
        "Keys are not written: the file names the key files only.",
    ]
    if existing.exists:
        lines.append("Your other settings in the file are kept.")
    lines.extend(f"Warning: {w}" for w in warnings)
    return "\n".join(lines)
