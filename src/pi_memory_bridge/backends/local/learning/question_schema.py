"""Schema version 5: the questions an L1 memory answers, written beside it by consolidation.

When learning extracts a memory, the model also writes two or three short questions the memory
answers, in the user's language and the other one (`learning/prompts.py`). They are embedded as
extra vectors of their memory (`vectors.QUESTION_VECTORS`): a question asked later in other
words is closer to a question than to the memory's own sentence, which is what lifts recall of
paraphrases (bench/bench_memory_quality.py). They are not keyword-indexed and never shown.

A memory's questions live and die with it: deleting the memory (forget, undo of the job that
added it) deletes them, and so does editing its text, since they were written for the old one.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

MAX_QUESTIONS = 3
MAX_QUESTION_CHARS = 160


def migration_5(conn: sqlite3.Connection) -> None:
    statements = [
        """CREATE TABLE atomic_questions (
            id INTEGER PRIMARY KEY,
            row_id INTEGER NOT NULL,
            text TEXT NOT NULL
        )""",
        "CREATE INDEX atomic_questions_by_row ON atomic_questions(row_id)",
        "CREATE TRIGGER atomic_questions_delete AFTER DELETE ON atomic BEGIN "
        "DELETE FROM atomic_questions WHERE row_id = old.id; END",
        "CREATE TRIGGER atomic_questions_stale AFTER UPDATE OF content ON atomic BEGIN "
        "DELETE FROM atomic_questions WHERE row_id = old.id; END",
    ]
    for statement in statements:
        conn.execute(statement)


def clean_questions(questions: Sequence[str]) -> list[str]:
    """Questions as stored: whitespace folded, empty and repeated ones dropped, capped."""
    kept: dict[str, None] = {}
    for question in questions:
        folded = " ".join(question.split())[:MAX_QUESTION_CHARS]
        if folded:
            kept.setdefault(folded, None)
        if len(kept) >= MAX_QUESTIONS:
            break
    return list(kept)


def add_questions(conn: sqlite3.Connection, row_id: int, questions: Sequence[str]) -> None:
    """Inside the caller's write transaction."""
    conn.executemany(
        "INSERT INTO atomic_questions(row_id, text) VALUES (?, ?)",
        [(row_id, q) for q in clean_questions(questions)],
    )
