"""What an outbox record is: the on-disk shape (validated with pydantic when read) and the values
handed to callers (frozen dataclasses).

One record holds one captured turn. Its `id` is the turn's deterministic `turn_id`, which makes
enqueue idempotent and lets a redelivery be checked against the backend.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, Self

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from pi_memory_bridge.backends.base import ConversationTurn, ToolEvidence

PAYLOAD_VERSION: Literal[1] = 1
MAX_TURN_ID_CHARS = 256
MAX_ERROR_CHARS = 1000


class RecordState(enum.StrEnum):
    PENDING = "pending"  # waiting for delivery (possibly in backoff)
    IN_FLIGHT = "in_flight"  # claimed by one process under a lease
    DEAD = "dead"  # permanently rejected; kept for an operator to requeue or purge
    QUARANTINED = "quarantined"  # failed validation when read; kept aside, never delivered


class ToolPayload(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    tool_call_id: str
    tool_name: str
    arguments: str
    result: str
    is_error: bool = False


class TurnPayload(BaseModel):
    """The turn as stored in the `payload` column (JSON)."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    v: Literal[1] = PAYLOAD_VERSION
    turn_id: str = Field(min_length=1, max_length=MAX_TURN_ID_CHARS)
    memory_session_id: str = Field(min_length=1)
    user_text: str
    assistant_text: str
    created_at: AwareDatetime
    pi_session_id: str = ""
    tools: tuple[ToolPayload, ...] = ()

    @classmethod
    def of(cls, turn: ConversationTurn) -> TurnPayload:
        created = turn.created_at
        if created.tzinfo is None:
            # The protocol's convention for naive datetimes, as in the local store.
            created = created.replace(tzinfo=UTC)
        return cls(
            turn_id=turn.turn_id,
            memory_session_id=turn.memory_session_id,
            user_text=turn.user_text,
            assistant_text=turn.assistant_text,
            created_at=created.astimezone(UTC),
            pi_session_id=turn.pi_session_id,
            tools=tuple(
                ToolPayload(
                    tool_call_id=t.tool_call_id,
                    tool_name=t.tool_name,
                    arguments=t.arguments,
                    result=t.result,
                    is_error=t.is_error,
                )
                for t in turn.tools
            ),
        )

    def to_turn(self) -> ConversationTurn:
        return ConversationTurn(
            turn_id=self.turn_id,
            memory_session_id=self.memory_session_id,
            user_text=self.user_text,
            assistant_text=self.assistant_text,
            created_at=self.created_at.astimezone(UTC),
            pi_session_id=self.pi_session_id,
            tools=tuple(
                ToolEvidence(t.tool_call_id, t.tool_name, t.arguments, t.result, t.is_error)
                for t in self.tools
            ),
        )


def _finite(value: float) -> float:
    if not math.isfinite(value):
        raise ValueError("must be a finite number")
    return value


class StoredRecord(BaseModel):
    """One `records` row as read back from disk. Anything that does not fit quarantines the row."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    seq: int = Field(ge=1)
    id: str = Field(min_length=1, max_length=MAX_TURN_ID_CHARS)
    memory_session_id: str = Field(min_length=1)
    payload: TurnPayload
    created_at: float
    attempts: int = Field(ge=0)
    rejections: int = Field(ge=0)
    next_attempt_at: float
    state: RecordState
    last_error: str | None
    lease_owner: str | None
    lease_expires_at: float | None
    ambiguous: int = Field(ge=0, le=1)
    updated_at: float

    @field_validator("payload", mode="before")
    @classmethod
    def _parse_payload(cls, value: Any) -> Any:
        if isinstance(value, str | bytes):
            return TurnPayload.model_validate_json(value)
        return value

    @field_validator("state", mode="before")
    @classmethod
    def _parse_state(cls, value: Any) -> Any:
        return RecordState(value) if isinstance(value, str) else value

    @field_validator("created_at", "next_attempt_at", "updated_at")
    @classmethod
    def _check_finite(cls, value: float) -> float:
        return _finite(value)

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.payload.turn_id != self.id:
            raise ValueError("payload turn_id differs from the record id")
        if self.payload.memory_session_id != self.memory_session_id:
            raise ValueError("payload memory_session_id differs from the record's")
        leased = self.lease_owner is not None and self.lease_expires_at is not None
        if self.state is RecordState.IN_FLIGHT and not leased:
            raise ValueError("an in-flight record needs a lease owner and expiry")
        return self


def describe_invalid(exc: ValidationError) -> str:
    """A short reason for a quarantined row, without the (possibly long) offending values."""
    parts = []
    for error in exc.errors(include_input=False, include_url=False)[:5]:
        where = ".".join(str(x) for x in error["loc"]) or "record"
        parts.append(f"{where}: {error['msg']}")
    more = exc.error_count() - len(parts)
    suffix = f" (+{more} more)" if more > 0 else ""
    return clip_error("invalid record: " + "; ".join(parts) + suffix)


def clip_error(text: str) -> str:
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 1] + "…"


def as_datetime(epoch_s: float) -> datetime:
    return datetime.fromtimestamp(epoch_s, tz=UTC)


@dataclass(frozen=True, slots=True)
class OutboxEntry:
    """A record as shown to an operator (`Outbox.list_entries`, `Outbox.remove`).

    `turn` is None for a quarantined record (its payload could not be read).
    """

    id: str
    memory_session_id: str
    state: RecordState
    attempts: int
    rejections: int
    created_at: datetime | None
    next_attempt_at: datetime | None
    updated_at: datetime | None
    last_error: str | None
    lease_owner: str | None
    lease_expires_at: datetime | None
    turn: ConversationTurn | None


@dataclass(frozen=True, slots=True)
class OutboxCounts:
    pending: int = 0
    in_flight: int = 0
    dead: int = 0
    quarantined: int = 0
    last_error: str | None = None
    # The earliest time a waiting record is due (a session's head in backoff), if any is waiting.
    next_attempt_at: datetime | None = None

    @property
    def waiting(self) -> int:
        return self.pending + self.in_flight


@dataclass(frozen=True, slots=True)
class ClaimedTurn:
    turn: ConversationTurn
    attempts: int
    rejections: int
    # An earlier send may have reached the backend (lost response, crash, reclaimed lease):
    # check `conversation.stored_ids` before sending it again.
    ambiguous: bool


@dataclass(frozen=True, slots=True)
class Claim:
    """A leased batch: consecutive records of one memory session, oldest first."""

    owner: str
    memory_session_id: str
    items: tuple[ClaimedTurn, ...]
    lease_expires_at: float

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(item.turn.turn_id for item in self.items)

    @property
    def head(self) -> ClaimedTurn:
        return self.items[0]


class _All(enum.Enum):
    ALL = "all"


# Pass `ALL` to the operator methods that act on every dead (or quarantined) record.
ALL: Literal[_All.ALL] = _All.ALL
AllRecords = Literal[_All.ALL]
