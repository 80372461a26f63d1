"""Helpers for the catch-up tests: Pi session files written the way Pi writes them."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / "data" / "pi_sessions"
PI_VERSIONS = ("0.84.4", "1.6.0")
T0_MS = 1_700_000_000_000  # in the past: files written now are newer

Json = dict[str, Any]


def iso(ms: int) -> str:
    moment = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=ms)
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{ms % 1000:03d}Z"


def user(text: str, ts: int) -> Json:
    return {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": ts}


def assistant(text: str, ts: int, stop: str = "stop", calls: Sequence[Json] = ()) -> Json:
    content: list[Json] = [{"type": "text", "text": text}] if text else []
    content += [{"type": "toolCall", "id": c["id"], "name": c["name"], "arguments": c["args"]} for c in calls]
    return {"role": "assistant", "content": content, "stopReason": stop, "timestamp": ts}


def tool_result(call_id: str, name: str, text: str, ts: int, is_error: bool = False) -> Json:
    return {
        "role": "toolResult",
        "toolCallId": call_id,
        "toolName": name,
        "content": [{"type": "text", "text": text}],
        "isError": is_error,
        "timestamp": ts,
    }


@dataclass
class SessionWriter:
    """A session file built entry by entry, each appended at the current leaf (as Pi does)."""

    path: Path
    session_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    created_ms: int = T0_MS
    parent_session: str | None = None
    leaf: str | None = None
    clock: int = T0_MS
    _n: int = 0
    ids: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        header: Json = {
            "type": "session",
            "version": 3,
            "id": self.session_id,
            "timestamp": iso(self.created_ms),
            "cwd": "/work",
        }
        if self.parent_session is not None:
            header["parentSession"] = self.parent_session
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(header) + "\n", encoding="utf-8")

    def tick(self) -> int:
        self.clock += 10
        return self.clock

    def append(
        self, entry_type: str, *, parent: str | bool | None = True, at_ms: int | None = None, **body: Any
    ) -> str:
        self._n += 1
        entry_id = f"{self._n:08x}"
        parent_id = self.leaf if parent is True else (None if parent is False else parent)
        entry = {
            "type": entry_type,
            "id": entry_id,
            "parentId": parent_id,
            "timestamp": iso(at_ms if at_ms is not None else self.tick()),
            **body,
        }
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")
        self.leaf = entry_id
        self.ids.append(entry_id)
        return entry_id

    def message(self, message: Json, **kw: Any) -> str:
        return self.append("message", message=message, **kw)

    def turn(self, text: str, answer: str | None = None) -> str:
        """A user prompt and its final answer; returns the user entry id."""
        entry = self.message(user(text, self.tick()))
        self.message(assistant(answer if answer is not None else f"ECHO: {text}", self.tick()))
        return entry

    def start(self) -> None:
        self.append("model_change", provider="fake", modelId="fake-model")
        self.append("thinking_level_change", thinkingLevel="off")


def copy_fixture(name: str, dest: Path) -> Path:
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes((DATA / name).read_bytes())
    return dest


def lines_of(path: Path) -> list[Json]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def write_lines(path: Path, objects: Iterable[Json]) -> None:
    path.write_text("".join(json.dumps(o) + "\n" for o in objects), encoding="utf-8")
