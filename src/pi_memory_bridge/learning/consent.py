"""The user's answer to "may consolidation send conversations to a model?", kept in the global file.

Asked once, in an interactive session; the answer is written to `learning.enabled` (atomic, 0600,
through the config writer) so every later session, print mode included, follows it. A global
file with errors is never rewritten: its author may be halfway through an edit we cannot read.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Final

from pydantic import ValidationError

from pi_memory_bridge.config import BridgeConfig, global_config_path, read_json_object, write_global_config

YES = "Yes, learn from my sessions"
NO = "No (turn it on later with /tdai-memory-learning on)"


# what one consolidation spends, in tokens (the question's "roughly 2,000-8,000")
TOKENS_PER_JOB: Final = (2_000, 8_000)


@dataclass(frozen=True, slots=True)
class ModelPrice:
    """Pi's catalog price of a model, dollars per million tokens (0 when Pi lists none)."""

    input_per_mtok: float
    output_per_mtok: float


def model_words(provider: str, model_id: str) -> str:
    """A model named the one way every question and message names it."""
    return f"the model {model_id} from provider {provider}"


def _dollars(amount: float) -> str:
    # cents where they count, two significant digits below that (a job can cost a fraction of a cent)
    if amount >= 0.1:
        return f"${amount:,.2f}"
    return f"${amount:.2g}"


def money_text(price: ModelPrice | None, daily_budget: int) -> str:
    """The money side of the question: an estimate at Pi's listed price, or why there is none."""
    if price is None:
        return "Its price is not known here, so no money estimate can be given."
    if price.input_per_mtok <= 0 and price.output_per_mtok <= 0:
        return "Pi's model registry lists no price for it, so no money estimate can be given."
    # most of a job's tokens are the turns sent in; the upper figures count every token at the dearer rate
    dearer = max(price.input_per_mtok, price.output_per_mtok)
    low = TOKENS_PER_JOB[0] * price.input_per_mtok / 1e6
    high = TOKENS_PER_JOB[1] * dearer / 1e6
    day = daily_budget * dearer / 1e6
    return (
        f"At its listed price (${price.input_per_mtok:g} per million input tokens, "
        f"${price.output_per_mtok:g} per million output tokens) that is about "
        f"{_dollars(low)}-{_dollars(high)} a consolidation and at most {_dollars(day)} a day."
    )


def consent_question(
    model: str, price: ModelPrice | None, every_turns: int, daily_budget: int, config_path: Path
) -> str:
    low, high = TOKENS_PER_JOB
    return (
        "pi-memory-bridge can turn your conversations into memories (preferences, decisions, facts, "
        "pitfalls) so that later sessions know them.\n"
        "To do that it sends the text of recent turns (secrets redacted, code blocks left out), and "
        "of memories you save yourself (to give them topic tags and the questions they answer), to "
        f"{model}, and spends tokens: roughly {low:,}-{high:,} per consolidation, which runs after a pause "
        f"or every {every_turns} turns, at most {daily_budget:,} tokens a day (learning.dailyTokenBudget). "
        f"{money_text(price, daily_budget)}\n"
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
