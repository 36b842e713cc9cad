"""The sign-flip permutation test: is the mean of paired differences zero?

Each value is one stimulus's mean difference (treatment - baseline). Under the null
hypothesis that the two sides are exchangeable within every stimulus, each difference is as
likely to carry either sign, so the statistic ``T = sum(d_j)`` is compared with its
distribution over all ``2^n`` sign assignments ``T* = sum(s_j |d_j|)``:

    p_greater = #{T* >= T} / 2^n,   p_less = #{T* <= T} / 2^n,
    p_two_sided = min(1, 2 * min(p_less, p_greater)).

Up to :data:`EXACT_LIMIT` stimuli every assignment is enumerated (meet in the middle: the
sums of the two halves are enumerated separately and counted against each other, so 20
stimuli cost two sets of 1,024 sums). Above that, :data:`MC_DRAWS` random sign vectors
drawn with the fixed seed :data:`MC_SEED` stand in for the full set, and the p-value counts
the observed assignment too: ``(1 + #{T*_b >= T}) / (B + 1)``, which keeps it valid. The
draws are made and counted a block at a time (:data:`_BLOCK_SIGNS` signs per block), so the
test's memory does not grow with the number of stimuli; the blocks are the rows of the one
``MC_DRAWS x n`` draw, in order, so every p-value is the same as with the whole matrix.
When the values take few distinct values (per-stimulus pass-rate differences of a few runs
take a handful, whatever the number of stimuli), each draw's signs are first added up by
value (:class:`GroupedDraws`), so a draw costs a product per distinct value instead of one
per stimulus: the same draws and magnitudes, added in another order.

The test makes no normality assumption and holds its level at every sample size; the price
is that few stimuli cannot reach a small p-value at all: the smallest two-sided p-value is
``2 / 2^n`` (0.0625 at 5 stimuli), see :func:`min_two_sided_p`.

Source: R. A. Fisher, *The Design of Experiments* (1935), section 21; E. L. Lehmann and
J. P. Romano, *Testing Statistical Hypotheses* (3rd ed., 2005), section 15.2.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

EXACT_LIMIT = 20
"""Up to this many stimuli the test enumerates every sign assignment."""
MC_DRAWS = 9_999
"""Random sign vectors drawn above :data:`EXACT_LIMIT`."""
MC_SEED = 2026
"""Seed of those draws, so that a comparison prints the same p-value every time."""
_FULL_ENUMERATION = 12
"""Up to this many values, the batched test enumerates every assignment as one matrix."""
_CHUNK = 256
"""Rows per matrix product in the batched Monte Carlo test."""
_BLOCK_SIGNS = 1 << 19
"""Signs drawn at a time in the Monte Carlo test (about 8 MB with the draw's indices): a
block holds ``_BLOCK_SIGNS // n`` draws of ``n`` signs (at least one)."""
_GROUPED_SHARE = 8
"""The interval's Monte Carlo tests add up each draw's signs by distinct value when the
values hold at most one distinct value in this many (pass-rate differences of a few runs
a stimulus take a handful of values, whatever the number of stimuli)."""


@dataclass(frozen=True)
class SignFlipResult:
    """The sign-flip test of one set of per-stimulus differences.

    Attributes:
        n: Values tested.
        p_less: P(T* <= T): small when the mean is below zero.
        p_greater: P(T* >= T): small when the mean is above zero.
        exact: True when every assignment was enumerated.
    """

    n: int
    p_less: float
    p_greater: float
    exact: bool

    @property
    def p_two_sided(self) -> float:
        """``min(1, 2 * min(p_less, p_greater))``."""
        return min(1.0, 2.0 * min(self.p_less, self.p_greater))


def min_two_sided_p(n: int) -> float:
    """The smallest two-sided p-value the exact test can give with ``n`` non-zero values."""
    return 1.0 if n <= 0 else min(1.0, math.ldexp(1.0, 1 - n))  # 2 / 2**n, 0.0 past floats


def sign_flip_test(values: Sequence[float]) -> SignFlipResult:
    """The sign-flip test of ``values`` (see the module docstring)."""
    import numpy as np

    less, greater = sign_flip_pvalues(np.asarray([list(values)], dtype=float))
    n = len(values)
    return SignFlipResult(n, float(less[0]), float(greater[0]), n <= EXACT_LIMIT)


def sign_flip_pvalues(rows: Any, *, draws: SignDraws | None = None) -> tuple[Any, Any]:
    """``(p_less, p_greater)`` arrays for each row of a 2-D array (one test per row).

    The batched form lets a simulation test thousands of data sets at once; every row is
    tested exactly as :func:`sign_flip_test` tests one. ``draws`` (for rows of its length)
    gives the Monte Carlo sign vectors already drawn, instead of drawing them again.
    """
    import numpy as np

    data = np.asarray(rows, dtype=float)
    if data.ndim != 2:
        raise ValueError("sign_flip_pvalues takes a 2-D array: one row per test")
    count, n = data.shape
    if n == 0:
        return np.ones(count), np.ones(count)
    observed = data.sum(axis=1)
    magnitudes = np.abs(data)
    tol = 1e-9 * np.maximum(1.0, magnitudes.sum(axis=1))
    if n <= _FULL_ENUMERATION:
        signs = _all_signs(n)
        return _count(signs @ magnitudes.T, observed, tol)
    if n <= EXACT_LIMIT:
        pairs = [_meet_in_middle(magnitudes[i], observed[i], tol[i]) for i in range(count)]
        return np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])
    if count == 1:
        kept = draws if draws is not None and draws.n == n else None
        grouped = GroupedDraws.fitting(data[0], kept)
        if grouped is not None:
            return grouped.pvalues(data[0], np.zeros(1))
    less, greater = np.zeros(count), np.zeros(count)
    blocks = draws.blocks() if draws is not None and draws.n == n else _drawn_signs(n)
    for signs in blocks:
        for start in range(0, count, _CHUNK):
            part = slice(start, start + _CHUNK)
            null = signs @ magnitudes[part].T
            less[part] += (null <= observed[part] + tol[part]).sum(axis=0)
            greater[part] += (null >= observed[part] - tol[part]).sum(axis=0)
    return (less + 1) / (MC_DRAWS + 1), (greater + 1) / (MC_DRAWS + 1)


