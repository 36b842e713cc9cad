"""How far a judge can be trusted: order agreement and inter-judge agreement.

**Order agreement.** Each pair is judged twice with the positions swapped. Pass 1 shows the
baseline as A, pass 2 shows the treatment as A; each pass's answer is mapped to the
treatment's side (+1 better, -1 worse, 0 tie), and the two passes *agree* when the sides are
equal. A judge that ignores the content and answers A, B and tie with frequencies
``p_A, p_B, p_tie`` agrees by chance with probability

    chance = 2 * p_A * p_B + p_tie^2

(pass 1 says B and pass 2 says A, or the reverse, or both say tie). The frequencies are the
judge's own answers over both passes of every pair. A judge whose agreement is at or below
that chance rate shows no sign of reading the content; the comparison warns. Kappa is
``(agreement - chance) / (1 - chance)``, Cohen's correction for chance. Source:
J. Cohen, "A coefficient of agreement for nominal scales", Educational and Psychological
Measurement 20 (1960); L. Zheng et al., "Judging LLM-as-a-judge with MT-Bench and Chatbot
Arena" (2023), section 3.3, for position-swap consistency.

**Krippendorff's alpha** for a panel of judges (units = pairs, coders = judges, values =
their scores): with the coincidences of every pairable value,

    alpha = 1 - D_o / D_e,
    D_o = (1/n) * sum_u (1/(m_u - 1)) * sum_{i != j in u} delta(v_i, v_j),
    D_e = (1/(n (n - 1))) * sum_{c != k over all n pairable values} delta(c, k),

with n the number of values in units that have at least two, m_u the values of unit u,
and delta the interval metric ``(c - k)^2`` or the nominal metric ``[c != k]``. Source:
K. Krippendorff, "Computing Krippendorff's Alpha-Reliability" (2011), University of
Pennsylvania, ScholarlyCommons 43.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

_TREATMENT_SIDE = ({"B": 1, "A": -1}, {"A": 1, "B": -1})
"""The treatment's side of each answer in pass 1 (baseline is A) and pass 2 (treatment is A)."""


@dataclass(frozen=True)
class OrderAgreement:
    """How often a judge's two position-swapped passes named the same winner.

    Attributes:
        pairs: Pairs judged in both orders.
        agreed: Pairs whose two passes agreed on the treatment's side.
        answers_a: Passes that answered A.
        answers_b: Passes that answered B.
        answers_tie: Passes that answered tie.
    """

    pairs: int
    agreed: int
    answers_a: int
    answers_b: int
    answers_tie: int

    @property
    def rate(self) -> float | None:
        """agreed / pairs; None with no pairs."""
        return self.agreed / self.pairs if self.pairs else None

    @property
    def chance(self) -> float | None:
        """Agreement of a content-blind judge with the same answer frequencies."""
        total = self.answers_a + self.answers_b + self.answers_tie
        if not total:
            return None
        p_a, p_b, p_tie = (x / total for x in (self.answers_a, self.answers_b, self.answers_tie))
        return 2 * p_a * p_b + p_tie**2

    @property
    def kappa(self) -> float | None:
        """(rate - chance) / (1 - chance); None when chance is 1 or unknown."""
        rate, chance = self.rate, self.chance
        if rate is None or chance is None or chance >= 1.0:
            return None
        return (rate - chance) / (1 - chance)

    @property
    def no_better_than_chance(self) -> bool:
        """Agreement at or below chance, for a judge that did not call every pair a tie."""
        rate, chance = self.rate, self.chance
        if rate is None or chance is None or chance >= 1.0:
            return False
        return rate <= chance + 1e-12

    @property
    def position_a_share(self) -> float | None:
        """Share of passes that answered A (0.5 for a judge without position bias)."""
        decided = self.answers_a + self.answers_b
        return self.answers_a / decided if decided else None

    def __add__(self, other: OrderAgreement) -> OrderAgreement:
        return OrderAgreement(
            self.pairs + other.pairs,
            self.agreed + other.agreed,
            self.answers_a + other.answers_a,
            self.answers_b + other.answers_b,
            self.answers_tie + other.answers_tie,
        )


def order_agreement(answers: Iterable[tuple[str, str]]) -> OrderAgreement:
    """Order agreement from each pair's ``(pass-1 winner, pass-2 winner)``."""
    pairs = agreed = a = b = tie = 0
    for first, second in answers:
        pairs += 1
        sides = (_TREATMENT_SIDE[0].get(first, 0), _TREATMENT_SIDE[1].get(second, 0))
        agreed += sides[0] == sides[1]
        for answer in (first, second):
            a += answer == "A"
            b += answer == "B"
            tie += answer not in ("A", "B")
    return OrderAgreement(pairs, agreed, a, b, tie)


def krippendorff_alpha(
    units: Sequence[Sequence[float | None]],
    metric: Literal["interval", "nominal"] = "interval",
) -> float | None:
    """Krippendorff's alpha over ``units`` (each the coders' values, None when missing).

    Returns None when fewer than two pairable values exist or every value is the same
    (the expected disagreement is zero and alpha is undefined).
    """

    def delta(c: float, k: float) -> float:
        return (c - k) ** 2 if metric == "interval" else float(c != k)

    pairable = [[v for v in unit if v is not None] for unit in units]
    pairable = [unit for unit in pairable if len(unit) >= 2]
    values = [v for unit in pairable for v in unit]
    n = len(values)
    if n < 2:
        return None
    observed = math.fsum(
        math.fsum(delta(c, k) for i, c in enumerate(unit) for j, k in enumerate(unit) if i != j)
        / (len(unit) - 1)
        for unit in pairable
    )
    counts = Counter(values)
    expected = math.fsum(
        nc * nk * delta(c, k) for c, nc in counts.items() for k, nk in counts.items()
    )
    if expected == 0:
        return None
    return 1.0 - (n - 1) * observed / expected


@dataclass(frozen=True)
class SelfConsistency:
    """How often the judge repeats its own verdict on pairs judged a second time.

    Attributes:
        pairs: Pairs judged twice (each time in both orders).
        same: Pairs whose second score equals the first.
        alpha: Krippendorff's alpha (interval) between the two scores; None without
            variation.
    """

    pairs: int
    same: int
    alpha: float | None

    @property
    def rate(self) -> float | None:
        """same / pairs; None with no pairs."""
        return self.same / self.pairs if self.pairs else None


def self_consistency(scores: Sequence[tuple[float, float]]) -> SelfConsistency:
    """Self-consistency from each re-judged pair's ``(first score, second score)``."""
    same = sum(1 for first, second in scores if first == second)
    alpha = krippendorff_alpha([list(pair) for pair in scores])
    return SelfConsistency(len(scores), same, alpha)
