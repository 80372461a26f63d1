"""A client for `pi --mode rpc`: strict LF framing, a reader thread, dialogs answered as they come.

The reader thread never stops reading stdout: a command handler's dialogs arrive *before* the
`prompt` response, so a client that waited for the response first would deadlock.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Final

from .fake_model import text_of
from .ui import (
    DIALOG_METHODS,
    Answer,
    Cancelled,
    DialogPolicy,
    DialogRecord,
    DialogRequest,
    ScriptedDialogs,
    UiLog,
    answer_payload,
)

Record = dict[str, Any]
RecordPredicate = Callable[[Record], bool]

_STDERR_TAIL: Final = 2000


class PiExited(RuntimeError):
    """Pi's stdout closed while the client was still waiting for something."""


class RpcCommandFailed(RuntimeError):
    def __init__(self, response: Record) -> None:
        super().__init__(f"{response.get('command')} failed: {response.get('error')!r}")
        self.response = response


def assistant_texts(records: Sequence[Mapping[str, Any]]) -> list[str]:
    """Texts of the assistant `message_end` records, in order."""
    out: list[str] = []
    for rec in records:
        msg = rec.get("message")
        if rec.get("type") == "message_end" and isinstance(msg, dict) and msg.get("role") == "assistant":
            out.append(text_of(msg.get("content")))
    return out


@dataclass(frozen=True)
class PromptResult:
    response: Record
    records: tuple[Record, ...]  # everything read from just before the prompt to its end
    ran: bool  # a run started and was waited for until `agent_settled`

    @property
    def disposition(self) -> str | None:
        """1.x only: "started" | "queued" | "handled"; None on 0.84."""
        data = self.response.get("data")
        return str(data.get("disposition")) if isinstance(data, dict) and "disposition" in data else None

    def of_type(self, record_type: str) -> list[Record]:
        return [r for r in self.records if r.get("type") == record_type]

    @property
    def assistant_texts(self) -> list[str]:
        return assistant_texts(self.records)

    @property
    def final_text(self) -> str:
        texts = [t for t in self.assistant_texts if t]
        return texts[-1] if texts else ""

    @property
    def agent_end_messages(self) -> list[Record]:
        ends = self.of_type("agent_end")
        return list(ends[-1].get("messages") or []) if ends else []