def _drawn_signs(n: int) -> Iterator[Any]:
    """The :data:`MC_DRAWS` random vectors of ``n`` signs (seed :data:`MC_SEED`), a block
    of rows at a time: together, in order, the rows of one ``(MC_DRAWS, n)`` draw."""
    import numpy as np

    rng = np.random.default_rng(MC_SEED)
    choices = np.array([-1.0, 1.0])
    per_block = max(1, _BLOCK_SIGNS // n)
    for start in range(0, MC_DRAWS, per_block):
        yield rng.choice(choices, size=(min(per_block, MC_DRAWS - start), n))


class GroupedDraws:
    """The Monte Carlo draws of :func:`_drawn_signs` for ``n`` values that take few
    distinct values, each draw's signs added up by value: ``sum_i s_i |d_i - delta|`` is
    ``sum_j S_j |v_j - delta|``, with ``S_j`` the sum of the signs of the values equal to
    ``v_j``. So testing a shift costs a draw ``m`` products (``m`` distinct values) instead
    of ``n``; the magnitudes are the same numbers, added in another order.

    Args:
        data: The values (one row).
        draws: Their draws already kept, else they are drawn.
        distinct: ``np.unique(data, return_inverse=True)`` when already worked out.
    """

    def __init__(
        self,
        data: Any,
        draws: SignDraws | None = None,
        distinct: tuple[Any, Any] | None = None,
    ) -> None:
        import numpy as np

        values, inverse = np.unique(data, return_inverse=True) if distinct is None else distinct
        self.values: Any = values
        """The distinct values, in order."""
        order = np.argsort(inverse, kind="stable")
        starts = np.searchsorted(inverse[order], np.arange(len(self.values)))
        blocks = draws.blocks() if draws is not None else _drawn_signs(len(data))
        # sums of signs are whole numbers: exact in any order
        self.sums = np.concatenate(
            [np.add.reduceat(block[:, order], starts, axis=1) for block in blocks]
        )
        """Per draw (rows) the sum of the signs of each distinct value (columns)."""

    @classmethod
    def fitting(cls, data: Any, draws: SignDraws | None = None) -> GroupedDraws | None:
        """The grouped draws of ``data`` when they pay (:meth:`fits`), else None: those of
        the last call when it had the same values (a decision tests the values, then
        inverts the test over them), else new, from the distinct values the decision
        found (``np.unique`` runs once)."""
        global _LAST_GROUPED
        key = data.tobytes()
        last = _LAST_GROUPED
        if last is not None and last[0] == key:  # the same values, grouped (they paid)
            return last[1]
        distinct = _few_distinct(data)
        if distinct is None:
            return None
        grouped = cls(data, draws, distinct)
        _LAST_GROUPED = (key, grouped)
        return grouped

    @staticmethod
    def fits(data: Any) -> bool:
        """Whether ``data`` (more than :data:`EXACT_LIMIT` values) take few enough distinct
        values for the grouped draws to pay."""
        return _few_distinct(data) is not None

    def pvalues(self, data: Any, shifts: Any) -> tuple[Any, Any]:
        """``(p_less, p_greater)`` of ``data - shift`` for each of ``shifts``, as
        :func:`sign_flip_pvalues` gives them from the draws."""
        import numpy as np

        rows = data[None, :] - shifts[:, None]
        observed = rows.sum(axis=1)
        tol = 1e-9 * np.maximum(1.0, np.abs(rows).sum(axis=1))
        null = self.sums @ np.abs(self.values[None, :] - shifts[:, None]).T
        less = (null <= observed + tol).sum(axis=0)
        greater = (null >= observed - tol).sum(axis=0)
        return (less + 1) / (MC_DRAWS + 1), (greater + 1) / (MC_DRAWS + 1)


_LAST_GROUPED: tuple[bytes, GroupedDraws] | None = None
"""The values of the last :meth:`GroupedDraws.fitting` and their grouped draws."""


def _few_distinct(data: Any) -> tuple[Any, Any] | None:
    """``np.unique(data, return_inverse=True)`` when ``data`` (more than
    :data:`EXACT_LIMIT` values) hold at most one distinct value in :data:`_GROUPED_SHARE`,
    else None."""
    import numpy as np

    n = len(data)
    if n <= EXACT_LIMIT:
        return None
    values, inverse = np.unique(data, return_inverse=True)
    return (values, inverse) if _pays(n, len(values)) else None


def _pays(n: int, distinct: int) -> bool:
    """Whether grouped draws pay for ``n`` values that take ``distinct`` distinct ones."""
    return n > EXACT_LIMIT and distinct * _GROUPED_SHARE <= n


class SignDraws:
    """The Monte Carlo sign vectors of :func:`_drawn_signs` for ``n`` values, drawn once and
    kept as bits (``MC_DRAWS * n / 8`` bytes, a 64th of the drawn blocks), for tests that
    run many times on rows of one length (the shifts of :func:`sign_flip_interval`).
    :meth:`blocks` gives the very blocks :func:`_drawn_signs` draws, so every p-value is
    the same with or without them."""

    def __init__(self, n: int) -> None:
        import numpy as np

        self.n = n
        self._packed = [np.packbits(block > 0, axis=1) for block in _drawn_signs(n)]

    def blocks(self) -> Iterator[Any]:
        """The blocks of signs, in order (each ``+1.0`` or ``-1.0``, as drawn)."""
        import numpy as np

        for packed in self._packed:
            bits = np.unpackbits(packed, axis=1, count=self.n)
            yield np.where(bits.astype(bool), 1.0, -1.0)


def _all_signs(n: int) -> Any:
    """Every vector of ``n`` signs, one per row (``2^n`` rows)."""
    import numpy as np

    codes = np.arange(2**n)[:, None] >> np.arange(n)[None, :]
    return np.where(codes & 1, -1.0, 1.0)


def _count(null: Any, observed: Any, tol: Any) -> tuple[Any, Any]:
    """Tail shares of the null sums (one column per test) at the observed sums."""
    draws = null.shape[0]
    less = (null <= observed + tol).sum(axis=0)
    greater = (null >= observed - tol).sum(axis=0)
    return less / draws, greater / draws


def _half_sums(magnitudes: Any) -> Any:
    """Every signed sum of ``magnitudes``."""
    import numpy as np

    sums = np.zeros(1)
    for value in magnitudes:
        sums = np.concatenate([sums + value, sums - value])
    return sums


def _meet_in_middle(magnitudes: Any, observed: float, tol: float) -> tuple[float, float]:
    """Exact tail shares by pairing the signed sums of the two halves."""
    import numpy as np

    half = len(magnitudes) // 2
    left = _half_sums(magnitudes[:half])
    right = np.sort(_half_sums(magnitudes[half:]))
    total = float(len(left) * len(right))
    greater = len(right) - np.searchsorted(right, observed - tol - left, side="left")
    less = np.searchsorted(right, observed + tol - left, side="right")
    return float(less.sum()) / total, float(greater.sum()) / total


_GRID = 64
"""Candidate shifts per refinement round of :func:`sign_flip_interval`."""
_ROUNDS = 5
"""Refinement rounds: the bounds are found to ``span / 64^5`` (about ``1e-9 * span``)."""


def sign_flip_interval(
    values: Sequence[float],
    level: float = 0.95,
    bounds: tuple[float, float] | None = None,
) -> tuple[float, float] | None:
    """The interval that inverts the two-sided sign-flip test at ``level``.

    It holds every shift ``delta`` that the test of ``values - delta`` does not reject at
    ``alpha = 1 - level`` (``p_two_sided > alpha``): so zero lies outside it exactly when
    the test of ``values`` rejects, and a decision read off the test never contradicts it.
    Each end is found by refining a grid of shifts where ``2 * p_greater`` (the lower end)
    or ``2 * p_less`` (the upper end) crosses ``alpha``.

    With too few values for the test to reach ``alpha`` at all (fewer than 6 at 95%, see
    :func:`min_two_sided_p`) no shift is rejected: the interval is the whole of ``bounds``
    when given, else None (no finite interval); None with no values.
    """
    import numpy as np

    data = np.asarray(list(values), dtype=float)
    n = len(data)
    alpha = 1.0 - level
    if n == 0:
        return None
    if min_two_sided_p(n) > alpha:
        return None if bounds is None else (float(bounds[0]), float(bounds[1]))
    span = float(data.max() - data.min()) + 1.0
    mean = float(data.mean())
    # drawn once for every shift: added up by value when the values take few, else kept
    grouped = GroupedDraws.fitting(data)
    draws = SignDraws(n) if n > EXACT_LIMIT and grouped is None else None

    def pvalues(shifts: Any) -> tuple[Any, Any]:
        if grouped is not None:
            return grouped.pvalues(data, shifts)
        return sign_flip_pvalues(data[None, :] - shifts[:, None], draws=draws)

    def rejects_below(shifts: Any) -> Any:
        """True where the shifted data lie significantly above zero (shift too low)."""
        _less, greater = pvalues(shifts)
        return 2.0 * greater <= alpha

    def rejects_above(shifts: Any) -> Any:
        less, _greater = pvalues(shifts)
        return 2.0 * less <= alpha

    low = _crossing(rejects_below, float(data.min()) - span, mean, rejected_first=True)
    high = _crossing(rejects_above, mean, float(data.max()) + span, rejected_first=False)
    # The kept set is closed where shifting makes a value exactly zero (a zero carries no
    # sign), and the grid approaches such an end from inside: zero itself decides, so its
    # side is taken from the test of the data as they are.
    less, greater = pvalues(np.zeros(1))  # the test of the data (sign_flip_test)
    if 2.0 * min(float(less[0]), float(greater[0])) > alpha:
        low, high = min(low, 0.0), max(high, 0.0)
    elif low <= 0.0 <= high:
        low, high = (low, min(high, -1e-12)) if mean < 0 else (max(low, 1e-12), high)
    if bounds is not None:
        low, high = max(bounds[0], low), min(bounds[1], high)
    return low, high


def _crossing(rejects: Any, start: float, stop: float, *, rejected_first: bool) -> float:
    """The shift in ``[start, stop]`` where ``rejects`` turns from true to false
    (``rejected_first``) or from false to true; the end of the kept side."""
    import numpy as np

    for _ in range(_ROUNDS):
        grid = np.linspace(start, stop, _GRID + 1)
        flags = rejects(grid)
        if rejected_first:
            kept = np.flatnonzero(~flags)
            if not len(kept):
                return stop
            first = int(kept[0])
            if first == 0:
                return start
            start, stop = float(grid[first - 1]), float(grid[first])
        else:
            hit = np.flatnonzero(flags)
            if not len(hit):
                return stop
            first = int(hit[0])
            if first == 0:
                return start
            start, stop = float(grid[first - 1]), float(grid[first])
    return stop if rejected_first else start
