"""The shim <-> sidecar protocol, version 1: every method, its params and its result.

Transport: JSON-RPC 2.0 over the sidecar's stdin/stdout, one JSON object per `\\n`-terminated line
(`rpc.framing`). Params are validated strictly (no coercion, unknown fields refused); a bad request
gets a JSON-RPC error naming the fields and the sidecar keeps serving. Field names on the wire are
camelCase.

Requests, shim -> sidecar (all but `initialize` need the handshake first):

  initialize        InitializeParams      -> InitializeResult     handshake; protocol version check
                                                                  (another major -> error -32003)
  session/start     SessionParams         -> SessionResult        a Pi session (or branch) is active
  session/tree      SessionParams         -> SessionResult        `/tree` moved the leaf
  recall            RecallParams          -> RecallResult         block for this run, sent before its prompt
  turn/settled      TurnSettledParams     -> TurnSettledResult    capture the runs since the prompt
  tool/call         ToolCallParams        -> ToolCallResult       a `tdai_*` tool the model called
  command/run       CommandRunParams      -> CommandStep          a `/tdai-memory-*` command starts
  command/answer    CommandAnswerParams   -> CommandStep          the user answered a dialog step
  status            StatusParams          -> dict                 the full status report (data)
  learning/trigger  LearningTriggerParams -> LearningTriggerResult  consolidate soon (e.g. Pi is about
                                                                  to compact); never waits for the job
  shutdown          ShutdownParams        -> ShutdownResult       drain briefly, then exit

Requests, sidecar -> shim (ids are strings, "s1", "s2", ...):

  model/complete    ModelCompleteParams   -> ModelCompleteResult  one completion on the user's model,
                                                                  outside the session (nothing is added
                                                                  to the transcript); errors use the
                                                                  MODEL_* codes below

Notifications, sidecar -> shim:

  status/changed    StatusChanged         the footer changed (e.g. background delivery finished)
  notice            Notice                a one-line message for the user (e.g. a consolidation ran)
  learning/consent  ConsentNeeded         learning was never allowed or refused: the shim, when it
                                          has a UI, runs the `learning` command (which asks)

Every result that changes Pi's status line carries a `Footer`: a typed state from `footer` (ready,
recalled n, learning, behind n, paused, unavailable, off, starting, setup) and its text. The shim
shows the text and keeps the state; it never reads meaning out of the text.

A command runs as a small dialog driven by the sidecar: `command/run` returns a `CommandStep`;
when its `kind` is `select`, `input` or `editor` the shim shows that dialog and sends the answer
with `command/answer {flowId, answer}` (null when cancelled or when there is no UI), until a step of
kind `done` arrives. A yes/no question comes as a select with "No" first (Pi's own confirm
starts on Yes and cannot start on No). The shim renders; all decisions are made here. A done step with
`reload: true` asks the shim to reload Pi (e.g. new skills or a new configuration to read).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from pi_memory_bridge.footer import FooterKind, FooterState


class WireModel(BaseModel):
    model_config = ConfigDict(
        strict=True,
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=True,
        frozen=True,
        defer_build=True,  # build validators on first use: start-up time matters (spawn-to-ready)
    )


class Footer(WireModel):
    """Pi's status line: the typed state (`footer.FooterKind`) and the text it renders to."""

    state: FooterKind
    count: int | None = None
    reason: str | None = None
    text: str

    @classmethod
    def of(cls, state: FooterState) -> Footer:
        return cls(state=state.kind, count=state.count, reason=state.reason, text=state.text)


# ---- initialize -------------------------------------------------------------------------------


class ClientInfo(WireModel):
    name: str = Field(max_length=200)
    version: str = Field(max_length=100)


class InitializeParams(WireModel):
    protocol_version: str = Field(max_length=20)
    client: ClientInfo
    agent_dir: str | None = Field(default=None, max_length=4096)
    cwd: str = Field(max_length=4096)
    project_trusted: bool = False
    has_ui: bool = False


class ConfigState(WireModel):
    ok: bool
    backend: str
    enabled: bool
    problems: list[str]
    sources: list[str]


class RecallLimits(WireModel):
    deadline_ms: int
    enabled: bool


class InitializeResult(WireModel):
    protocol_version: str
    server_version: str
    config: ConfigState
    recall: RecallLimits
    footer: Footer
    # tools whose feature the config turns off: the shim takes them out of Pi's active tools, so
    # no request declares (and pays for) a tool that could only answer that it is off
    hidden_tools: list[str] = Field(default_factory=list)


# ---- sessions and identity --------------------------------------------------------------------


class EntryRef(WireModel):
    """One session entry as the shim projects it: enough to derive the branch identity."""

    id: str = Field(max_length=200)
    parent_id: str | None = Field(default=None, max_length=200)
    type: str = Field(default="", max_length=64)
    role: str | None = Field(default=None, max_length=64)  # capture keys a user turn by its entry id
    ts: int | None = None  # the message's own timestamp (ms), for message entries


class SessionParams(WireModel):
    pi_session_id: str = Field(min_length=1, max_length=200)
    session_file: str | None = Field(default=None, max_length=4096)
    entries: list[EntryRef] = Field(default_factory=list)
    leaf_id: str | None = Field(default=None, max_length=200)


class SessionResult(WireModel):
    memory_session_id: str
    branch: str


# ---- recall -----------------------------------------------------------------------------------


