"""A scripted OpenAI-compatible chat-completions server, run in a thread of the test process.

Binds 127.0.0.1 on a free port. Every request is recorded (in memory and optionally as JSONL).
Each `POST .../chat/completions` is answered by, in order:

1. the next scripted reply queued with `FakeModel.script(...)`;
2. `FakeModel.responder(request)`, when set and it returns a reply;
3. the rules in `rule_reply`:
   * last message has role `tool`            -> `FINAL: tool said <tool text, first 200 chars>`
   * a trailing user text holds `CALL_TOOL <name> <json-object-or-word>`
                                             -> one call `<name>(<json>)` or `<name>({"text": <word>})`
   * otherwise                               -> `ECHO: <last user message text, first 200 chars>`
     (a `before_agent_start` `message` arrives as a user message after the prompt, so then
     that is what is echoed; a prompt whose run failed stays in the context before the next one)

Consolidation requests (pi-memory-bridge's learning prompts, recognised by the tag line their
system prompt starts with) never touch the queue above: they take the next answer scripted with
`FakeModel.script_consolidation("extract" | "reconcile" | "enrich", ...)`, else an empty but valid answer
(recorded in `consolidation_unscripted`), so a test's chat script is not consumed by background
learning and a learning script is not consumed by chat.

Pi always streams (`stream: true` with `stream_options.include_usage`); the SSE frames follow
the OpenAI `chat.completion.chunk` shape. Non-streaming requests get one `chat.completion`.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Final

JsonObject = dict[str, Any]

MODEL_ID: Final = "fake-model"
_ECHO_CHARS: Final = 200
_STREAM_CHUNK_CHARS: Final = 16
_USAGE: Final = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
# The first line of pi-memory-bridge's consolidation system prompts (learning/prompts.py).
CONSOLIDATION_TAGS: Final = {
    "extract": "[pi-memory-bridge:extract v3]",
    "reconcile": "[pi-memory-bridge:reconcile v1]",
    "enrich": "[pi-memory-bridge:enrich v1]",  # tags and questions for memories saved without them
}
_EMPTY_ANSWERS: Final = {
    "extract": '{"memories": []}',
    "reconcile": '{"decisions": []}',
    "enrich": '{"memories": []}',
}


# ---- replies ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolCall:
    name: str
    args: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TextReply:
    text: str
    delay_s: float = 0.0
    finish_reason: str = "stop"  # e.g. "length": an answer cut off by the token limit


@dataclass(frozen=True)
class ToolCallsReply:
    """One assistant message carrying one or several tool calls (Pi runs them in parallel)."""

    calls: tuple[ToolCall, ...]
    delay_s: float = 0.0


@dataclass(frozen=True)
class ErrorReply:
    status: int
    message: str = "scripted error from the fake model"
    delay_s: float = 0.0


@dataclass(frozen=True)
class DelayedRules:
    """Wait, then answer by the rules (a slow model)."""

    delay_s: float


Reply = TextReply | ToolCallsReply | ErrorReply | DelayedRules
Responder = Callable[["RecordedRequest"], Reply | None]


def reply_from_dict(spec: Mapping[str, Any]) -> Reply:
    """Accept the short dict forms used in tests.

    `{"text": s}`, `{"tool": name, "args": {...}}`, `{"tool_calls": [{"tool":..., "args":...}, ...]}`,
    `{"status": 500, "message"?: s}`, `{"delay": seconds}` alone (then the rules answer);
    any of the first four may also carry `"delay": seconds`.
    """
    delay = float(spec.get("delay", 0.0))
    if "text" in spec:
        return TextReply(str(spec["text"]), delay)
    if "tool" in spec:
        return ToolCallsReply((ToolCall(str(spec["tool"]), dict(spec.get("args") or {})),), delay)
    if "tool_calls" in spec:
        calls = tuple(ToolCall(str(c["tool"]), dict(c.get("args") or {})) for c in spec["tool_calls"])
        if not calls:
            raise ValueError("tool_calls needs at least one call")
        return ToolCallsReply(calls, delay)
    if "status" in spec:
        return ErrorReply(int(spec["status"]), str(spec.get("message") or ErrorReply.message), delay)
    if set(spec) == {"delay"}:
        return DelayedRules(delay)
    raise ValueError(f"unknown scripted reply: {dict(spec)!r}")


# ---- recorded requests -----------------------------------------------------------------------


RECALLED_BLOCK_START = "<recalled_memory"


def text_of(content: Any) -> str:
    """Text of an OpenAI message `content`: a string, or a list of parts with `text`."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text") or "") for p in content if isinstance(p, dict))
    return ""


