"""The user's answer to "may consolidation send conversations to a model?", kept in the global file.

Asked once, in an interactive session; the answer is written to `learning.enabled` (atomic, 0600,
through the config writer) so every later session, print mode included, follows it. A global
file with errors is never rewritten: its author may be halfway through an edit we cannot read.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from pi_memory_bridge.config import BridgeConfig, global_config_path, read_json_object, write_global_config

YES = "Yes, learn from my sessions"
NO = "No (turn it on later with /tdai-memory-learning on)"


def consent_question(model: str, every_turns: int, daily_budget: int, config_path: Path) -> str:
    return (
        "pi-memory-bridge can turn your conversations into memories (preferences, decisions, facts, "
        "pitfalls) so that later sessions know them.\n"
        "To do that it sends the text of recent turns (secrets redacted, code blocks left out), and "
        "of memories you save yourself (to give them topic tags and the questions they answer), to "
        f"{model}, and spends tokens: roughly 2,000-8,000 per consolidation, which runs after a pause "
        f"or every {every_turns} turns, at most {daily_budget:,} tokens a day (learning.dailyTokenBudget).\n"
        "Every job is shown after it runs, listed in /tdai-memory-status, and can be undone with "
        "/tdai-memory-undo.\n"
        f"Your answer is kept in {config_path}; change it any time with /tdai-memory-learning on|off."
    )


def store_consent(agent_dir: Path, enabled: bool) -> str | None:
    """Write `learning.enabled` into the global file, keeping everything else; a problem or None."""
    path = global_config_path(agent_dir)
    read = read_json_object(path)
    if read.exists and (read.data is None or any(p.severity == "error" for p in read.problems)):
        return f"{path} has problems, so it was not rewritten; set learning.enabled there yourself"
    try:
        current = BridgeConfig.model_validate(read.data or {}, by_alias=True, by_name=False)
    except ValidationError:
        return f"{path} has invalid settings, so it was not rewritten; set learning.enabled there yourself"
    learning = current.learning.model_copy(update={"enabled": enabled})
    try:
        write_global_config(agent_dir, current.model_copy(update={"learning": learning}))
    except (OSError, ValidationError) as exc:
        return f"cannot write {path}: {type(exc).__name__}"
    return None