class RecallParams(WireModel):
    pi_session_id: str = Field(min_length=1, max_length=200)
    prompt: str
    live_user_timestamps: list[int] = Field(default_factory=list)
    # what earlier recalled blocks still in this branch's context hold (their items' context
    # keys, as `RecallResult.keys` gave them) and how many characters those blocks take
    in_context: list[Annotated[str, Field(max_length=64)]] = Field(default_factory=list, max_length=20_000)
    in_context_chars: int = Field(default=0, ge=0)


class LayerReport(WireModel):
    layer: str
    state: Literal["ok", "empty", "failed", "timeout", "skipped"]
    items: int
    ms: float
    error: str | None = None


class RecallResult(WireModel):
    block: str | None
    outcome: Literal["recalled", "partial", "empty", "skipped", "unavailable", "disabled"]
    layers: list[LayerReport]
    elapsed_ms: float
    chars: int
    # the context keys of the items in `block`: the shim stores them with the block in Pi's
    # session and sends back those of the branch's live context as `RecallParams.in_context`
    keys: list[str] = Field(default_factory=list)
    footer: Footer


# ---- capture ----------------------------------------------------------------------------------


class TurnSettledParams(WireModel):
    pi_session_id: str = Field(min_length=1, max_length=200)
    runs: list[list[Any]]
    aborted: bool | None = None
    # the session's entries at settle time: the branch identity is derived from them then, since a
    # `/tree` branch only exists once its first message has been appended
    entries: list[EntryRef] = Field(default_factory=list)
    leaf_id: str | None = Field(default=None, max_length=200)
    # False when Pi does not keep this run (`--no-session`, e.g. a subagent's task): not the
    # user's conversation, so capture skips it unless `capture.noSessionRuns` is on
    session_persisted: bool = True


class TurnSettledResult(WireModel):
    captured: int
    skipped: int
    reasons: list[str]
    footer: Footer


# ---- tools ------------------------------------------------------------------------------------

ToolName = Literal[
    "tdai_memory_search",
    "tdai_conversation_search",
    "tdai_memory_save",
    "tdai_skill_search",
    "tdai_skill_read",
]


class ToolCallParams(WireModel):
    name: ToolName
    arguments: dict[str, Any]


class ToolCallResult(WireModel):
    text: str
    details: dict[str, Any]
    is_error: bool = False


# ---- commands ---------------------------------------------------------------------------------


class SessionModel(WireModel):
    """The session's current Pi model, as Pi's model registry describes it (`ctx.model`).

    Prices are Pi's catalog prices in dollars per million tokens; Pi lists 0 for a model whose
    price it does not know (custom providers without a `cost`).
    """

    provider: str = Field(max_length=200)
    id: str = Field(max_length=300)
    input_cost_per_mtok: float = Field(default=0.0, ge=0)
    output_cost_per_mtok: float = Field(default=0.0, ge=0)


class CommandRunParams(WireModel):
    name: str = Field(max_length=64)
    args: str = Field(default="", max_length=100_000)
    has_ui: bool = False
    pi_session_id: str = Field(default="", max_length=200)
    session_model: SessionModel | None = None  # None: the session has no model selected


class CommandAnswerParams(WireModel):
    flow_id: str = Field(max_length=64)
    answer: bool | str | list[str] | None = None


class CommandStep(WireModel):
    kind: Literal["done", "select", "input", "editor"]
    flow_id: str | None = None
    title: str = ""
    message: str = ""
    options: list[str] = Field(default_factory=list)
    placeholder: str = ""
    prefill: str = ""  # editor: the text to start from
    level: Literal["info", "warning", "error"] = "info"
    footer: Footer | None = None  # on a done step: the status line after the command
    reload: bool = False  # on a done step: Pi should reload (it reads skills and config at start)


# ---- status / shutdown / notifications --------------------------------------------------------


class StatusParams(WireModel):
    pass


class ShutdownParams(WireModel):
    reason: str = Field(default="quit", max_length=32)


class ShutdownResult(WireModel):
    drained: bool  # whether the requests in flight finished before the answer


class StatusChanged(WireModel):
    footer: Footer


# ---- learning ---------------------------------------------------------------------------------

# JSON-RPC error codes the shim answers `model/complete` with.
MODEL_NOT_FOUND = -32010  # no model configured, or "provider/id" unknown to Pi
MODEL_NO_AUTH = -32011  # the model has no configured auth (no key, not logged in)
MODEL_FAILED = -32012  # the call itself threw (network, provider error)
MODEL_TIMEOUT = -32013  # no answer within timeoutMs (the call was aborted)


class ModelCompleteParams(WireModel):
    system_prompt: str = Field(max_length=100_000)
    prompt: str = Field(max_length=400_000)
    max_tokens: int = Field(ge=1, le=32_000)
    timeout_ms: int = Field(ge=100, le=600_000)
    model: str | None = Field(default=None, max_length=300)  # "provider/id"; None: the session's model


class ModelUsage(WireModel):
    input: int = Field(ge=0)
    output: int = Field(ge=0)


class ModelCompleteResult(WireModel):
    text: str
    stop_reason: str = Field(max_length=64)
    usage: ModelUsage
    model: str = Field(max_length=300)  # "provider/id" that answered


class LearningTriggerParams(WireModel):
    pi_session_id: str = Field(default="", max_length=200)
    reason: Literal["compact", "idle", "manual"] = "manual"


class LearningTriggerResult(WireModel):
    scheduled: bool
    detail: str = ""


class Notice(WireModel):
    message: str
    level: Literal["info", "warning", "error"] = "info"


class ConsentNeeded(WireModel):
    pass
