"""The OpenAI-compatible endpoint model against a real HTTP server on 127.0.0.1 having bad days."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from pi_memory_bridge.learning.endpoint import API_KEY_VAR, EndpointModel
from pi_memory_bridge.learning.model import ModelError
from pi_memory_bridge.learning.schemas import FailReason


class Server:
    def __init__(self) -> None:
        self.status = 200
        self.body: Any = {}
        self.delay = 0.0
        self.headers: dict[str, str] = {}
        self.requests: list[dict[str, Any]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                owner.requests.append({"path": self.path, "headers": dict(self.headers),
                                       "body": json.loads(self.rfile.read(length))})  # fmt: skip
                time.sleep(owner.delay)
                data = json.dumps(owner.body).encode() if not isinstance(owner.body, bytes) else owner.body
                self.send_response(owner.status)
                for k, v in owner.headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"


@pytest.fixture
def server() -> Iterator[Server]:
    s = Server()
    yield s
    s.httpd.shutdown()
    s.httpd.server_close()


def _answer(text: str, finish: str = "stop") -> dict[str, Any]:
    return {
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}],
        "usage": {"prompt_tokens": 40, "completion_tokens": 9},
        "model": "qwen",
        "system_fingerprint": "extra fields are fine",
    }


async def test_a_completion_carries_text_usage_and_stop_reason(server: Server) -> None:
    server.body = _answer('{"memories": []}')
    model = EndpointModel(server.url, "qwen", {API_KEY_VAR: "local-secret"})
    done = await model.complete("sys", "user text", max_tokens=300, timeout_s=5)
    assert (done.text, done.stop_reason, done.input_tokens, done.output_tokens) == (
        '{"memories": []}',
        "stop",
        40,
        9,
    )
    [req] = server.requests
    assert req["path"] == "/v1/chat/completions"
    assert req["body"]["messages"] == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "user text"},
    ]
    assert req["body"]["stream"] is False and req["body"]["max_tokens"] == 300
    assert req["headers"]["Authorization"] == "Bearer local-secret"
    assert "local-secret" not in model.label


async def test_a_cut_off_answer_keeps_its_stop_reason(server: Server) -> None:
    server.body = _answer('{"memo', "length")
    done = await EndpointModel(server.url, "qwen", {}).complete("s", "u", max_tokens=10, timeout_s=5)
    assert done.stop_reason == "length"


@pytest.mark.parametrize(
    ("status", "body", "headers", "reason"),
    [
        (401, {"error": "no key"}, {}, FailReason.NO_AUTH),
        (403, {"error": "forbidden"}, {}, FailReason.NO_AUTH),
        (500, {"error": "boom"}, {}, FailReason.UNAVAILABLE),
        (302, b"", {"Location": "https://elsewhere.example/v1/chat/completions"}, FailReason.UNAVAILABLE),
        (200, b"<html>not json</html>", {}, FailReason.UNAVAILABLE),
        (200, {"choices": []}, {}, FailReason.UNAVAILABLE),
    ],
    ids=["401", "403", "500", "redirect-not-followed", "html", "no-choices"],
)
async def test_bad_days_are_model_errors(
    server: Server, status: int, body: Any, headers: dict[str, str], reason: FailReason
) -> None:
    server.status, server.body, server.headers = status, body, headers
    with pytest.raises(ModelError) as err:
        await EndpointModel(server.url, "qwen", {}).complete("s", "u", max_tokens=10, timeout_s=5)
    assert err.value.reason is reason
    assert len(server.requests) == 1  # a redirect is never followed


async def test_a_slow_server_is_a_timeout(server: Server) -> None:
    server.body, server.delay = _answer("{}"), 1.5
    with pytest.raises(ModelError) as err:
        await EndpointModel(server.url, "qwen", {}).complete("s", "u", max_tokens=10, timeout_s=0.3)
    assert err.value.reason is FailReason.TIMEOUT


async def test_nothing_listening_is_unavailable() -> None:
    with pytest.raises(ModelError) as err:
        await EndpointModel("http://127.0.0.1:9/v1", "qwen", {}).complete(
            "s", "u", max_tokens=10, timeout_s=2
        )
    assert err.value.reason is FailReason.UNAVAILABLE


@pytest.mark.parametrize(
    ("learning", "ok"),
    [
        ({"enabled": True, "endpoint": "http://127.0.0.1:11434/v1", "model": "qwen2.5:7b"}, True),
        ({"endpoint": "https://llm.example.com/v1", "model": "m"}, True),
        ({"endpoint": "http://llm.example.com/v1", "model": "m"}, False),  # plain http leaves the machine
        ({"endpoint": "http://127.0.0.1:11434/v1"}, False),  # which model?
        ({"model": "anthropic/claude haiku"}, False),
        ({"enabled": "yes"}, False),
        ({"dailyTokenBudget": -1}, False),
        ({"idleSecond": 5}, False),
    ],
)
def test_learning_config_is_checked_strictly(tmp_path: Any, learning: dict[str, Any], ok: bool) -> None:
    from pi_memory_bridge.config import global_config_path, load_config

    path = global_config_path(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"learning": learning}), encoding="utf-8")
    loaded = load_config(agent_dir=tmp_path, cwd=None, project_trusted=False, env={})
    assert loaded.ok is ok, loaded.problems
    if not ok:
        assert any("learning" in str(p) for p in loaded.problems)
        assert loaded.config.enabled is False  # a broken global file turns memory off, as for any key
