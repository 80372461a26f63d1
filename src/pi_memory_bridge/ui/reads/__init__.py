"""What each inspector page shows, read without HTTP: one module per page, typed results.

Searches are the backend's own (`memories.search`, `conversation.search`: what recall and the tools
use); lists come from the local store's read-only view. A part that cannot be read becomes a
problem the page states, never an error page.
"""

from pi_memory_bridge.ui.reads.conversation import ConversationPage, conversation, turn
from pi_memory_bridge.ui.reads.memories import MemoriesPage, memories, memory
from pi_memory_bridge.ui.reads.notes import note, notes
from pi_memory_bridge.ui.reads.outbox import OutboxPage, outbox, outbox_entries
from pi_memory_bridge.ui.reads.overview import Overview, overview
from pi_memory_bridge.ui.reads.traces import recent_traces, trace

__all__ = [
    "ConversationPage",
    "MemoriesPage",
    "OutboxPage",
    "Overview",
    "conversation",
    "memories",
    "memory",
    "note",
    "notes",
    "outbox",
    "outbox_entries",
    "overview",
    "recent_traces",
    "trace",
    "turn",
]
