"""The abstention comparison of bench_memory_quality.py (bench/_abstention.py) counts what it
claims: a closed gate silences the layer but for identifier hits, false recall is "anything at
all returned", and its logistic model learns a separable case."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

_PATH = Path(__file__).resolve().parent.parent / "bench" / "_abstention.py"


@pytest.fixture(scope="module")
def abst() -> ModuleType:
    spec = importlib.util.spec_from_file_location("_abstention", _PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["_abstention"] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


def _evidence(
    abst: ModuleType, case_id: str, top: float, text: float, identifiers: tuple[str, ...] = ()
) -> object:
    return abst.L1Evidence(case_id, (("m1", top), ("m2", top - 0.1)), identifiers, text, 0.5, 0.3)


def test_a_closed_gate_keeps_only_identifier_hits(abst: ModuleType) -> None:
    e = _evidence(abst, "x", 0.4, 0.3, identifiers=("m9",))
    assert abst.returned(e, lambda _: True, 0.2, 6) == ["m9", "m1", "m2"]
    assert abst.returned(e, lambda _: False, 0.2, 6) == ["m9"]
    assert abst.returned(e, lambda _: True, 0.35, 6) == ["m9", "m1"]  # the floor still applies


def test_false_recall_and_paraphrase_recall_per_rule(abst: ModuleType) -> None:
    cases = {
        "p": abst.Case("paraphrase", ("m1",), ()),
        "a": abst.Case("abstention", (), ()),
        "b": abst.Case("abstention", (), ("s01t1",)),  # L0 returns a turn: L1+L0 recall, not L1
        "i": abst.Case("identifier", ("m9",), ()),
    }
    evidence = {
        "p": _evidence(abst, "p", 0.4, 0.3),
        "a": _evidence(abst, "a", 0.3, 0.1),
        "b": _evidence(abst, "b", 0.25, 0.05),
        "i": _evidence(abst, "i", 0.5, 0.5, identifiers=("m9",)),
    }
    open_ = abst.score_rule(cases, evidence, lambda _: True, 0.2, 6)
    assert (open_.paraphrase_r5, open_.identifier_r1, open_.false_l1, open_.false_all) == (1.0, 1.0, 1.0, 1.0)
    text_floor = abst.score_rule(cases, evidence, lambda e: e.text >= 0.2, 0.2, 6)
    assert (text_floor.paraphrase_r5, text_floor.false_l1, text_floor.false_all) == (1.0, 0.0, 0.5)
    closed = abst.score_rule(cases, evidence, lambda _: False, 0.2, 6)
    assert (closed.paraphrase_r5, closed.identifier_r1) == (0.0, 1.0)


def test_the_logistic_model_separates_a_separable_set(abst: ModuleType) -> None:
    rows = [_evidence(abst, str(i), 0.2 + 0.05 * i, 0.05 * i) for i in range(10)]
    labels = [int(i >= 5) for i in range(10)]
    model = abst.fit_logistic(("text",), rows, labels, [1.0] * 10, 0.1)
    assert model.probability(rows[0]) < 0.2 < 0.8 < model.probability(rows[9])
    assert model.beta[0] > 0


def test_second_model_rules_stay_closed_without_the_model(abst: ModuleType) -> None:
    gate = dict(abst.RULES)["second model (e5) >= 0.805 (0.90)"]
    without = _evidence(abst, "x", 0.9, 0.9)  # second model not installed: NaN
    assert not gate(without)
    assert gate(abst.L1Evidence("x", (("m1", 0.3),), (), 0.1, 0.1, 0.1, 0.81))