class PiRpcSession:
    """One `pi --mode rpc` process. Create it through `PiEnv.start_rpc`."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: Path,
        pi_version: str,
        transcript: Path,
        dialogs: DialogPolicy | None = None,
    ) -> None:
        self.argv = tuple(argv)
        self.pi_version = pi_version
        self.transcript_path = transcript
        self.stderr_path = transcript.with_suffix(".stderr.log")
        self.dialogs: DialogPolicy = dialogs if dialogs is not None else ScriptedDialogs()
        self.ui = UiLog()
        self.reader_errors: list[str] = []
        self._cond = threading.Condition()
        self._records: list[Record] = []
        self._eof = False
        self._write_lock = threading.Lock()
        self._transcript_lock = threading.Lock()
        self._ids = itertools.count(1)
        self._t0 = time.monotonic()
        self._stderr = bytearray()
        self._transcript: IO[str] = transcript.open("w", encoding="utf-8")
        self.proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(env),
            cwd=cwd,
        )
        self._threads = [
            threading.Thread(target=self._read_stdout, name=f"pi-rpc-out-{self.pid}", daemon=True),
            threading.Thread(target=self._read_stderr, name=f"pi-rpc-err-{self.pid}", daemon=True),
        ]
        for t in self._threads:
            t.start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def scripted(self) -> ScriptedDialogs:
        """The default dialog policy, for `session.scripted.confirm(True).select("beta")`."""
        if not isinstance(self.dialogs, ScriptedDialogs):
            raise TypeError("this session was started with a custom dialog policy")
        return self.dialogs

    @property
    def records(self) -> list[Record]:
        with self._cond:
            return list(self._records)

    def mark(self) -> int:
        """The current record count; pass it as `since=` to only look at later records."""
        with self._cond:
            return len(self._records)

    @property
    def stderr(self) -> str:
        return bytes(self._stderr).decode("utf-8", "replace")

    # ---- reading ---------------------------------------------------------------------------

    def _log(self, direction: str, rec: object) -> None:
        line = json.dumps({"dir": direction, "t": round(time.monotonic() - self._t0, 4), "rec": rec})
        with self._transcript_lock, contextlib.suppress(ValueError):  # closed at the very end
            self._transcript.write(line + "\n")
            self._transcript.flush()

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        buf = b""
        try:
            while chunk := os.read(fd, 65536):
                buf += chunk
                # LF only: U+2028/U+2029 are legal inside JSON strings and must not split records.
                *lines, buf = buf.split(b"\n")
                for line in lines:
                    self._handle_line(line.removesuffix(b"\r"))
        finally:
            if buf.strip():
                self._handle_line(buf)
            with self._cond:
                self._eof = True
                self._cond.notify_all()
            self._log("eof", None)

    def _handle_line(self, line: bytes) -> None:
        if not line.strip():
            return
        try:
            parsed = json.loads(line)
        except ValueError:
            parsed = None
        rec: Record = (
            parsed
            if isinstance(parsed, dict)
            else {"type": "_unparsed", "raw": line.decode("utf-8", "replace")}
        )
        self._log("in", rec)
        if rec.get("type") == "extension_ui_request":
            try:
                self._handle_ui(rec)
            except Exception as exc:  # the reader must survive anything; surfaced in close()
                self.reader_errors.append(f"ui request {rec!r}: {exc!r}")
        with self._cond:
            self._records.append(rec)
            self._cond.notify_all()

    def _handle_ui(self, rec: Record) -> None:
        method = str(rec.get("method"))
        if method not in DIALOG_METHODS:
            self.ui.add_fire_and_forget(rec)
            return
        request = DialogRequest(str(rec.get("id")), method, str(rec.get("title") or ""), rec)
        error: str | None = None
        answer: Answer | None
        try:
            answer = self.dialogs(request)
        except Exception as exc:
            error = repr(exc)
            self.reader_errors.append(f"dialog policy raised on {method}: {error}")
            answer = Cancelled()
        self.ui.add_dialog(DialogRecord(request, answer, error))
        if answer is not None:
            self._write({"type": "extension_ui_response", "id": request.id, **answer_payload(answer)})

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        fd = self.proc.stderr.fileno()
        with self.stderr_path.open("wb") as sink:
            while chunk := os.read(fd, 65536):
                self._stderr.extend(chunk)
                sink.write(chunk)
                sink.flush()

    # ---- writing ---------------------------------------------------------------------------

    def _write(self, cmd: Mapping[str, Any]) -> None:
        data = (json.dumps(cmd) + "\n").encode()
        self._log("out", cmd)
        assert self.proc.stdin is not None
        with self._write_lock:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()

    def send(self, cmd: Mapping[str, Any]) -> str:
        """Write a command (an `id` is added when missing) and return its id."""
        full = dict(cmd)
        full.setdefault("id", f"h-{next(self._ids)}")
        self._write(full)
        return str(full["id"])

    # ---- waiting ---------------------------------------------------------------------------

    def wait_for(self, pred: RecordPredicate, timeout: float = 30.0, *, since: int = 0) -> Record:
        """The first record at index >= `since` matching `pred`, waiting for it if needed.

        Raises TimeoutError, or PiExited when stdout closes first."""
        deadline = time.monotonic() + timeout
        index = since
        with self._cond:
            while True:
                while index < len(self._records):
                    rec = self._records[index]
                    index += 1
                    if pred(rec):
                        return rec
                if self._eof:
                    raise PiExited(self._explain(f"Pi exited (rc={self.proc.poll()}) before the record came"))
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(self._explain(f"no matching record within {timeout}s"))
                self._cond.wait(left)

    def wait_for_type(self, record_type: str, timeout: float = 30.0, *, since: int = 0) -> Record:
        return self.wait_for(lambda r: r.get("type") == record_type, timeout, since=since)

    def wait_until(self, cond: Callable[[], bool], timeout: float = 10.0, *, interval: float = 0.02) -> None:
        """Poll `cond` (e.g. on `self.ui`) until true; TimeoutError otherwise."""
        deadline = time.monotonic() + timeout
        while not cond():
            if time.monotonic() >= deadline:
                raise TimeoutError(self._explain(f"condition not met within {timeout}s"))
            time.sleep(interval)

    def wait_for_status(self, key: str, timeout: float = 10.0) -> str | None:
        """Wait until the footer status `key` has been set at least once; return its value."""
        self.wait_until(lambda: key in self.ui.statuses, timeout)
        return self.ui.status(key)

    def _explain(self, what: str) -> str:
        tail = self.stderr[-_STDERR_TAIL:]
        return f"{what}; transcript {self.transcript_path}; stderr tail:\n{tail}"

    # ---- commands --------------------------------------------------------------------------

    def request(self, cmd: Mapping[str, Any], timeout: float = 30.0) -> Record:
        """Send a command and return its `response` record (success or not)."""
        since = self.mark()
        rid = self.send(cmd)
        return self.wait_for(
            lambda r: r.get("type") == "response" and r.get("id") == rid, timeout, since=since
        )

    def request_ok(self, cmd: Mapping[str, Any], timeout: float = 30.0) -> Record:
        """Like `request`, but RpcCommandFailed unless `success` is true; returns the response."""
        resp = self.request(cmd, timeout)
        if not resp.get("success"):
            raise RpcCommandFailed(resp)
        return resp

    def get_state(self, timeout: float = 30.0) -> Record:
        data = self.request_ok({"type": "get_state"}, timeout).get("data")
        return dict(data) if isinstance(data, dict) else {}

    def get_commands(self, timeout: float = 30.0) -> list[Record]:
        data = self.request_ok({"type": "get_commands"}, timeout).get("data") or {}
        return [c for c in data.get("commands") or [] if isinstance(c, dict)]

    def _is_extension_command(self, message: str) -> bool:
        if not message.startswith("/"):
            return False
        name = message[1:].split(None, 1)[0] if message[1:].strip() else ""
        return any(c.get("name") == name and c.get("source") == "extension" for c in self.get_commands())

    def prompt_and_settle(
        self, message: str, *, timeout: float = 60.0, expect_run: bool | None = None
    ) -> PromptResult:
        """Send a prompt and wait for its end: `agent_settled` if a run started, else the response.

        Whether a run starts: `expect_run` if given; else 1.x's `data.disposition`; else (0.84,
        no disposition) every message starts a run except an extension `/command`."""
        if expect_run is None and not _has_disposition(self.pi_version):
            expect_run = not self._is_extension_command(message)
        since = self.mark()
        resp = self.request({"type": "prompt", "message": message}, timeout)
        disposition = PromptResult(resp, (), False).disposition
        run = bool(resp.get("success")) and (
            expect_run if expect_run is not None else disposition in ("started", "queued")
        )
        if run:
            self.wait_for_type("agent_settled", timeout, since=since)
        with self._cond:
            records = tuple(self._records[since:])
        return PromptResult(resp, records, run)

    # ---- ending ----------------------------------------------------------------------------

    def close(self, timeout: float = 20.0) -> int:
        """Close stdin (Pi shuts down cleanly on EOF) and wait; SIGTERM/SIGKILL on overrun.

        Raises AssertionError if the reader thread hit an error (e.g. a dialog policy raised)."""
        if self.proc.stdin is not None:
            with self._write_lock, contextlib.suppress(OSError, ValueError):
                self.proc.stdin.close()
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.terminate()
            try:
                rc = self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                rc = self.proc.wait()
        self._finish()
        if self.reader_errors:
            raise AssertionError("RPC reader errors: " + "; ".join(self.reader_errors))
        return rc

    def kill9(self) -> int:
        """SIGKILL Pi (no `session_shutdown` runs) and reap it; returns the exit code (-9)."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, signal.SIGKILL)
        rc = self.proc.wait(timeout=10)
        self._finish()
        return rc

    def _finish(self) -> None:
        for t in self._threads:
            t.join(timeout=5)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                with contextlib.suppress(OSError, ValueError):
                    stream.close()
        with self._transcript_lock:
            self._transcript.close()

    @property
    def returncode(self) -> int | None:
        return self.proc.poll()


def _has_disposition(pi_version: str) -> bool:
    """RPC `prompt` responses carry `data.disposition` since 0.99.0."""
    major, minor = (int(p) for p in pi_version.split(".")[:2])
    return (major, minor) >= (0, 99)
