"""Holm's step-down correction for a family of p-values.

When several hypotheses are tested at once (the five metric deltas of a comparison, or
several treatments sharing one baseline), the chance that at least one of them rejects by
luck grows with their number. Holm's procedure keeps that family-wise error rate at the
nominal level for any dependence between the tests. With the m p-values sorted ascending,
``p_(1) <= ... <= p_(m)``, the adjusted p-values are

    p~_(i) = max_{j <= i} min(1, (m - j + 1) * p_(j)),

and a hypothesis is rejected at level alpha when its adjusted p-value is at most alpha.

Source: S. Holm, "A simple sequentially rejective multiple test procedure", Scandinavian
Journal of Statistics 6 (1979), 65-70.
"""

from __future__ import annotations

from collections.abc import Sequence


def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm-adjusted p-values, in the input order; None entries are not tested (they stay
    None and do not count towards the family size)."""
    tested = sorted((p, i) for i, p in enumerate(p_values) if p is not None)
    m = len(tested)
    adjusted: list[float | None] = [None] * len(p_values)
    running = 0.0
    for rank, (p, index) in enumerate(tested):
        running = max(running, min(1.0, (m - rank) * p))
        adjusted[index] = running
    return adjusted
