"""Counted nouns in user-facing text: "1 turn", "2 turns", "0 memories", never "turn(s)"."""

from __future__ import annotations

_VOWELS = frozenset("aeiou")


def plural(singular: str) -> str:
    """The regular English plural of one word or of a phrase's last word ("dead record")."""
    head, _, word = singular.rpartition(" ")
    prefix = f"{head} " if head else ""
    if word.endswith("y") and len(word) > 1 and word[-2] not in _VOWELS:
        return f"{prefix}{word[:-1]}ies"
    if word.endswith(("s", "x", "ch", "sh")):
        return f"{prefix}{word}es"
    return f"{prefix}{word}s"


def noun(n: int, singular: str, many: str | None = None) -> str:
    """The noun alone, singular for exactly one ("1 item", "0 items")."""
    return singular if n == 1 else (many or plural(singular))


def counted(n: int, singular: str, many: str | None = None) -> str:
    """`n` and its noun: counted(1, "turn") is "1 turn", counted(3, "memory") "3 memories"; `many`
    for an irregular plural."""
    return f"{n} {noun(n, singular, many)}"
