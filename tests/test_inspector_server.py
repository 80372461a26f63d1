"""`pi-memory-bridge ui` as a real process: the address line, loopback only, the guard over real
HTTP, Ctrl-C without a traceback, stopping when idle, the missing-extra message, `/tdai-memory-ui`."""

from __future__ import annotations

import http.client
import os
import re
import signal
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from pi_memory_bridge.commands.inspector_launch import InspectorDeps, launch_detached
from pi_memory_bridge.ui.extra import UI_REQUIREMENTS
from waiting import wait_until

REPO = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-c", "import sys; from pi_memory_bridge.cli import main; sys.exit(main())"]
URL_LINE = re.compile(r"^http://127\.0\.0\.1:(\d+)/\?token=([A-Za-z0-9_-]{40,})$")


@dataclass
class Running:
    proc: subprocess.Popen[str]
    port: int
    token: str

    def request(self, method: str, path: str, headers: dict[str, str], body: str = "") -> int:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
            for name, value in headers.items():
                conn.putheader(name, value)
            conn.putheader("Content-Length", str(len(body.encode())))
            conn.endheaders(body.encode() if body else None)
            response = conn.getresponse()
            response.read()
            return response.status
        finally:
            conn.close()


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PI_")}
    env.update(PI_CODING_AGENT_DIR=str(tmp_path / "agent"), HOME=str(tmp_path))
    return env


def start(tmp_path: Path, *extra: str) -> Running:
    proc = subprocess.Popen(
        [*CLI, "ui", "--no-open", *extra],
        env=_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    first = proc.stdout.readline().strip()
    found = URL_LINE.match(first)
    assert found, f"first line is not the address: {first!r}"
    return Running(proc, int(found.group(1)), found.group(2))


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Running]:
    running = start(tmp_path)
    yield running
    if running.proc.poll() is None:
        running.proc.kill()
    running.proc.wait(timeout=10)


def _listening_addresses(port: int) -> list[str]:
    """Local addresses (hex, as /proc/net/tcp{,6} has them) of sockets listening on `port`."""
    found: list[str] = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            address, hex_port = fields[1].rsplit(":", 1)
            if int(hex_port, 16) == port and fields[3] == "0A":  # 0A = LISTEN
                found.append(address)
    return found


def test_it_listens_on_the_loopback_address_only(server: Running) -> None:
    assert _listening_addresses(server.port) == ["0100007F"]  # 127.0.0.1, nothing on 0.0.0.0 or ::


def test_the_guard_refuses_over_real_http(server: Running) -> None:
    host = f"127.0.0.1:{server.port}"
    origin = f"http://{host}"
    cookie = f"pmb_inspector_{server.port}={server.token}"
    assert server.request("GET", "/", {"Host": host}) == 401  # no token
    assert server.request("GET", f"/?token={server.token}", {"Host": host}) == 303  # the first load
    assert server.request("GET", "/", {"Host": host, "Cookie": cookie}) == 200
    assert server.request("GET", "/", {"Host": f"rebind.example:{server.port}", "Cookie": cookie}) == 421
    foreign = {"Host": host, "Cookie": cookie, "Origin": "http://evil.example"}
    assert server.request("GET", "/", foreign) == 403
    cross_site = {"Host": host, "Cookie": cookie, "Content-Type": "application/x-www-form-urlencoded"}
    body = "key=L1%3Aat-x&confirm=1"
    assert server.request("POST", "/forget", {**cross_site, "Origin": "http://evil.example"}, body) == 403
    assert server.request("POST", "/forget", {**cross_site, "Sec-Fetch-Site": "cross-site"}, body) == 403
    assert server.request("POST", "/forget", {**cross_site, "Origin": origin}, body) == 403  # no CSRF field
    assert server.request("OPTIONS", "/forget", {"Host": host, "Origin": origin, "Cookie": cookie}) == 405


def test_ctrl_c_stops_it_without_a_traceback(server: Running) -> None:
    server.proc.send_signal(signal.SIGINT)
    assert server.proc.wait(timeout=15) == 0
    assert server.proc.stderr is not None
    err = server.proc.stderr.read()
    assert "Traceback" not in err and "stopped" in err


def test_it_stops_by_itself_when_unused(tmp_path: Path) -> None:
    running = start(tmp_path, "--idle-minutes", "0.02")  # about a second
    try:
        assert running.proc.wait(timeout=30) == 0
        assert running.proc.stderr is not None
        assert "unused" in running.proc.stderr.read()
    finally:
        if running.proc.poll() is None:
            running.proc.kill()


def test_a_missing_extra_names_the_install_command(tmp_path: Path) -> None:
    hide = "import sys; sys.modules['starlette'] = None; " + CLI[2]
    run = subprocess.run(
        [sys.executable, "-c", hide, "ui", "--no-open"],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 2 and run.stdout == ""
    assert "starlette>=" in run.stderr and "-m pip install" in run.stderr


def test_the_inspector_packages_are_plain_dependencies() -> None:
    """A plain `uv tool install` / `pip install pi-memory-bridge` gives a working inspector."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert set(UI_REQUIREMENTS.values()) <= set(project["dependencies"])
    assert project["optional-dependencies"]["ui"] == []


def test_the_pi_command_starts_it_detached_and_gets_the_address(tmp_path: Path) -> None:
    started = launch_detached(InspectorDeps(agent_dir=tmp_path / "agent", cwd=tmp_path, env=_env(tmp_path)))
    try:
        parts = urlsplit(started.url)
        assert parts.hostname == "127.0.0.1" and parts.query.startswith("token=")
        assert os.getsid(started.pid) == started.pid  # its own session: Pi's exit does not take it down
        assert _listening_addresses(parts.port or 0) == ["0100007F"]
    finally:
        os.kill(started.pid, signal.SIGTERM)

        def gone() -> bool:
            try:
                os.waitpid(started.pid, os.WNOHANG)
                os.kill(started.pid, 0)
            except (ChildProcessError, ProcessLookupError):
                return True
            return False

        wait_until(gone, 15, "the inspector's exit on SIGTERM", interval=0.1)
