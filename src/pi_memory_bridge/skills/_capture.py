"""Skill capture: send tool-heavy turns to MemoryCore's skill buffer, at most once each.

The server's skill buffer and its tool-call counter add up across requests, so a resent batch is
counted twice and archives (and mines) early. Delivery is therefore at-most-once per turn: a
claim file named after the deterministic turn id is created exclusively and fsynced *before*
the request and kept (so a racing or later process cannot claim the turn again). The outcome is
recorded beside it: `.sent` (forgotten after `SENT_MEMORY_S`), `.dead` (the server refused it) or
`.uncertain` (a timeout, 429 or 5xx: the server may have buffered it). Nothing is retried
automatically; a claim left by a crash counts as uncertain.

Only turns with at least one successful tool call are sent: plain chat teaches no technique and
would only fill the buffer's byte budget.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pi_memory_bridge.backends.base import BackendError, BackendRejected, ConversationTurn
from pi_memory_bridge.backends.skills import SkillCaptureApi
from pi_memory_bridge.private_files import private_opener

JsonDict = dict[str, Any]
MAX_MESSAGES = 500  # the server's per-request limit
MAX_TOOL_NAME_CHARS = 128
SENT_MEMORY_S = 30 * 24 * 3600  # how long a sent turn is remembered against redelivery
Outcome = Literal["sent", "archived", "skipped", "duplicate", "dead", "uncertain"]


def skill_messages(turn: ConversationTurn) -> list[JsonDict]:
    """The five-role messages for one turn (already redacted by capture); [] if it used no tool."""
    tools = [t for t in turn.tools if not t.is_error]
    if not tools:
        return []
    messages: list[JsonDict] = []
    if turn.user_text.strip():
        messages.append({"role": "user", "content": turn.user_text})
    for tool in tools:
        common = {"tool_call_id": tool.tool_call_id, "tool_name": tool.tool_name[:MAX_TOOL_NAME_CHARS]}
        messages.append({"role": "tool_call", "content": tool.arguments, **common})
        messages.append({"role": "tool_result", "content": tool.result, **common})
    if turn.assistant_text.strip():
        messages.append({"role": "assistant", "content": turn.assistant_text})
    if len(messages) > MAX_MESSAGES:  # keep the prompt and the answer, drop the last tool pairs
        head = messages[:1] if messages[0]["role"] == "user" else []
        tail = messages[-1:] if messages[-1]["role"] == "assistant" else []
        room = (MAX_MESSAGES - len(head) - len(tail)) // 2 * 2
        messages = [*head, *messages[len(head) : len(messages) - len(tail)][:room], *tail]
    return messages


@dataclass(frozen=True, slots=True)
class CaptureResult:
    turn_id: str
    outcome: Outcome
    detail: str = ""


class SkillCaptureLedger:
    """Files under `directory` (mode 0700) that make skill capture at-most-once and crash-safe.

    Per turn, in order: `.pending` (the messages, fsynced when the turn settles), `.claim`
    (O_EXCL: one process owns the send), `.sending` (fsynced just before the request), then the
    outcome `.sent`, `.dead` or `.uncertain`. After a crash, `recover()` tells the cases apart: a
    claim whose owner is gone and that never reached `.sending` was never sent, so it is released
    and sent again; one that reached `.sending` may have been buffered by the server, which
    accumulates, so it is marked uncertain and never resent automatically.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def _base(self, turn_id: str) -> Path:
        return self.directory / hashlib.sha256(turn_id.encode("utf-8", "surrogatepass")).hexdigest()[:40]

    def state(self, turn_id: str) -> str | None:
        base = self._base(turn_id)
        for suffix in (".sent", ".dead", ".uncertain", ".sending", ".claim", ".pending"):
            if base.with_suffix(suffix).exists():
                return suffix[1:]
        return None

    def record(self, turns: Sequence[ConversationTurn]) -> int:
        """Durably note the turns to send (before anything is sent); returns how many are new."""
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        added = 0
        for turn in turns:
            messages = skill_messages(turn)
            if not messages or self.state(turn.turn_id) is not None:
                continue
            body = {"turn_id": turn.turn_id, "session_id": turn.memory_session_id, "messages": messages}
            _write_durably(self._base(turn.turn_id).with_suffix(".pending"), json.dumps(body))
            added += 1
        return added

    def recover(self) -> list[str]:
        """Resolve claims left by a crashed process; returns the turn ids released for resending."""
        released: list[str] = []
        if not self.directory.is_dir():
            return released
        for claim in self.directory.glob("*.claim"):
            if any(claim.with_suffix(x).exists() for x in (".sent", ".dead", ".uncertain")):
                continue
            try:
                owner = json.loads(claim.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if _alive(owner.get("pid")):
                continue
            if claim.with_suffix(".sending").exists():
                self._settle(claim, ".uncertain", "the sending process stopped mid-request")
            else:
                claim.unlink(missing_ok=True)  # never sent: the pending record goes out again
                released.append(str(owner.get("turn_id", "")))
        return released

    def _claim(self, turn_id: str, session_id: str) -> Path | None:
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        claim = self._base(turn_id).with_suffix(".claim")
        try:
            fd = os.open(claim, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return None  # another process claimed it first
        owner = {"turn_id": turn_id, "session_id": session_id, "claimed_at": time.time(), "pid": os.getpid()}
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(owner, out)
            out.flush()
            os.fsync(out.fileno())
        if any(claim.with_suffix(x).exists() for x in (".sent", ".dead", ".uncertain", ".sending")):
            return None  # settled earlier (the claim is what remains of it): never again
        return claim

    def _settle(self, claim: Path, suffix: str, detail: str) -> None:
        # The claim stays: it is what keeps a racing process from claiming the turn again.
        with open(claim.with_suffix(suffix), "w", encoding="utf-8", opener=private_opener) as out:
            out.write(json.dumps({"detail": detail[:500]}))

    def prune(self, now: float | None = None) -> int:
        """Forget turns sent over `SENT_MEMORY_S` ago; dead and uncertain ones stay for the user."""
        cutoff = (now or time.time()) - SENT_MEMORY_S
        removed = 0
        for path in self.directory.glob("*.sent"):
            with contextlib.suppress(FileNotFoundError):
                if path.stat().st_mtime < cutoff:
                    for suffix in (".pending", ".claim", ".sending"):
                        path.with_suffix(suffix).unlink(missing_ok=True)
                    path.unlink()
                    removed += 1
        return removed

    async def send(self, api: SkillCaptureApi, turns: Sequence[ConversationTurn]) -> list[CaptureResult]:
        """Record the turns, then send them (the two steps the sidecar runs apart)."""
        results: list[CaptureResult] = []
        for turn in turns:
            if not skill_messages(turn):
                results.append(CaptureResult(turn.turn_id, "skipped", "no successful tool call"))
                continue
            known = self.state(turn.turn_id)
            if known not in (None, "pending"):
                results.append(CaptureResult(turn.turn_id, "duplicate", known or ""))
                continue
            self.record([turn])
            results.append(await self._send_one(api, self._base(turn.turn_id).with_suffix(".pending")))
        return results

    async def send_pending(self, api: SkillCaptureApi) -> list[CaptureResult]:
        """Send every recorded turn nobody has claimed yet (at start-up, after `recover`)."""
        if not self.directory.is_dir():
            return []
        return [await self._send_one(api, pending) for pending in sorted(self.directory.glob("*.pending"))]

    async def _send_one(self, api: SkillCaptureApi, pending: Path) -> CaptureResult:
        try:
            turn_id, session_id, messages = _load_pending(pending)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            return CaptureResult(pending.stem, "dead", f"unreadable pending record: {exc}")
        claim = self._claim(turn_id, session_id)
        if claim is None:
            return CaptureResult(turn_id, "duplicate", self.state(turn_id) or "")
        _write_durably(claim.with_suffix(".sending"), "")
        try:
            response = await api.conversation_add(session_id, messages)
        except BackendRejected as exc:
            self._settle(claim, ".dead", str(exc))
            return CaptureResult(turn_id, "dead", str(exc))
        except BackendError as exc:  # 408/429/5xx/timeouts: it may have been buffered
            self._settle(claim, ".uncertain", str(exc))
            return CaptureResult(turn_id, "uncertain", str(exc))
        self._settle(claim, ".sent", "")
        archived = isinstance(response, dict) and response.get("status") == "archived"
        return CaptureResult(turn_id, "archived" if archived else "sent")


def _load_pending(pending: Path) -> tuple[str, str, list[JsonDict]]:
    body = json.loads(pending.read_text(encoding="utf-8"))
    return str(body["turn_id"]), str(body["session_id"]), list(body["messages"])


def _write_durably(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8", opener=private_opener) as out:
        out.write(text)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def _alive(pid: object) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False  # an old claim without an owner: treat as gone
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