@dataclass(frozen=True)
class RecordedRequest:
    n: int
    t: float
    method: str
    path: str
    headers: Mapping[str, str]  # names lower-cased
    body: Mapping[str, Any]

    @property
    def messages(self) -> list[Mapping[str, Any]]:
        msgs = self.body.get("messages")
        return [m for m in msgs if isinstance(m, dict)] if isinstance(msgs, list) else []

    @property
    def roles(self) -> list[str]:
        return [str(m.get("role")) for m in self.messages]

    @property
    def system_texts(self) -> list[str]:
        return [text_of(m.get("content")) for m in self.messages if m.get("role") in ("system", "developer")]

    @property
    def system_prompt(self) -> str:
        """The leading system (or developer) message's text; "" when there is none."""
        texts = self.system_texts
        return texts[0] if texts else ""

    @property
    def user_texts(self) -> list[str]:
        return [text_of(m.get("content")) for m in self.messages if m.get("role") == "user"]

    @property
    def trailing_user_texts(self) -> list[str]:
        """User texts after the last assistant/tool message: this run's prompt, then anything
        Pi sent right after it (an extension's `before_agent_start` message arrives as a user
        message following the prompt)."""
        out: list[str] = []
        for m in reversed(self.messages):
            role = m.get("role")
            if role in ("assistant", "tool"):
                break
            if role == "user":
                out.append(text_of(m.get("content")))
        return out[::-1]

    @property
    def recalled_blocks(self) -> list[str]:
        """Every recalled-memory block the request holds (pi-memory-bridge sends each as a user
        message of its own that stays in the session), oldest first."""
        return [t for t in self.user_texts if t.startswith(RECALLED_BLOCK_START)]

    @property
    def recalled_block(self) -> str:
        """The block recalled for this run's prompt (the message right before the last user
        prompt, or right after it); "" when this run had none."""
        users = [
            (i, text_of(m.get("content"))) for i, m in enumerate(self.messages) if m.get("role") == "user"
        ]
        prompts = [i for i, t in users if not t.startswith(RECALLED_BLOCK_START)]
        if not prompts:
            return ""
        last = prompts[-1]
        for i, t in users:
            if i in (last - 1, last + 1) and t.startswith(RECALLED_BLOCK_START):
                return t
        return ""

    @property
    def tool_names(self) -> list[str]:
        tools = self.body.get("tools")
        if not isinstance(tools, list):
            return []
        return [str((t.get("function") or {}).get("name")) for t in tools if isinstance(t, dict)]

    @property
    def all_text(self) -> str:
        """Every message text and tool-call argument string, newline-joined (for `in` checks)."""
        parts: list[str] = []
        for m in self.messages:
            parts.append(text_of(m.get("content")))
            for call in m.get("tool_calls") or []:
                if isinstance(call, dict):
                    parts.append(str((call.get("function") or {}).get("arguments") or ""))
        return "\n".join(parts)

    @property
    def is_chat(self) -> bool:
        return self.method == "POST" and self.path.rstrip("/").endswith("/chat/completions")

    @property
    def consolidation_task(self) -> str | None:
        """ "extract", "reconcile" or "enrich" for pi-memory-bridge's learning prompts, else None."""
        system = self.system_prompt
        return next((task for task, tag in CONSOLIDATION_TAGS.items() if system.startswith(tag)), None)

    def to_json(self) -> JsonObject:
        return {
            "n": self.n,
            "t": self.t,
            "method": self.method,
            "path": self.path,
            "headers": dict(self.headers),
            "body": self.body,
        }


# ---- the rules -------------------------------------------------------------------------------


def _call_tool_reply(text: str) -> ToolCallsReply:
    rest = text.split("CALL_TOOL", 1)[1].lstrip()
    name, _, tail = rest.partition(" ")
    name = name.strip() or "probe_tool"
    tail = tail.strip()
    if tail.startswith("{"):
        try:
            args, _end = json.JSONDecoder().raw_decode(tail)
        except json.JSONDecodeError:
            args = None
        if isinstance(args, dict):
            return ToolCallsReply((ToolCall(name, args),))
    word = tail.split()[0] if tail else "x"
    return ToolCallsReply((ToolCall(name, {"text": word}),))


def rule_reply(req: RecordedRequest) -> TextReply | ToolCallsReply:
    msgs = req.messages
    if msgs and msgs[-1].get("role") == "tool":
        return TextReply("FINAL: tool said " + text_of(msgs[-1].get("content"))[:_ECHO_CHARS])
    trailing = req.trailing_user_texts
    for text in reversed(trailing):
        if "CALL_TOOL" in text:
            return _call_tool_reply(text)
    users = req.user_texts
    return TextReply("ECHO: " + (users[-1] if users else "")[:_ECHO_CHARS])


