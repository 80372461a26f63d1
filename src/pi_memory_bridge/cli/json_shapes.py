"""The JSON every read command prints with `--json`: one model per command, documented in README
("JSON output") and checked against it by tests/test_cli_json.py."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from pi_memory_bridge.operations.memory_export import ExportFile, ItemJson


class _Out(BaseModel):
    model_config = ConfigDict(
        strict=True, extra="forbid", frozen=True, alias_generator=to_camel, validate_by_name=True,
        validate_by_alias=True, serialize_by_alias=True,
    )  # fmt: skip


class ListOut(_Out):
    """`list --json`: each section asked for (the others are null or empty)."""

    profile: ItemJson | None
    memories: list[ItemJson]
    conversation: list[ItemJson]
    notes: list[ItemJson]


class ShowOut(_Out):
    item: ItemJson


class SearchOut(_Out):
    query: str
    recent: bool  # true: the query was empty, these are the most recent items
    items: list[ItemJson]


class ProblemOut(_Out):
    what: str
    fix: str


class StatusOut(_Out):
    version: str
    protocol: str
    enabled: bool
    backend: str
    backend_ok: bool
    backend_detail: str
    counts: dict[str, int]
    identity: str
    config_sources: list[str]
    recall_budget: str
    last_recall: str
    capture: str
    outbox: str
    sdk: str
    log_file: str
    problems: list[ProblemOut]
    healthy: bool
    paused_project: str | None
    embeddings: str  # search by meaning: the model, whether it loaded, vectors done/total; "" if none
    catch_up: str  # turns recovered from Pi's session files: progress and backlog; "" if off
    learning: str  # consolidation: on/off and why, its model, last jobs, tokens against the budget
    # the main text's plain words: this Pi session, the last recall, what waits, what is remembered
    session: str
    recalled: str
    waiting: str
    remembered: str


class TargetOut(_Out):
    id: str
    kind: str
    text: str


class ProposalOut(_Out):
    id: int  # what `proposals accept N` / `dismiss N` take
    job: str  # the learning job that proposed it
    proposed_at: str
    kind: str
    text: str  # the proposed replacement
    replaces: list[TargetOut]  # the memories you saved by hand that it would replace
    why: str


class ProposalsOut(_Out):
    """`proposals --json`: the pending proposals, newest first."""

    proposals: list[ProposalOut]


SHAPES: dict[str, type[BaseModel]] = {
    "list": ListOut,
    "show": ShowOut,
    "search": SearchOut,
    "status": StatusOut,
    "export": ExportFile,
    "proposals": ProposalsOut,
}
