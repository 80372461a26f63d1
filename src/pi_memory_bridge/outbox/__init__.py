"""The durable, multi-process capture outbox and its delivery worker.

    outbox = Outbox.open(data_dir)                    # <agent-dir>/memory-bridge/outbox.sqlite3
    worker = DeliveryWorker(outbox, backend, on_change=...)  # uses outbox.claims
    outbox.admin.counts()                             # operator side: list, requeue, purge, remove
    sink = OutboxSink(outbox, on_enqueued=worker.wake) # the CaptureSink for turn/settled
    worker.start()
    ...
    await worker.stop(drain_s=1.0); outbox.close()

Guarantees: an enqueue is fsynced before it returns and survives SIGKILL; delivery is
at-least-once with duplicates prevented by checking the backend after any ambiguous failure;
FIFO per memory session across processes; exclusive leased claims that are reclaimed when they
expire or their process is gone; transient errors retry forever on a timer; permanent rejections
dead-letter after a bounded number of tries; invalid rows are quarantined once.
"""

from pi_memory_bridge.outbox._admin import OutboxAdmin
from pi_memory_bridge.outbox._backoff import DEFAULT_PAUSE, DEFAULT_RETRY, BackoffPolicy
from pi_memory_bridge.outbox._claims import DeliveryClaims
from pi_memory_bridge.outbox._errors import (
    OutboxConfigError,
    OutboxCorrupt,
    OutboxError,
    OutboxInvalidTurn,
    OutboxUnavailable,
)
from pi_memory_bridge.outbox._records import (
    ALL,
    AllRecords,
    Claim,
    ClaimedTurn,
    OutboxCounts,
    OutboxEntry,
    RecordState,
)
from pi_memory_bridge.outbox._sink import OutboxSink
from pi_memory_bridge.outbox._store import DB_FILENAME, DEFAULT_LEASE_S, Outbox
from pi_memory_bridge.outbox._worker import (
    DEFAULT_BATCH_MAX_CHARS,
    DEFAULT_BATCH_SIZE,
    DEFAULT_MAX_REJECTIONS,
    DEFAULT_PARALLEL_SESSIONS,
    DeliveryReport,
    DeliveryWorker,
)

__all__ = [
    "ALL",
    "DB_FILENAME",
    "DEFAULT_BATCH_MAX_CHARS",
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_LEASE_S",
    "DEFAULT_MAX_REJECTIONS",
    "DEFAULT_PARALLEL_SESSIONS",
    "DEFAULT_PAUSE",
    "DEFAULT_RETRY",
    "AllRecords",
    "BackoffPolicy",
    "Claim",
    "ClaimedTurn",
    "DeliveryClaims",
    "DeliveryReport",
    "DeliveryWorker",
    "Outbox",
    "OutboxAdmin",
    "OutboxConfigError",
    "OutboxCorrupt",
    "OutboxCounts",
    "OutboxEntry",
    "OutboxError",
    "OutboxInvalidTurn",
    "OutboxSink",
    "OutboxUnavailable",
    "RecordState",
]
