"""Interactive Pi in its real TUI, driven through tmux: what a user sees on screen and in scrollback.

Each session gets its own tmux server (`-L <socket>`), so nothing touches the user's tmux; `close`
kills that server, and with it Pi (the env's marker sweep catches the rest).
"""

from __future__ import annotations

import contextlib
import shlex
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

TMUX = shutil.which("tmux")


class TmuxPi:
    """One `pi` under a detached tmux session of a fixed size."""

    def __init__(self, argv: Sequence[str], *, env: Mapping[str, str], cwd: Path, width: int = 160) -> None:
        if TMUX is None:
            raise RuntimeError("tmux is not installed (scripts/setup.sh installs it)")
        self.socket = f"pmb-{uuid.uuid4().hex[:12]}"
        # tmux hands its server's environment to the pane only partly: pass Pi's through `env`
        command = "exec env -i " + " ".join(shlex.quote(f"{k}={v}") for k, v in env.items())
        command += " " + " ".join(shlex.quote(a) for a in argv)
        self._tmux("new-session", "-d", "-x", str(width), "-y", "50", "-s", "pi", "-c", str(cwd), command)
        self._tmux("set-option", "-t", "pi", "history-limit", "20000")

    def _tmux(self, *args: str) -> str:
        assert TMUX is not None
        proc = subprocess.run(
            [TMUX, "-L", self.socket, *args], capture_output=True, text=True, timeout=30, check=False
        )
        if proc.returncode != 0:
            raise RuntimeError(f"tmux {args[0]} failed: {proc.stderr.strip()}")
        return proc.stdout

    def screen(self) -> str:
        """The visible pane."""
        return self._tmux("capture-pane", "-p", "-t", "pi")

    def scrollback(self) -> str:
        """The pane and all of its history."""
        return self._tmux("capture-pane", "-p", "-J", "-S", "-", "-t", "pi")

    def type(self, text: str) -> None:
        """Type `text` (literally) and press Enter."""
        self._tmux("send-keys", "-t", "pi", "-l", text)
        time.sleep(0.2)  # the editor takes the text before the Enter that submits it
        self._tmux("send-keys", "-t", "pi", "Enter")

    def key(self, name: str) -> None:
        """Press one key, in tmux's names (`C-o`, `Escape`)."""
        self._tmux("send-keys", "-t", "pi", name)

    def wait_for(self, seen: Callable[[str], bool], *, timeout: float = 30.0, scrollback: bool = True) -> str:
        deadline = time.monotonic() + timeout
        text = ""
        while time.monotonic() < deadline:
            text = self.scrollback() if scrollback else self.screen()
            if seen(text):
                return text
            time.sleep(0.25)
        raise AssertionError(f"not seen within {timeout} s; the pane:\n{text}")

    def close(self) -> None:
        with contextlib.suppress(RuntimeError):  # already gone
            self._tmux("kill-server")
