"""`ShimModel` over the real JSON-RPC endpoint, against a scripted Pi extension: each way the
extension can fail a `model/complete` becomes the learning failure it stands for, never a hang
or a stray exception; a silent extension is a timeout (virtual time: looptime)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import looptime
import pytest

from pi_memory_bridge.engine.shim_model import SHIM_SLACK_S, ShimModel
from pi_memory_bridge.learning.model import ModelError
from pi_memory_bridge.learning.reasons import FailReason
from pi_memory_bridge.rpc import RpcEndpoint
from pi_memory_bridge.wire import MODEL_NO_AUTH, MODEL_NOT_FOUND, MODEL_TIMEOUT

GOOD = {"text": "ok", "stopReason": "stop", "usage": {"input": 12, "output": 3}, "model": "anthropic/claude"}

Answer = dict[str, Any] | None  # the JSON-RPC answer's body; None: the extension never answers


class ScriptedShim:
    """The extension's side of the pipe: reads what the sidecar writes, answers from a script
    (`"eof"` closes the pipe)."""

    def __init__(self, script: list[Answer | str]) -> None:
        self.script = list(script)
        self.reader = asyncio.StreamReader()
        self.asked: list[dict[str, Any]] = []

    def write(self, data: bytes) -> None:
        for line in data.decode().splitlines():
            request = json.loads(line)
            self.asked.append(request)
            answer = self.script.pop(0)
            if answer == "eof":
                self.reader.feed_eof()
            elif isinstance(answer, dict):
                self.reader.feed_data(
                    json.dumps({"jsonrpc": "2.0", "id": request["id"], **answer}).encode() + b"\n"
                )

    async def drain(self) -> None:
        return None


async def _complete(script: list[Answer | str], timeout_s: float = 30.0) -> tuple[Any, ScriptedShim]:
    shim = ScriptedShim(script)
    endpoint = RpcEndpoint()
    serving = asyncio.create_task(endpoint.serve(shim.reader, shim))
    await asyncio.sleep(0)  # the endpoint has its writer
    model = ShimModel(endpoint.request, "anthropic/claude")
    try:
        return await model.complete("system", "prompt", max_tokens=500, timeout_s=timeout_s), shim
    except ModelError as exc:
        return exc, shim
    finally:
        shim.reader.feed_eof()  # the extension goes: the endpoint stops serving
        await asyncio.wait_for(serving, 10)


def _run(scenario: Callable[[], Awaitable[None]]) -> None:
    loop = looptime.new_event_loop(start=0.0)
    try:
        loop.run_until_complete(scenario())
    finally:
        loop.close()


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ({"error": {"code": MODEL_NOT_FOUND, "message": "no model anthropic/claude"}}, FailReason.NO_MODEL),
        ({"error": {"code": MODEL_NO_AUTH, "message": "not logged in"}}, FailReason.NO_AUTH),
        ({"error": {"code": MODEL_TIMEOUT, "message": "aborted after 30 s"}}, FailReason.TIMEOUT),
        ({"error": {"code": -32603, "message": "x" * 1000}}, FailReason.UNAVAILABLE),
        ({"result": {**GOOD, "usage": {"input": -1, "output": 3}}}, FailReason.UNAVAILABLE),
        ({"result": "just text"}, FailReason.UNAVAILABLE),
        ("eof", FailReason.UNAVAILABLE),
    ],
)
def test_each_failure_of_the_extension_is_the_learning_failure_it_stands_for(
    answer: Answer | str, reason: FailReason
) -> None:
    async def scenario() -> None:
        outcome, shim = await _complete([answer])
        assert isinstance(outcome, ModelError) and outcome.reason is reason, outcome
        assert len(str(outcome)) < 400  # a long message from the extension is cut
        (asked,) = shim.asked
        assert asked["method"] == "model/complete" and asked["params"]["maxTokens"] == 500

    _run(scenario)


def test_a_silent_extension_is_a_timeout_a_little_after_the_models_own() -> None:
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        began = loop.time()
        outcome, _shim = await _complete([None], timeout_s=20.0)
        assert isinstance(outcome, ModelError) and outcome.reason is FailReason.TIMEOUT
        assert loop.time() - began == pytest.approx(20.0 + SHIM_SLACK_S)  # virtual seconds

    _run(scenario)


def test_an_answer_on_the_protocol_is_the_completion() -> None:
    async def scenario() -> None:
        outcome, _shim = await _complete([{"result": GOOD}])
        assert (outcome.text, outcome.input_tokens, outcome.output_tokens) == ("ok", 12, 3)
        assert outcome.model == "anthropic/claude"

    _run(scenario)
