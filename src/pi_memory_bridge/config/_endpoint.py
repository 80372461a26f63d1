"""The endpoint rule: a full http(s) URL, TLS for anything that leaves the machine.

Messages never echo the URL itself: a URL can carry a password, and these messages end up in
status output and logs.
"""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import SplitResult, urlsplit

_LOOPBACK_NAMES = frozenset({"localhost"})
_HOST_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
_HOSTNAME = re.compile(rf"^(?=.{{1,253}}$){_HOST_LABEL}(?:\.{_HOST_LABEL})*\.?$", re.IGNORECASE)
_EXAMPLE = "https://memory.example.com"


def endpoint_problem(value: str) -> str | None:
    """Why `value` is not an acceptable MemoryCore endpoint, or None when it is."""
    if any(ch.isspace() or not ch.isprintable() for ch in value):
        return "must be a URL without spaces or control characters"
    try:
        parts = urlsplit(value)
    except ValueError:
        return f"is not a valid URL; expected something like {_EXAMPLE}"
    if not parts.scheme or not parts.netloc:
        return f"must be a full URL with scheme and host, such as {_EXAMPLE}"
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        return f'must use https (or http on a loopback address), not "{scheme}"'
    if "@" in parts.netloc:
        return (
            "must not contain a user name or password; credentials belong in a key file or an "
            "environment variable"
        )
    if "?" in value or "#" in value:
        return "must not contain a query string or fragment"
    return _host_problem(parts) or _scheme_problem(scheme, parts)


def is_loopback_host(host: str) -> bool:
    """True for `localhost` and for literal loopback addresses (127.0.0.0/8, ::1)."""
    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _host_problem(parts: SplitResult) -> str | None:
    host = parts.hostname
    if not host:
        return "has no host name"
    try:
        ipaddress.ip_address(host)
    except ValueError:
        if not host.isascii():
            return "must use an ASCII host name (write internationalised names in their xn-- form)"
        if not _HOSTNAME.match(host):
            return "has an invalid host name"
    try:
        parts.port  # noqa: B018 - urllib validates the port lazily, on access
    except ValueError:
        return "has an invalid port"
    return None


def _scheme_problem(scheme: str, parts: SplitResult) -> str | None:
    if scheme == "https" or is_loopback_host(parts.hostname or ""):
        return None
    return (
        "remote endpoints must use https: plain http is allowed only on loopback "
        "(127.0.0.0/8, localhost, [::1])"
    )
