"""`ShimModel`: a completion run by the Pi extension (`model/complete`) on the user's model.

It speaks the wire (the request's models and error codes), so it sits with the learning wiring
(`engine.learning`) above the domain, which knows only `CompletionModel`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from pydantic import BaseModel, ValidationError

from pi_memory_bridge.learning.model import Completion, ModelError
from pi_memory_bridge.learning.reasons import FailReason
from pi_memory_bridge.rpc import PeerError, PeerGone
from pi_memory_bridge.wire import (
    MODEL_NO_AUTH,
    MODEL_NOT_FOUND,
    MODEL_TIMEOUT,
    ModelCompleteParams,
    ModelCompleteResult,
)

# the pipe and Pi's own bookkeeping on top of the model's time
SHIM_SLACK_S = 2.0

Request = Callable[[str, BaseModel, float], Awaitable[object]]  # JSON, validated here


class ShimModel:
    """A completion run by the Pi extension on `model` ("provider/id") or the session's model."""

    def __init__(self, request: Request, model: str | None) -> None:
        self._request = request
        self._model = model

    @property
    def label(self) -> str:
        return self._model or "the session's current Pi model"

    async def complete(self, system: str, user: str, *, max_tokens: int, timeout_s: float) -> Completion:
        params = ModelCompleteParams(
            system_prompt=system,
            prompt=user,
            max_tokens=max_tokens,
            timeout_ms=int(timeout_s * 1000),
            model=self._model,
        )
        try:
            raw = await self._request("model/complete", params, timeout_s + SHIM_SLACK_S)
        except TimeoutError:
            raise ModelError(FailReason.TIMEOUT, f"no answer within {timeout_s:.0f} s") from None
        except PeerGone as exc:
            raise ModelError(FailReason.UNAVAILABLE, str(exc)) from None
        except PeerError as exc:
            reasons = {
                MODEL_NOT_FOUND: FailReason.NO_MODEL,
                MODEL_NO_AUTH: FailReason.NO_AUTH,
                MODEL_TIMEOUT: FailReason.TIMEOUT,
            }
            reason = reasons.get(exc.code, FailReason.UNAVAILABLE)
            raise ModelError(reason, exc.message[:300]) from None
        try:
            result = ModelCompleteResult.model_validate(raw)
        except ValidationError:
            raise ModelError(FailReason.UNAVAILABLE, "the Pi extension answered off the protocol") from None
        return Completion(
            text=result.text,
            stop_reason=result.stop_reason,
            input_tokens=result.usage.input,
            output_tokens=result.usage.output,
            model=result.model,
        )
