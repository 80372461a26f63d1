"""Config problems, and turning pydantic's validation errors into messages a user can act on.

Every problem names the key (dotted camelCase path, or an env var name) and the source it came
from, so "recall.deadlineMs in /x/config.json: must be an integer between 100 and 30000" tells
the reader exactly what to edit. Messages never echo values: a mistyped key might hold a secret.
The wording is worked out by `_explain`, imported only when there is something wrong: the
handshake loads the configuration, and a good one must not pay for formatting errors.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from pydantic import BaseModel, ValidationError

Severity = Literal["error", "warning"]
SourceKind = Literal["default", "global", "project", "env"]

ENV_SOURCE = "environment"
DEFAULT_SOURCE = "defaults"

TLS_OFF_MESSAGE = (
    "TLS verification cannot be turned off: pi-memory-bridge always verifies certificates, so "
    "remove this key (use a certificate the system trusts; plain http is allowed only on loopback)"
)
# Keys people reach for to skip certificate checks (rejectUnauthorized, verifyTls, insecure, ...).
_TLS_KEY = re.compile(r"tls|ssl|rejectunauthori[sz]ed|insecure|cert|^verify$|skipverif|noverif")


@dataclass(frozen=True)
class ConfigProblem:
    """One thing wrong with the configuration; `source` is a file path or "environment"."""

    severity: Severity
    key: str
    source: str
    message: str

    def __str__(self) -> str:
        if not self.key:
            return f"{self.source}: {self.message}"
        return f"{self.key} in {self.source}: {self.message}"


@dataclass(frozen=True)
class ConfigSource:
    """A source that was read while loading (a file that existed, or the environment)."""

    kind: SourceKind
    path: str | None


def error(key: str, source: str | Path, message: str) -> ConfigProblem:
    return ConfigProblem("error", key, str(source), message)


def warning(key: str, source: str | Path, message: str) -> ConfigProblem:
    return ConfigProblem("warning", key, str(source), message)


def is_tls_key(name: str) -> bool:
    return bool(_TLS_KEY.search(re.sub(r"[^a-z0-9]", "", name.lower())))


def problems_from_validation(
    exc: ValidationError, model: type[BaseModel], source: str | Path
) -> list[ConfigProblem]:
    """One problem per distinct failing key, worded from the schema rather than pydantic's prose."""
    from pi_memory_bridge.config._explain import explain_validation

    return explain_validation(exc, model, source)


def unknown_key_message(name: str, known: Iterable[str]) -> str:
    """What to say about an unknown key: a TLS switch we refuse, or the closest known key."""
    from pi_memory_bridge.config._explain import explain_unknown_key

    return explain_unknown_key(name, known)
