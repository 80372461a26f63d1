"""Why a consolidation job wrote nothing (counted in status)."""

from __future__ import annotations

import enum


class FailReason(enum.StrEnum):
    """Why a job wrote nothing (counted in status)."""

    UNPARSEABLE = "unparseable answer"
    OFF_SCHEMA = "answer off the schema"
    UNKNOWN_ID = "unknown id in the answer"
    TOO_MANY = "too many items in the answer"
    STOP_REASON = "model did not finish normally"
    TIMEOUT = "model timed out"
    NO_AUTH = "model has no configured auth"
    NO_MODEL = "no model to consolidate with"
    UNAVAILABLE = "model unavailable"
    BUDGET = "daily token budget spent"
    CONFLICT = "store changed meanwhile"

    @property
    def counts_toward_drop(self) -> bool:
        """Failures that spent tokens on this very batch count toward dropping it; a missing model,
        missing auth, a spent budget or a store conflict say nothing about the batch."""
        return self in {
            FailReason.UNPARSEABLE,
            FailReason.OFF_SCHEMA,
            FailReason.UNKNOWN_ID,
            FailReason.TOO_MANY,
            FailReason.STOP_REASON,
            FailReason.TIMEOUT,
        }
