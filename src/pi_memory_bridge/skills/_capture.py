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
from typing import Any, Literal, Protocol

from pi_memory_bridge.backends.base import BackendError, BackendRejected, ConversationTurn
from pi_memory_bridge.backends.memorycore import MemoryCoreBackend, SdkBindings
from pi_memory_bridge.backends.memorycore._errors import call_sdk

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


class SkillCaptureApi(Protocol):
    async def conversation_add(self, session_id: str, messages: list[JsonDict]) -> JsonDict: ...


class _SdkCaptureClient(Protocol):
    async def conversation_add(
        self, *, session_id: str, user_id: str, team_id: str, agent_id: str, messages: list[JsonDict]
    ) -> JsonDict: ...


class MemoryCoreSkillCapture:
    """`conversation_add` on the backend's SDK skill client, for the backend's identity."""

    def __init__(
        self, client: _SdkCaptureClient, sdk: SdkBindings, *, team: str, agent: str, user: str
    ) -> None:
        self._client, self._sdk = client, sdk
        self._ids = {"team_id": team, "agent_id": agent, "user_id": user}

    @classmethod
    def from_backend(cls, backend: MemoryCoreBackend) -> MemoryCoreSkillCapture:
        client: Any = backend._clients.skills
        t = backend.target
        return cls(client, backend._sdk, team=t.team_id, agent=t.agent_id, user=t.user_id)

    async def conversation_add(self, session_id: str, messages: list[JsonDict]) -> JsonDict:
        return await call_sdk(
            "skill/conversation/add",
            self._sdk,
            lambda: self._client.conversation_add(session_id=session_id, messages=messages, **self._ids),
        )


@dataclass(frozen=True, slots=True)
class CaptureResult:
    turn_id: str
    outcome: Outcome
    detail: str = ""


class SkillCaptureLedger:
    """The claim files under `directory` (mode 0700) that make sends at-most-once."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def _base(self, turn_id: str) -> Path:
        return self.directory / hashlib.sha256(turn_id.encode("utf-8", "surrogatepass")).hexdigest()[:40]

    def state(self, turn_id: str) -> str | None:
        base = self._base(turn_id)
        for suffix in (".sent", ".dead", ".uncertain", ".claim"):
            if base.with_suffix(suffix).exists():
                return suffix[1:]
        return None

    def _claim(self, turn_id: str, session_id: str) -> Path | None:
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        base = self._base(turn_id)
        if self.state(turn_id) is not None:
            return None
        claim = base.with_suffix(".claim")
        try:
            fd = os.open(claim, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return None  # another process claimed it first
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump({"turn_id": turn_id, "session_id": session_id, "claimed_at": time.time()}, out)
            out.flush()
            os.fsync(out.fileno())
        return claim

    def _settle(self, claim: Path, suffix: str, detail: str) -> None:
        # The claim stays: it is what keeps a racing process from claiming the turn again.
        claim.with_suffix(suffix).write_text(json.dumps({"detail": detail[:500]}), encoding="utf-8")

    def prune(self, now: float | None = None) -> int:
        """Forget turns sent over `SENT_MEMORY_S` ago; dead and uncertain ones stay for the user."""
        cutoff = (now or time.time()) - SENT_MEMORY_S
        removed = 0
        for path in self.directory.glob("*.sent"):
            with contextlib.suppress(FileNotFoundError):
                if path.stat().st_mtime < cutoff:
                    path.with_suffix(".claim").unlink(missing_ok=True)
                    path.unlink()
                    removed += 1
        return removed

    async def send(self, api: SkillCaptureApi, turns: Sequence[ConversationTurn]) -> list[CaptureResult]:
        results: list[CaptureResult] = []
        for turn in turns:
            messages = skill_messages(turn)
            if not messages:
                results.append(CaptureResult(turn.turn_id, "skipped", "no successful tool call"))
                continue
            claim = self._claim(turn.turn_id, turn.memory_session_id)
            if claim is None:
                results.append(CaptureResult(turn.turn_id, "duplicate", self.state(turn.turn_id) or ""))
                continue
            try:
                response = await api.conversation_add(turn.memory_session_id, messages)
            except BackendRejected as exc:
                self._settle(claim, ".dead", str(exc))
                results.append(CaptureResult(turn.turn_id, "dead", str(exc)))
                continue
            except BackendError as exc:  # 408/429/5xx/timeouts: it may have been buffered
                self._settle(claim, ".uncertain", str(exc))
                results.append(CaptureResult(turn.turn_id, "uncertain", str(exc)))
                continue
            self._settle(claim, ".sent", "")
            archived = isinstance(response, dict) and response.get("status") == "archived"
            results.append(CaptureResult(turn.turn_id, "archived" if archived else "sent"))
        return results
