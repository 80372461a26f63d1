"""The turns of a session log, as live capture would have seen them settle.

A turn starts at a user message entry and runs along the entries Pi appended after it, up to the
next user message. In a tree (`/tree` branches in one file) an entry may have several children;
the turn follows the first one in file order, which is the one that was appended while the turn
ran: a later sibling is a branch the user started afterwards, and belongs to a turn of its own.
A `custom_message` after a final answer also ends the turn: an extension started a new run that
live capture sees as a settle of its own (with no user prompt, so nothing is captured from it).

Each turn becomes the `runs` that live capture receives at `agent_settled` (a run ends after an
assistant message that failed, `error` or `aborted`, where Pi's auto-retry starts the next one),
so that the same fail-closed parser (`pi_shapes`), redaction and branch identity apply.
Entries that carry nothing to capture are see-through; an entry type this module does not know,
or a `context_edit` that rewrote one of the turn's messages, skips the turn (fail-closed); the one
edit Pi 1.x writes itself, dropping a failed response before its auto-retry, changes nothing.

A turn whose entries reach the file's last entry without a capturable answer is *open*: Pi may
still be working on it (a tool running, a retry pending), so it is neither captured nor skipped.

Entries copied into a `/fork` or `/clone` file (written before the file's header) are not turns
of that file: they were said in the parent session and are captured from its file, or not at all
when the user deleted it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pi_memory_bridge.backends.base import ConversationTurn
from pi_memory_bridge.capture.identity import BranchIdentity, EntryLink, derive_branch, user_entry_ids
from pi_memory_bridge.capture.prepare import prepare_capture
from pi_memory_bridge.catchup.reader import LogEntry, SessionLog

# Entries that never hold conversation (1.x adds usage and context_edit).
SEE_THROUGH = frozenset(
    {
        "label",
        "custom",
        "model_change",
        "thinking_level_change",
        "session_info",
        "compaction",
        "branch_summary",
        "usage",
        "context_edit",
    }
)
_FAILED = frozenset({"error", "aborted"})


@dataclass(frozen=True, slots=True)
class Segment:
    user: LogEntry
    body: tuple[LogEntry, ...]  # what follows the user message, in order
    at_end: bool  # its last entry is the file's last entry: the file has not moved on yet
    problem: str | None = None  # why the file's structure rules the turn out (fail-closed)

    @property
    def last(self) -> LogEntry:
        return self.body[-1] if self.body else self.user


@dataclass(frozen=True, slots=True)
class Captured:
    user_entry: LogEntry
    turn: ConversationTurn
    legacy_id: str
    redactions: int


@dataclass(frozen=True, slots=True)
class Skipped:
    user_entry: LogEntry
    reasons: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Open:
    user_entry: LogEntry


Outcome = Captured | Skipped | Open


def inherited(log: SessionLog, entry: LogEntry) -> bool:
    """Whether a fork or clone copied this entry from its parent session."""
    if log.parent_session is None:
        return False
    written = entry.written_at
    # a fork whose times cannot be compared captures nothing rather than a copy
    return log.created_at is None or written is None or written < log.created_at


def _ends_turn(entry: LogEntry, answered: bool) -> bool:
    return entry.is_user_message or (entry.type == "custom_message" and answered)


def _answered(entry: LogEntry) -> bool:
    return entry.type == "message" and entry.role == "assistant" and entry.stop_reason == "stop"


def segment_of(log: SessionLog, user: LogEntry, children: dict[str, list[LogEntry]]) -> Segment:
    body: list[LogEntry] = []
    seen = {user.id}
    answered = False
    node = user
    while True:
        kids = children.get(node.id)
        if not kids:
            break
        nxt = kids[0]
        if nxt.id in seen or _ends_turn(nxt, answered):
            break
        seen.add(nxt.id)
        body.append(nxt)
        answered = _answered(nxt) if nxt.type == "message" else answered
        node = nxt
    last = body[-1] if body else user
    return Segment(user, tuple(body), at_end=log.entries[-1] is last)


def _retry_edit(edit: LogEntry, target: LogEntry | None) -> bool:
    """Pi 1.x's auto-retry drops the failed response from the model's context with a
    `context_edit` (replacement null) before asking again: the turn itself is unchanged (the
    failed run's tool calls are dropped anyway), which is what live capture sees too."""
    if target is None or not edit.drops_target:
        return False
    return target.type == "message" and target.role == "assistant" and target.stop_reason in _FAILED


def _problem(segment: Segment, edited: set[str], duplicated: set[str]) -> str | None:
    ids = {segment.user.id, *(e.id for e in segment.body)}
    if ids & duplicated:
        return "entry-id-duplicated"
    if ids & edited:
        return "context-edited"
    for entry in segment.body:
        if entry.type not in SEE_THROUGH and entry.type not in ("message", "custom_message"):
            return f"entry-type-unknown:{entry.type[:40]}"
    return None


def runs_of(segment: Segment) -> list[list[object]]:
    """The turn as the `agent_end` runs live capture receives."""
    runs: list[list[object]] = [[segment.user.message]]
    for entry in segment.body:
        if entry.type == "custom_message":
            runs[-1].append({"role": "custom"})
        elif entry.type == "message":
            message = entry.message
            runs[-1].append(message)
            if (
                isinstance(message, dict)
                and message.get("role") == "assistant"
                and (message.get("stopReason") in _FAILED)
            ):
                runs.append([])
    return [run for run in runs if run]


@dataclass(frozen=True, slots=True)
class LogTurns:
    outcomes: tuple[Outcome, ...]

    @property
    def captured(self) -> tuple[Captured, ...]:
        return tuple(o for o in self.outcomes if isinstance(o, Captured))

    @property
    def open(self) -> tuple[Open, ...]:
        return tuple(o for o in self.outcomes if isinstance(o, Open))

    @property
    def skipped(self) -> tuple[Skipped, ...]:
        return tuple(o for o in self.outcomes if isinstance(o, Skipped))


def log_turns(log: SessionLog, *, from_offset: int = 0, since_ms: int | None = None) -> LogTurns:
    """The turns whose user message starts at or after `from_offset` and was said at or after
    `since_ms`, each captured, skipped (with the parser's reasons) or open."""
    if not log.entries:
        return LogTurns(())
    children: dict[str, list[LogEntry]] = {}
    counts: dict[str, int] = {}
    by_id: dict[str, LogEntry] = {}
    for entry in log.entries:
        counts[entry.id] = counts.get(entry.id, 0) + 1
        by_id.setdefault(entry.id, entry)
        if entry.parent_id is not None:
            children.setdefault(entry.parent_id, []).append(entry)
    edited = {
        target
        for entry in log.entries
        if entry.type == "context_edit"
        and (target := entry.target_id) is not None
        and not _retry_edit(entry, by_id.get(target))
    }
    duplicated = {entry_id for entry_id, n in counts.items() if n > 1}
    links = [EntryLink(e.id, e.parent_id, e.type) for e in log.entries]
    users = [e for e in log.entries if e.is_user_message]
    index = user_entry_ids((e.id, e.message_timestamp) for e in users)
    outcomes: list[Outcome] = []
    for user in users:
        ts = user.message_timestamp
        if user.start < from_offset or inherited(log, user):
            continue
        if since_ms is not None and (ts is None or ts < since_ms):
            continue
        segment = segment_of(log, user, children)
        outcomes.append(_outcome(log, segment, _problem(segment, edited, duplicated), links, index))
    return LogTurns(tuple(outcomes))


def _outcome(
    log: SessionLog,
    segment: Segment,
    problem: str | None,
    links: Sequence[EntryLink],
    index: dict[int, str],
) -> Outcome:
    if problem is not None:
        return Skipped(segment.user, (problem,))
    identity = BranchIdentity(log.session_id, derive_branch(links, segment.last.id))
    prepared = prepare_capture(runs_of(segment), aborted=None, identity=identity, user_entries=index)
    if prepared.turns:
        return Captured(segment.user, prepared.turns[0], prepared.legacy_ids[0], prepared.redactions)
    if segment.at_end:
        return Open(segment.user)
    return Skipped(segment.user, prepared.skipped_reasons or ("nothing-to-capture",))
