"""The learning commands' flows, built from a running `Learning` (`/tdai-memory-undo`,
`/tdai-memory-learning`); the flows themselves live in `commands.learning`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pi_memory_bridge.engine.learning_status import model_label
from pi_memory_bridge.learning.consent import ModelPrice, model_words

if TYPE_CHECKING:
    from pi_memory_bridge.engine.learning import Learning
    from pi_memory_bridge.vocabulary.dialog import Flow
    from pi_memory_bridge.wire import SessionModel


def undo_command(learning: Learning, args: str) -> Flow:
    """`/tdai-memory-undo`: reverse one learning job, through a Dialog."""
    from pi_memory_bridge.commands.learning import UndoDeps, undo_flow

    deps = UndoDeps(
        learning.memories, learning.problem or "the memory store is not open", learning.notes.regenerate_soon
    )
    return lambda dialog: undo_flow(deps, args, dialog)


def learning_command(learning: Learning, args: str, session_model: SessionModel | None) -> Flow:
    """`/tdai-memory-learning`: consent and what learning runs on, through a Dialog."""
    from pi_memory_bridge.commands.learning import LearningDeps, learning_flow

    session = None
    if session_model is not None:
        price = ModelPrice(session_model.input_cost_per_mtok, session_model.output_cost_per_mtok)
        session = (model_words(session_model.provider, session_model.id), price)

    deps = LearningDeps(
        agent_dir=learning.agent_dir,
        model_label=model_label(learning),
        every_turns=learning.settings.every_turns,
        daily_budget=learning.settings.daily_token_budget,
        current=learning.consent,
        set_consent=learning.set_consent,
        model_configured=learning.settings.model is not None or learning.settings.endpoint is not None,
        session_model=session,
    )
    return lambda dialog: learning_flow(deps, args, dialog)
