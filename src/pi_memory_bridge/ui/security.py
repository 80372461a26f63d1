"""The inspector's guard: every request passes here before any page or action sees it.

The page can read everything a user ever said, so a request is refused unless all of these hold:

* `Host` is this server's own loopback address and port: a DNS-rebinding page (evil.example
  resolving to 127.0.0.1) arrives with its own host name and is refused.
* `Origin`, when a browser sends one, is this server's own origin; a cross-site fetch or form post
  from any other origin (another port on 127.0.0.1 included) is refused. A `Sec-Fetch-Site` other
  than `none` or `same-origin` is refused outright, navigation included, so no other site or port
  can even link into it.
* The per-start token: as `?token=` on the first load (answered with a redirect that drops it from
  the address bar and sets an HttpOnly, SameSite=Strict cookie named after the port, since cookies
  are shared by every port of a host) or as that cookie afterwards.
* Only GET/HEAD read; only POST changes anything, and a POST must carry the same-origin `Origin`
  and the CSRF field (checked where the form is read, `require_csrf`). No CORS headers are ever
  sent, and OPTIONS is refused.

Every response carries a strict Content-Security-Policy (nothing but this origin's own style
sheet and script; no inline script, no frames, forms only to this origin) and no-store caching.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qsl, urlencode

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

LOOPBACK = "127.0.0.1"
CSRF_FIELD = "csrf"
MAX_BODY_BYTES = 2 * 1024 * 1024

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"same-origin"),  # "no-referrer" would make POSTs send `Origin: null`
    (b"cache-control", b"no-store"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
    (b"permissions-policy", b"camera=(), microphone=(), geolocation=()"),
)


@dataclass(frozen=True, slots=True)
class Guard:
    """The secrets and names of one server start."""

    port: int
    token: str

    @classmethod
    def fresh(cls, port: int) -> Guard:
        return cls(port=port, token=secrets.token_urlsafe(32))

    @property
    def cookie_name(self) -> str:
        return f"pmb_inspector_{self.port}"

    @property
    def csrf_token(self) -> str:
        # derived, so it needs no storage; knowing it does not reveal the token
        return hmac.new(self.token.encode(), b"csrf", "sha256").hexdigest()

    @property
    def allowed_hosts(self) -> frozenset[str]:
        return frozenset({f"{LOOPBACK}:{self.port}", f"localhost:{self.port}"})

    @property
    def allowed_origins(self) -> frozenset[str]:
        return frozenset(f"http://{h}" for h in self.allowed_hosts)

    @property
    def start_url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}/?{urlencode({'token': self.token})}"

    def token_ok(self, candidate: str | None) -> bool:
        return candidate is not None and hmac.compare_digest(candidate.encode(), self.token.encode())

    def csrf_ok(self, candidate: str | None) -> bool:
        return candidate is not None and hmac.compare_digest(candidate.encode(), self.csrf_token.encode())


def _headers(scope: Scope) -> dict[str, str]:
    out: dict[str, str] = {}
    for raw_name, raw_value in scope.get("headers", []):
        name = raw_name.decode("latin-1").lower()
        value = raw_value.decode("latin-1")
        # a repeated security header is suspicious: keep a value that cannot match
        out[name] = value if name not in out else "\x00repeated"
    return out


def _cookie(headers: dict[str, str], name: str) -> str | None:
    raw = headers.get("cookie")
    if not raw:
        return None
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(raw)
    except Exception:  # a malformed Cookie header is the client's problem: no token then
        return None
    morsel = jar.get(name)
    return morsel.value if morsel is not None else None


def refusal(status: int, text: str) -> tuple[int, bytes]:
    return status, f"{status} refused: {text}\n".encode()


class GuardMiddleware:
    """Pure ASGI middleware (cheap per request) enforcing the rules in the module docstring."""

    def __init__(self, app: App, guard: Guard, on_request: Callable[[], None] | None = None) -> None:
        self.app = app
        self.guard = guard
        self.on_request = on_request

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":
            await self._send_plain(send, *refusal(404, "not served here"))
            return
        if self.on_request is not None:
            self.on_request()
        verdict = self.check(scope)
        if verdict is not None:
            await self._send_plain(send, *verdict)
            return
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        if "token" in query and self.guard.token_ok(query["token"]):
            await self._send_login(send, scope, query)
            return
        await self.app(scope, receive, self._with_headers(send))

    def check(self, scope: Scope) -> tuple[int, bytes] | None:
        """None when the request may proceed, else (status, body) of the refusal."""
        headers = _headers(scope)
        if headers.get("host", "") not in self.guard.allowed_hosts:
            return refusal(421, "wrong Host header (this server answers only to its own loopback address)")
        origin = headers.get("origin")
        if origin is not None and origin not in self.guard.allowed_origins:
            return refusal(403, "cross-origin request")
        if headers.get("sec-fetch-site", "none") not in ("none", "same-origin"):
            return refusal(403, "request from another site or port")
        method = scope.get("method", "GET")
        if method not in ("GET", "HEAD", "POST"):
            return refusal(405, f"method {method} not allowed")
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        cookie = _cookie(headers, self.guard.cookie_name)
        if not (self.guard.token_ok(query.get("token")) or self.guard.token_ok(cookie)):
            return refusal(401, "missing or wrong token: open the address `pi-memory-bridge ui` printed")
        if method == "POST":
            if origin is None:
                return refusal(403, "a change needs the browser's Origin header")
            length = headers.get("content-length", "")
            if not length.isdigit() or int(length) > MAX_BODY_BYTES:
                return refusal(413, "request body missing its length or too large")
        return None

    @staticmethod
    def _with_headers(send: Send) -> Send:
        async def wrapped(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [
                    *[(k, v) for k, v in message.get("headers", []) if k.lower() not in _OURS],
                    *SECURITY_HEADERS,
                ]
            await send(message)

        return wrapped

    async def _send_login(self, send: Send, scope: Scope, query: dict[str, str]) -> None:
        rest = urlencode({k: v for k, v in query.items() if k != "token"})
        path = scope.get("path", "/") or "/"
        location = path + (f"?{rest}" if rest else "")
        cookie = f"{self.guard.cookie_name}={self.guard.token}; HttpOnly; SameSite=Strict; Path=/"
        headers = [
            (b"location", location.encode("latin-1", "replace")),
            (b"set-cookie", cookie.encode()),
            (b"content-length", b"0"),
            *SECURITY_HEADERS,
        ]
        await send({"type": "http.response.start", "status": 303, "headers": headers})
        await send({"type": "http.response.body", "body": b""})

    @staticmethod
    async def _send_plain(send: Send, status: int, body: bytes) -> None:
        headers = [
            (b"content-type", b"text/plain; charset=utf-8"),
            (b"content-length", str(len(body)).encode()),
            *SECURITY_HEADERS,
        ]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


_OURS = frozenset(name for name, _ in SECURITY_HEADERS)
