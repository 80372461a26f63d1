"""Pi's RPC extension-UI protocol, seen from the client: answering dialogs, recording the rest.

Dialog requests (`select`, `confirm`, `input`, `editor`) block Pi until the client writes an
`extension_ui_response` with the same id. Everything else (`notify`, `setStatus`, `setWidget`,
`setTitle`, `set_editor_text`, ...) is fire-and-forget.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

Record = dict[str, Any]

DIALOG_METHODS: Final = frozenset({"select", "confirm", "input", "editor"})


@dataclass(frozen=True)
class Confirmed:
    """Answer to `confirm`."""

    value: bool


@dataclass(frozen=True)
class Value:
    """Answer to `select`, `input` or `editor`."""

    value: str


@dataclass(frozen=True)
class Cancelled:
    """Dismiss any dialog: `confirm` resolves false, the others undefined."""


Answer = Confirmed | Value | Cancelled


def answer_payload(answer: Answer) -> Record:
    if isinstance(answer, Confirmed):
        return {"confirmed": answer.value}
    if isinstance(answer, Value):
        return {"value": answer.value}
    return {"cancelled": True}


@dataclass(frozen=True)
class DialogRequest:
    id: str
    method: str
    title: str
    raw: Mapping[str, Any]

    @property
    def options(self) -> list[str]:
        opts = self.raw.get("options")
        return [str(o) for o in opts] if isinstance(opts, list) else []

    @property
    def message(self) -> str:
        return str(self.raw.get("message") or "")


# Returns the answer, or None to leave the dialog pending (Pi then waits for its own timeout).
DialogPolicy = Callable[[DialogRequest], Answer | None]


class ScriptedDialogs:
    """A FIFO of answers per dialog method; the default `DialogPolicy` of an RPC session.

    A dialog with nothing scripted is cancelled (so Pi never hangs) and counted in `unscripted`,
    which a test can assert empty.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queues: dict[str, deque[Answer]] = {m: deque() for m in DIALOG_METHODS}
        self.unscripted: list[DialogRequest] = []

    def push(self, method: str, *answers: Answer) -> ScriptedDialogs:
        if method not in DIALOG_METHODS:
            raise ValueError(f"not a dialog method: {method!r}")
        for answer in answers:
            if method == "confirm" and isinstance(answer, Value):
                raise TypeError("confirm takes Confirmed or Cancelled")
            if method != "confirm" and isinstance(answer, Confirmed):
                raise TypeError(f"{method} takes Value or Cancelled")
        with self._lock:
            self._queues[method].extend(answers)
        return self

    def confirm(self, *answers: bool) -> ScriptedDialogs:
        return self.push("confirm", *(Confirmed(a) for a in answers))

    def select(self, *values: str) -> ScriptedDialogs:
        return self.push("select", *(Value(v) for v in values))

    def input(self, *values: str) -> ScriptedDialogs:
        return self.push("input", *(Value(v) for v in values))

    def editor(self, *values: str) -> ScriptedDialogs:
        return self.push("editor", *(Value(v) for v in values))

    def cancel(self, method: str, times: int = 1) -> ScriptedDialogs:
        return self.push(method, *([Cancelled()] * times))

    def pending(self) -> dict[str, int]:
        with self._lock:
            return {m: len(q) for m, q in self._queues.items() if q}

    def __call__(self, request: DialogRequest) -> Answer | None:
        with self._lock:
            queue = self._queues.get(request.method)
            if queue:
                return queue.popleft()
            self.unscripted.append(request)
        return Cancelled()


@dataclass(frozen=True)
class DialogRecord:
    request: DialogRequest
    answer: Answer | None  # None: left unanswered
    error: str | None = None  # the policy raised; the dialog was cancelled


@dataclass(frozen=True)
class Notification:
    message: str
    kind: str  # Pi's notifyType: "info" | "warning" | "error"


class UiLog:
    """What Pi's extensions showed over RPC. Thread-safe; accessors return copies."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._dialogs: list[DialogRecord] = []
        self._notifications: list[Notification] = []
        self._statuses: dict[str, str | None] = {}
        self._status_history: list[tuple[str, str | None]] = []
        self._other: list[Record] = []

    def add_dialog(self, record: DialogRecord) -> None:
        with self._lock:
            self._dialogs.append(record)

    def add_fire_and_forget(self, rec: Mapping[str, Any]) -> None:
        method = rec.get("method")
        with self._lock:
            if method == "notify":
                kind = str(rec.get("notifyType") or "info")
                self._notifications.append(Notification(str(rec.get("message") or ""), kind))
            elif method == "setStatus":
                key = str(rec.get("statusKey"))
                text = rec.get("statusText")
                value = None if text is None else str(text)
                self._statuses[key] = value
                self._status_history.append((key, value))
            else:
                self._other.append(dict(rec))

    @property
    def dialogs(self) -> list[DialogRecord]:
        with self._lock:
            return list(self._dialogs)

    @property
    def notifications(self) -> list[Notification]:
        with self._lock:
            return list(self._notifications)

    @property
    def statuses(self) -> dict[str, str | None]:
        """The footer status per key as it stands now (None once cleared)."""
        with self._lock:
            return dict(self._statuses)

    def status(self, key: str) -> str | None:
        with self._lock:
            return self._statuses.get(key)

    @property
    def status_history(self) -> list[tuple[str, str | None]]:
        with self._lock:
            return list(self._status_history)

    @property
    def other(self) -> list[Record]:
        """Other fire-and-forget requests (setWidget, setTitle, set_editor_text, ...)."""
        with self._lock:
            return list(self._other)
