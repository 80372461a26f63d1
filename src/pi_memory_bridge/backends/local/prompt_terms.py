"""A prompt as the local store searches it: its question, and the anchors this store knows.

`prompt_focus` finds a long prompt's question and the identifier-like words of its paste. Of
those anchors, only the ones that occur in a few of this index's rows are kept: an anchor the
store has never seen can match nothing and would only dilute the keyword coverage of the
question's own terms; one held by many rows (a module every turn mentions) names nothing in
particular and would promote all of them through the identifier gate (embeddings.fusion).
"""

from __future__ import annotations

from dataclasses import dataclass

from pi_memory_bridge import textsearch
from pi_memory_bridge.backends.local import fts
from pi_memory_bridge.backends.local.store import SqliteMemoryStore
from pi_memory_bridge.prompt_focus import focus_prompt, with_anchors

# An anchor counts when at most this many rows of the index hold it.
RARE_ANCHOR_ROWS = 5
# ...and at most this many anchors join the question, the rarest first.
KEPT_ANCHORS = 8


@dataclass(frozen=True, slots=True)
class StoreQuery:
    keywords: str  # what keyword search and the identifier gate read
    meaning: str  # what is embedded


def store_query(store: SqliteMemoryStore, spec: fts.FtsSpec, prompt: str) -> StoreQuery:
    focused = focus_prompt(prompt)
    if not focused.anchors:
        return StoreQuery(focused.question, focused.question)
    whole = {a: textsearch.index_tokens(a) for a in focused.anchors}
    tokens = {a: t[0] for a, t in whole.items() if t}
    with store.reading("weighing a prompt's identifiers") as conn:
        df = fts.document_frequencies(conn, spec, sorted(set(tokens.values())))
    order = {a: i for i, a in enumerate(focused.anchors)}
    known = [a for a, t in tokens.items() if 0 < df.get(t, 0) <= RARE_ANCHOR_ROWS]
    kept = sorted(known, key=lambda a: (df[tokens[a]], order[a]))[:KEPT_ANCHORS]
    kept.sort(key=order.__getitem__)
    return StoreQuery(with_anchors(focused.question, kept), focused.question)
