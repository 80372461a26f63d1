"""An OpenAI-compatible chat-completions endpoint the user configured (`learning.endpoint`).

Loopback http or https only (the config rule for endpoints), TLS always verified, redirects never
followed: the conversation goes to the server the user named and nowhere else. The key, if the
server needs one, comes from `PI_MEMORY_BRIDGE_LEARNING_API_KEY` and is never written anywhere.
httpx is imported on first use, so a sidecar that never consolidates this way does not pay for it.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pi_memory_bridge.learning.model import Completion, ModelError
from pi_memory_bridge.learning.reasons import FailReason

API_KEY_VAR = "PI_MEMORY_BRIDGE_LEARNING_API_KEY"
MAX_RESPONSE_BYTES = 2 * 1024 * 1024


class _Lenient(BaseModel):
    # servers add fields of their own; only what is read here must be there and well-typed
    model_config = ConfigDict(extra="ignore", strict=True)


class _Message(_Lenient):
    content: str | None = None


class _Choice(_Lenient):
    message: _Message
    finish_reason: str | None = None


class _Usage(_Lenient):
    prompt_tokens: int = Field(default=0, ge=0)
    completion_tokens: int = Field(default=0, ge=0)


class _Response(_Lenient):
    choices: list[_Choice] = Field(min_length=1)
    usage: _Usage | None = None
    model: str | None = None


_STOP_REASONS = {"stop": "stop", "length": "length", "content_filter": "refusal", "tool_calls": "toolUse"}


class EndpointModel:
    def __init__(self, base_url: str, model: str, env: Mapping[str, str]) -> None:
        self._url = base_url.rstrip("/") + "/chat/completions"
        self._model = model
        key = env.get(API_KEY_VAR, "").strip()
        self._headers = {"Authorization": f"Bearer {key}"} if key else {}

    @property
    def label(self) -> str:
        return f"{self._model} at {self._url.rsplit('/chat/completions', 1)[0]}"

    async def complete(self, system: str, user: str, *, max_tokens: int, timeout_s: float) -> Completion:
        import httpx

        body = {
            "model": self._model,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
            "max_tokens": max_tokens,
            "temperature": 0,
            "stream": False,
        }
        try:
            async with httpx.AsyncClient(
                timeout=timeout_s, follow_redirects=False, trust_env=False
            ) as client:
                response = await client.post(self._url, json=body, headers=self._headers)
        except httpx.TimeoutException:
            raise ModelError(FailReason.TIMEOUT, f"no answer within {timeout_s:.0f} s") from None
        except httpx.HTTPError as exc:
            raise ModelError(FailReason.UNAVAILABLE, type(exc).__name__) from None
        if response.status_code in (401, 403):
            raise ModelError(FailReason.NO_AUTH, f"HTTP {response.status_code} (set {API_KEY_VAR}?)")
        if response.status_code != 200:
            raise ModelError(FailReason.UNAVAILABLE, f"HTTP {response.status_code}")
        if len(response.content) > MAX_RESPONSE_BYTES:
            raise ModelError(FailReason.UNAVAILABLE, "the answer is too large")
        try:
            parsed = _Response.model_validate_json(response.content)
        except ValidationError:
            raise ModelError(FailReason.UNAVAILABLE, "not an OpenAI chat-completions answer") from None
        choice = parsed.choices[0]
        finish = choice.finish_reason or "unknown"
        usage = parsed.usage or _Usage()
        return Completion(
            text=choice.message.content or "",
            stop_reason=_STOP_REASONS.get(finish, finish),
            input_tokens=usage.prompt_tokens,
            output_tokens=usage.completion_tokens,
            model=parsed.model or self._model,
        )
