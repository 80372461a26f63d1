"""The config schema: what a config file may say, with its defaults and ranges.

Files use camelCase keys; Python code may also use the snake_case field names. Validation is
strict (no "3000" for 3000, no 1 for true) and unknown keys are errors, so a typo never passes
silently. The schema holds no secrets: keys live in `Secrets`, loaded from env vars or key files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

from pi_memory_bridge.config._endpoint import endpoint_problem

SCHEMA_VERSION: Literal[1] = 1
_MAX_ID_CHARS = 256


def _check_identity_part(value: str) -> str:
    # "|" is the separator the memory identity is built with (service|team|agent|user).
    if not value:
        raise ValueError("must not be empty")
    if "|" in value:
        raise ValueError('must not contain "|"')
    if not value.isprintable():
        raise ValueError("must not contain control characters")
    if len(value) > _MAX_ID_CHARS:
        raise ValueError(f"must be at most {_MAX_ID_CHARS} characters")
    return value


def _check_endpoint(value: str) -> str:
    problem = endpoint_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


def _path_from_string(value: Any) -> Any:
    # Strict mode takes no str for Path; a file can only hold a string, so convert here and
    # let anything else fall through to the strict Path check (which reports it).
    if isinstance(value, str):
        stripped = value.strip()
        if not stripped or "\0" in stripped:
            raise ValueError("must be a non-empty path")
        return Path(stripped)
    return value


IdentityPart = Annotated[str, AfterValidator(_check_identity_part)]
Endpoint = Annotated[str, AfterValidator(_check_endpoint)]
KeyFilePath = Annotated[Path, BeforeValidator(_path_from_string)]


class _Settings(BaseModel):
    model_config = ConfigDict(
        strict=True,
        extra="forbid",
        frozen=True,
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        str_strip_whitespace=True,
    )


class RecallSettings(_Settings):
    """Budgets for the recall that runs before each answer."""

    enabled: bool = True
    deadline_ms: Annotated[int, Field(ge=100, le=30_000)] = 3000
    l0_limit: Annotated[int, Field(ge=0, le=20)] = 4
    l1_limit: Annotated[int, Field(ge=0, le=20)] = 6
    l2_limit: Annotated[int, Field(ge=0, le=20)] = 2
    skill_limit: Annotated[int, Field(ge=0, le=20)] = 5
    max_chars: Annotated[int, Field(ge=1000, le=48_000)] = 12_000
    # a recalled block stays in the conversation (so the provider's prompt cache holds): every
    # block still in the model's view of a branch, together, stays within this
    branch_max_chars: Annotated[int, Field(ge=1000, le=400_000)] = 24_000
    skip_trivial_prompts: bool = True
    min_prompt_chars: Annotated[int, Field(ge=0, le=100)] = 2


class CaptureSettings(_Settings):
    """Whether settled turns are captured into memory."""

    enabled: bool = True
    # Runs Pi does not keep (`pi --no-session`, as subagents are started) get recall, but are not
    # the user's conversation: captured only when this is on (and then only live: no session file).
    no_session_runs: bool = False
    # also capture, from Pi's own session files, settled turns the live path missed (sidecar
    # slow, killed, disk full); off means live capture only
    catch_up: bool = True


class SkillSettings(_Settings):
    """Skill recall and capture; off by default because it sends tool output to the backend."""

    enabled: bool = False
    capture: bool = True


class MemoryCoreSettings(_Settings):
    """Where and as whom to reach a MemoryCore server.

    Every field is optional here because sources merge key by key (the endpoint may come from the
    global file and the user id from an env var); completeness is checked after merging, and
    only when the memorycore backend is selected.
    """

    endpoint: Endpoint | None = None
    service_id: IdentityPart = "default"
    team_id: IdentityPart | None = None
    agent_id: IdentityPart | None = None
    user_id: IdentityPart | None = None
    user_key_file: KeyFilePath | None = None
    gateway_api_key_file: KeyFilePath | None = None
    timeout_ms: Annotated[int, Field(ge=1, le=30_000)] = 3000
    # how long recall may reuse the slow-changing L2 listing and L3 profile (0 = always ask)
    cache_ttl_s: Annotated[int, Field(ge=0, le=600)] = 60
    # how many memory sessions' adds the outbox may have in flight at once (the server spends an
    # add mostly per message, and waits on its embedding service for each one)
    delivery_concurrency: Annotated[int, Field(ge=1, le=32)] = 8


def _check_model_name(value: str) -> str:
    if not value or len(value) > 200 or not value.isprintable() or any(ch.isspace() for ch in value):
        raise ValueError("must be a model name without spaces, such as anthropic/claude-haiku-4-5")
    return value


ModelName = Annotated[str, AfterValidator(_check_model_name)]


class LearningSettings(_Settings):
    """Consolidation: turning conversations into L1 memories on a model (local backend only).

    `enabled` stays unset until the user answers the question an interactive session asks once;
    unset counts as off, so a print-mode run never sends conversation text anywhere on its own.
    """

    enabled: bool | None = None
    # Pi's "provider/id" (default: the session's model); with `endpoint`, the model that server runs
    model: ModelName | None = None
    # an OpenAI-compatible server (e.g. a local Ollama at http://127.0.0.1:11434/v1) used instead of Pi
    endpoint: Endpoint | None = None
    daily_token_budget: Annotated[int, Field(ge=0, le=100_000_000)] = 200_000
    idle_seconds: Annotated[int, Field(ge=1, le=3600)] = 45
    every_turns: Annotated[int, Field(ge=1, le=500)] = 8
    max_output_tokens: Annotated[int, Field(ge=256, le=32_000)] = 2000
    timeout_ms: Annotated[int, Field(ge=1000, le=600_000)] = 60_000
    # the generated profile and per-project notes, written from active memories after a job
    generate_notes: bool = True

    @model_validator(mode="after")
    def _endpoint_needs_model(self) -> LearningSettings:
        if self.endpoint is not None and self.model is None:
            raise ValueError("learning.endpoint also needs learning.model (the model name that server runs)")
        return self


class BridgeConfig(_Settings):
    """The whole configuration, as stored in the global file."""

    schema_version: Literal[1] = SCHEMA_VERSION
    enabled: bool = True
    backend: Literal["local", "memorycore"] = "local"
    # Read from the global file only: a project file cannot grant itself this permission.
    allow_project_config: bool = False
    recall: RecallSettings = Field(default_factory=RecallSettings)
    capture: CaptureSettings = Field(default_factory=CaptureSettings)
    skills: SkillSettings = Field(default_factory=SkillSettings)
    memorycore: MemoryCoreSettings | None = None
    # projects (git root, else the working directory) where capture and recall are paused;
    # written by /tdai-memory-pause and /tdai-memory-resume, global file only
    paused_projects: Annotated[list[str], Field(max_length=10_000)] = Field(default_factory=list)
    learning: LearningSettings = Field(default_factory=LearningSettings)
    log_level: Literal["debug", "info", "warning", "error"] = "info"