# ---- the server ------------------------------------------------------------------------------


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, model: FakeModel) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.model = model

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hung up mid-reply (Pi killed or aborted) is expected in these tests.
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "FakeOpenAI/2"
    # A keep-alive connection from a dead client must not pin a thread for long.
    timeout = 30
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send_json(self, status: int, obj: object) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            data = [{"id": MODEL_ID, "object": "model", "owned_by": "fake"}]
            self._send_json(200, {"object": "list", "data": data})
        else:
            self._send_json(404, {"error": {"message": "not found"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            parsed = json.loads(raw or b"{}")
        except ValueError:
            parsed = None
        body: JsonObject = (
            parsed if isinstance(parsed, dict) else {"_unparsed": raw.decode("utf-8", "replace")}
        )
        headers = {k.lower(): v for k, v in self.headers.items()}
        model = self.server.model
        req = model._record(self.command, self.path, headers, body)
        if not req.is_chat:
            self._send_json(404, {"error": {"message": "only /chat/completions is faked"}})
            return
        reply = model._next_reply(req)
        if reply.delay_s > 0 and model._stopping.wait(reply.delay_s):
            self.close_connection = True
            return
        final = rule_reply(req) if isinstance(reply, DelayedRules) else reply
        if isinstance(final, ErrorReply):
            err = {"message": final.message, "type": "server_error", "code": final.status}
            self._send_json(final.status, {"error": err})
        elif body.get("stream"):
            self._stream(req, final)
        else:
            self._complete(req, final)

    def _complete(self, req: RecordedRequest, reply: TextReply | ToolCallsReply) -> None:
        message: JsonObject = {"role": "assistant", "content": None}
        if isinstance(reply, TextReply):
            message["content"] = reply.text
            finish = reply.finish_reason
        else:
            message["tool_calls"] = [_tool_call_json(req.n, i, c) for i, c in enumerate(reply.calls)]
            finish = "tool_calls"
        self._send_json(
            200,
            {
                **_envelope(req, "chat.completion"),
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": _USAGE,
            },
        )

    def _stream(self, req: RecordedRequest, reply: TextReply | ToolCallsReply) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        envelope = _envelope(req, "chat.completion.chunk")

        def frame(obj: object) -> None:
            self.wfile.write(b"data: " + json.dumps(obj).encode() + b"\n\n")
            self.wfile.flush()

        def chunk(delta: JsonObject, finish: str | None = None) -> None:
            frame({**envelope, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

        chunk({"role": "assistant", "content": ""})
        if isinstance(reply, TextReply):
            for i in range(0, len(reply.text), _STREAM_CHUNK_CHARS):
                chunk({"content": reply.text[i : i + _STREAM_CHUNK_CHARS]})
            chunk({}, reply.finish_reason)
        else:
            for i, call in enumerate(reply.calls):
                chunk({"tool_calls": [{"index": i, **_tool_call_json(req.n, i, call)}]})
            chunk({}, "tool_calls")
        if (req.body.get("stream_options") or {}).get("include_usage"):
            frame({**envelope, "choices": [], "usage": _USAGE})
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()


def _envelope(req: RecordedRequest, obj: str) -> JsonObject:
    return {
        "id": f"chatcmpl-fake-{req.n}",
        "object": obj,
        "created": int(req.t),
        "model": str(req.body.get("model") or MODEL_ID),
    }


def _tool_call_json(n: int, i: int, call: ToolCall) -> JsonObject:
    return {
        "id": f"call_fake_{n}_{i}",
        "type": "function",
        "function": {"name": call.name, "arguments": json.dumps(dict(call.args))},
    }


class FakeModel:
    """The server plus its request log. Use as a context manager or call start()/stop()."""

    def __init__(self, *, log_path: Path | None = None) -> None:
        self.log_path = log_path
        self.responder: Responder | None = None
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._requests: list[RecordedRequest] = []
        self._replies: dict[int, Reply] = {}
        self._queue: deque[Reply] = deque()
        self._consolidation: dict[str, deque[Reply]] = {task: deque() for task in CONSOLIDATION_TAGS}
        self.consolidation_unscripted: list[RecordedRequest] = []
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # lifecycle
    def start(self) -> FakeModel:
        if self._server is not None:
            raise RuntimeError("fake model already started")
        self._server = _Server(self)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        self._stopping.set()
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeModel:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("fake model not started")
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """The OpenAI base URL (ends in /v1), as a models.json `baseUrl`."""
        return f"http://127.0.0.1:{self.port}/v1"

    # scripting
    def script(self, *replies: Reply | Mapping[str, Any]) -> None:
        """Queue replies; each chat request consumes one before the rules apply."""
        parsed = [r if isinstance(r, Reply) else reply_from_dict(r) for r in replies]
        with self._lock:
            self._queue.extend(parsed)

    def script_consolidation(self, task: str, *replies: Reply | Mapping[str, Any] | str) -> None:
        """Queue answers to consolidation prompts of `task` ("extract", "reconcile", "enrich"): a JSON-able
        dict is sent as JSON text, a str as it is, a `Reply` (delays, errors) as given."""
        if task not in self._consolidation:
            raise ValueError(f"unknown consolidation task {task!r}")
        parsed: list[Reply] = []
        for r in replies:
            if isinstance(r, Reply):
                parsed.append(r)
            elif isinstance(r, str):
                parsed.append(TextReply(r))
            else:
                parsed.append(TextReply(json.dumps(dict(r), ensure_ascii=False)))
        with self._lock:
            self._consolidation[task].extend(parsed)

    def consolidation_requests(self, task: str | None = None) -> list[RecordedRequest]:
        """Chat requests carrying a consolidation prompt (of `task`, or of either)."""
        return [
            r
            for r in self.chat_requests
            if r.consolidation_task is not None and (task is None or r.consolidation_task == task)
        ]

    def pending_replies(self) -> int:
        with self._lock:
            return len(self._queue)

    # the log
    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.is_chat]

    def reply_to(self, req: RecordedRequest) -> Reply | None:
        """The reply chosen for a recorded request (None for non-chat requests)."""
        with self._lock:
            return self._replies.get(req.n)

    def last_request(self) -> RecordedRequest:
        """The newest chat request; AssertionError when there is none."""
        chats = self.chat_requests
        if not chats:
            raise AssertionError("the fake model received no chat request")
        return chats[-1]

    def requests_containing(self, text: str) -> list[RecordedRequest]:
        return [r for r in self.chat_requests if text in r.all_text]

    def system_prompt(self, req: RecordedRequest | None = None) -> str:
        return (req or self.last_request()).system_prompt

    def user_texts(self, req: RecordedRequest | None = None) -> list[str]:
        return (req or self.last_request()).user_texts

    def wait_for_requests(self, count: int, timeout: float = 10.0) -> list[RecordedRequest]:
        """Block until at least `count` chat requests arrived; returns all of them."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while sum(1 for r in self._requests if r.is_chat) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"fake model: fewer than {count} chat requests after {timeout}s")
                self._changed.wait(left)
            return [r for r in self._requests if r.is_chat]

    def log_entries(self) -> list[JsonObject]:
        """The JSONL log as written (each chat request plus the reply chosen), for post-mortems."""
        if self.log_path is None or not self.log_path.exists():
            return []
        with self.log_path.open(encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]

    # called from handler threads
    def _record(
        self, method: str, path: str, headers: Mapping[str, str], body: JsonObject
    ) -> RecordedRequest:
        with self._changed:
            req = RecordedRequest(len(self._requests) + 1, time.time(), method, path, headers, body)
            self._requests.append(req)
            self._changed.notify_all()
            return req

    def _next_reply(self, req: RecordedRequest) -> Reply:
        task = req.consolidation_task
        if task is not None:
            with self._lock:
                queue = self._consolidation[task]
                scripted = queue.popleft() if queue else None
                if scripted is None:
                    self.consolidation_unscripted.append(req)
            return self._chosen(req, scripted or TextReply(_EMPTY_ANSWERS[task]))
        with self._lock:
            reply = self._queue.popleft() if self._queue else None
        if reply is None and self.responder is not None:
            try:
                reply = self.responder(req)
            except Exception as exc:  # surfaced through `errors`, and to Pi as an HTTP 500
                with self._lock:
                    self.errors.append(f"responder raised on request {req.n}: {exc!r}")
                reply = ErrorReply(500, f"fake model responder raised: {exc!r}")
        return self._chosen(req, reply if reply is not None else rule_reply(req))

    def _chosen(self, req: RecordedRequest, reply: Reply) -> Reply:
        with self._lock:
            self._replies[req.n] = reply
            if self.log_path is not None:
                entry = {**req.to_json(), "reply": _reply_json(reply)}
                with self.log_path.open("a", encoding="utf-8") as f:
                    f.write(json.dumps(entry, ensure_ascii=False) + "\n")
        return reply


def _reply_json(reply: Reply) -> JsonObject:
    if isinstance(reply, TextReply):
        return {"text": reply.text, "delay": reply.delay_s}
    if isinstance(reply, ToolCallsReply):
        return {
            "tool_calls": [{"tool": c.name, "args": dict(c.args)} for c in reply.calls],
            "delay": reply.delay_s,
        }
    if isinstance(reply, ErrorReply):
        return {"status": reply.status, "message": reply.message, "delay": reply.delay_s}
    return {"delay": reply.delay_s}
