"""Fixtures for E2E tests that drive real Pi processes (see e2e/harness/)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness import FakeModel, PiEnv, PiInstall, PiNotInstalled, pi_installs

_E2E_ROOT = Path(__file__).resolve().parent
# the helpers shared with the unit tests (tests/waiting.py: the hang guard) import here too
sys.path.insert(0, str(_E2E_ROOT.parent / "tests"))
_INSTALLS = pi_installs()


# The files whose single tests take longest (a whole setup.sh, the packaged install): they start
# first, so that no parallel worker (scripts/test.sh) starts one of them last and runs on alone.
_LONGEST_FIRST = ("test_e2e_readme.py", "test_e2e_install.py")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.is_relative_to(_E2E_ROOT):
            item.add_marker(pytest.mark.e2e)
            item.add_marker(pytest.mark.slow)  # real Pi processes: `-m "not slow"` skips them
    # stable, and the same in every worker process (xdist checks that they all collected alike)
    rank = {name: i for i, name in enumerate(_LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


@pytest.fixture(scope="session", params=_INSTALLS, ids=[i.label for i in _INSTALLS])
def pi_install(request: pytest.FixtureRequest) -> PiInstall:
    """Each Pi version from scripts/versions.sh; a missing install fails (CI must run them)."""
    install: PiInstall = request.param
    try:
        install.require()
    except PiNotInstalled as exc:
        pytest.fail(str(exc), pytrace=False)
    return install


@pytest.fixture
def fake_model(tmp_path: Path) -> Iterator[FakeModel]:
    model = FakeModel(log_path=tmp_path / "model-requests.jsonl")
    with model:
        yield model
    if model.errors:
        pytest.fail("fake model errors: " + "; ".join(model.errors), pytrace=False)


@pytest.fixture
def pi_env(pi_install: PiInstall, fake_model: FakeModel, tmp_path: Path) -> Iterator[PiEnv]:
    env = PiEnv(pi_install, tmp_path / "pi", fake_model.base_url)
    try:
        yield env
    finally:
        env.close()
