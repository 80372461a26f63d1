"""SDK, HTTP and transport failures, translated into the backend error tree.

MemoryCore reports errors three ways, and the SDK passes each on differently:

* data-plane errors: HTTP 4xx/5xx with an envelope whose `code` equals the status;
* skill and quota errors: HTTP **200** with a non-zero envelope code (40001, 50301, ...);
* transport failures (timeouts, refused or reset connections, including the reset MemoryCore
  sends for a body over 1 MiB): raw `httpx` exceptions, not the SDK's `TDAMError`.

A body that is not an envelope reaches us as `TDAMError(-1 or status, ...)`; it is classified
as unavailable, so recall fails open and delivery retries later.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from pi_memory_bridge.backends.base import (
    BackendConfigError,
    BackendError,
    BackendRejected,
    BackendUnavailable,
)
from pi_memory_bridge.backends.memorycore._sdk import SdkBindings

T = TypeVar("T")

_MESSAGE_CHARS = 300

# Skill codes (envelope code, HTTP 200), from the SDK's SKILL_ERROR_CODE table.
_SKILL_NEEDS_USER = frozenset({40301, 40302, 50303})  # not owner, team mismatch, server lacks COS
_SKILL_TRANSIENT = frozenset({4291, 50301, 50302})  # quota, queue/storage down, LLM down
_SKILL_REJECTED = frozenset({40001, 40401, 40901, 41002, 41301, 42201, 42202, 42203})
_SKILL_INTERNAL = 50001  # "anything else", including agent_not_found (an unprovisioned agent)


def classify_code(code: int, message: str, details: Mapping[str, Any] | None = None) -> type[BackendError]:
    """Which branch of the error tree an SDK error code belongs to."""
    if code in (401, 403) or code in _SKILL_NEEDS_USER:
        return BackendConfigError
    if code == _SKILL_INTERNAL:
        return BackendConfigError if "agent_not_found" in message else BackendUnavailable
    if details is not None and details.get("retryable") is True:
        return BackendUnavailable
    if code in (408, 429) or 500 <= code <= 599 or code in _SKILL_TRANSIENT:
        return BackendUnavailable
    if 400 <= code <= 499 or code in _SKILL_REJECTED:
        return BackendRejected
    # -1 (a body that is not an envelope) and anything unknown: assume the server is unwell
    return BackendUnavailable


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MESSAGE_CHARS else text[: _MESSAGE_CHARS - 1] + "…"


def _api_error(exc: BaseException, action: str) -> BackendError:
    code = getattr(exc, "code", -1)
    code = code if isinstance(code, int) and not isinstance(code, bool) else -1
    message = str(getattr(exc, "message", "") or "")
    request_id = str(getattr(exc, "request_id", "") or "")
    raw_details = getattr(exc, "details", None)
    details = raw_details if isinstance(raw_details, Mapping) else None
    kind = classify_code(code, message, details)
    suffix = f" (request {request_id})" if request_id else ""
    if code == -1:
        text = f"MemoryCore sent an unreadable response to {action}: {_clip(message) or 'not an envelope'}"
    elif code in (401, 403):
        text = (
            f"MemoryCore refused {action}: {code} {_clip(message)}; check the gateway API key and "
            "the service id"
        )
    else:
        text = f"MemoryCore {action} failed: {code} {_clip(message)}"
    return kind(text + suffix)


def _tls_verification_failed(exc: BaseException) -> bool:
    seen: set[int] = set()
    node: BaseException | None = exc
    while node is not None and id(node) not in seen:
        seen.add(id(node))
        if isinstance(node, ssl.SSLCertVerificationError):
            return True
        node = node.__cause__ or node.__context__
    return False


def translate(exc: BaseException, action: str, sdk: SdkBindings) -> BackendError | None:
    """The backend error for `exc`, or None when it is not a failure the SDK is known to raise."""
    if isinstance(exc, BackendError):
        return exc
    if isinstance(exc, sdk.api_error):
        return _api_error(exc, action)
    if isinstance(exc, (sdk.param_error, ValueError)):
        return BackendRejected(f"the MemoryCore SDK refused {action}: {_clip(str(exc))}")
    if _tls_verification_failed(exc):
        return BackendConfigError(
            f"MemoryCore {action}: the server's TLS certificate could not be verified ({_clip(str(exc))})"
        )
    if isinstance(exc, sdk.setup_errors):
        return BackendConfigError(f"MemoryCore {action}: unusable endpoint ({_clip(str(exc))})")
    if isinstance(exc, (*sdk.timeout_errors, TimeoutError)):
        return BackendUnavailable(f"MemoryCore {action} timed out")
    if isinstance(exc, (*sdk.network_errors, OSError)):
        detail = _clip(str(exc)) or "the connection was closed or reset"
        return BackendUnavailable(
            f"MemoryCore {action} failed on the network: {type(exc).__name__}: {detail} "
            "(MemoryCore also resets requests whose body exceeds its 1 MiB limit)"
        )
    return None


async def call_sdk(action: str, sdk: SdkBindings, make: Callable[[], Awaitable[T]]) -> T:
    """Run one SDK call; its known failures come out as `BackendError`s, others unchanged."""
    try:
        return await make()
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        translated = translate(exc, action, sdk)
        if translated is None or translated is exc:
            raise
        raise translated from exc
