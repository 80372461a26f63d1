"""The notes (L2) and profile (L3) pages, and the overview's part of them."""

from __future__ import annotations

from pi_memory_bridge.backends.base import BackendError, Capability, Profile, ScenarioEntry, ScenarioNote
from pi_memory_bridge.ui.service import Inspector, plain
from pi_memory_bridge.vocabulary.status import Problem


async def profile_and_notes(
    insp: Inspector, problems: list[Problem]
) -> tuple[Profile | None, tuple[ScenarioEntry, ...]]:
    """The profile and the note list, each when the backend has it; what fails goes to `problems`."""
    backend = insp.backend
    profile: Profile | None = None
    scenarios: tuple[ScenarioEntry, ...] = ()
    if backend is None:
        return profile, scenarios
    if Capability.L3_PROFILE in backend.capabilities:
        try:
            profile = await backend.notes.read_profile()
        except BackendError as exc:
            problems.append(Problem(f"the profile cannot be read: {plain(exc)}", "fix or delete the file"))
    if Capability.L2_SCENARIOS in backend.capabilities:
        try:
            scenarios = tuple(await backend.notes.list_scenarios())
        except BackendError as exc:
            problems.append(Problem(f"the project notes cannot be listed: {plain(exc)}", "see the log file"))
    return profile, scenarios


async def notes(insp: Inspector) -> tuple[list[ScenarioEntry], Profile | None, str]:
    if insp.backend is None:
        return [], None, f"the memory store is unavailable: {insp.backend_error}"
    problems: list[Problem] = []
    profile, scenarios = await profile_and_notes(insp, problems)
    return list(scenarios), profile, "; ".join(p.what for p in problems)


async def note(insp: Inspector, path: str) -> ScenarioNote | str:
    """One note, or why it cannot be shown."""
    if insp.backend is None:
        return f"the memory store is unavailable: {insp.backend_error}"
    try:
        return await insp.backend.notes.read_scenario(path)
    except BackendError as exc:
        return plain(exc)
