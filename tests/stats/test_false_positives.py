"""A/A simulations: the regression gate and the labels hold their error rate at every size.

Baseline and treatment are the same agent, so every gate that fires and every label other
than "no detectable difference" is a false positive. Each configuration is simulated 2,000
times with a fixed seed; the observed rate must not exceed the 99.9% binomial quantile of
the nominal rate (a level-alpha test stays below it with probability 0.999). The exact
test is conservative with few distinct values (at 2 to 5 stimuli it cannot reject at all),
so the rates are bounded above; where the values vary enough, they are also checked not to
waste the level (above the lower quantile).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from tests.compare.records import record
from tests.stats.simulate import (
    JUDGES,
    combine,
    holm_rows,
    judged_scores,
    lower_bound,
    two_sided,
    upper_bound,
)
from vally.contracts.protocols import PairwiseVerdict
from vally_compare import judged as compare, judged_pairs
from vally_compare.pass_rates import pass_rate_deltas, stimulus_pass_rates

REPS = 2_000
SIZES = (2, 3, 5, 10, 30)
GATE = 0.025
"""One-sided level of --fail-on-regression."""
LABEL = 0.05
"""Two-sided level of a label (better or worse)."""


def test_vectorised_combine_is_compare_combine() -> None:
    letters = ("A", "B", "tie")
    for (w1, m1), (w2, m2) in itertools.product(
        itertools.product(range(3), (True, False)), repeat=2
    ):
        first = PairwiseVerdict(letters[w1], "much" if m1 else "slightly")  # type: ignore[arg-type]
        second = PairwiseVerdict(letters[w2], "much" if m2 else "slightly")  # type: ignore[arg-type]
        expected, _ = judged_pairs.combine(first, second)
        got = combine(np.array(w1), np.array(m1), np.array(w2), np.array(m2))
        assert float(got) == expected


@pytest.mark.parametrize("judge", sorted(JUDGES))
def test_gate_and_labels_hold_their_level_at_every_size(judge: str) -> None:
    rng = np.random.default_rng(16)
    for n in SIZES:
        runs = 1 if n in (2, 10) else 2
        scores = judged_scores(rng, JUDGES[judge], (REPS, n, runs)).mean(axis=2)
        p, mean = two_sided(scores), scores.mean(axis=1)
        gate = float(((p <= LABEL) & (mean < 0)).mean())
        labels = float((p <= LABEL).mean())
        assert gate <= upper_bound(REPS, GATE), (judge, n, gate)
        assert labels <= upper_bound(REPS, LABEL), (judge, n, labels)
        if n <= 5:
            assert labels == 0.0  # 2 / 2^5 > 0.05: nothing can be declared


def test_level_is_used_when_values_vary() -> None:
    # A judge whose per-stimulus means take many values (three runs, both magnitudes):
    # the exact test is then close to its nominal rate, not merely below it.
    rng = np.random.default_rng(7)
    noisy = JUDGES["random"]
    scores = judged_scores(rng, noisy, (REPS, 30, 3)).mean(axis=2)
    p = two_sided(scores)
    rate = float((p <= LABEL).mean())
    assert lower_bound(REPS, LABEL) <= rate <= upper_bound(REPS, LABEL), rate


def _shared_baseline_scores(rng: np.random.Generator, treatments: int, n: int) -> np.ndarray:
    """(reps, treatments, n) pair scores where every treatment shares one baseline run."""
    base = rng.normal(0.0, 1.0, (REPS, 1, n))
    latent = rng.normal(0.0, 1.0, (REPS, treatments, n)) - base
    judge = JUDGES["only-slightly"]
    first, first_much = judge(rng, latent.shape, latent, first=True)
    second, second_much = judge(rng, latent.shape, latent, first=False)
    return combine(first, first_much, second, second_much)


@pytest.mark.parametrize("treatments", [3, 5])
def test_holm_holds_the_family_rate_across_treatments(treatments: int) -> None:
    rng = np.random.default_rng(treatments)
    scores = _shared_baseline_scores(rng, treatments, 30)
    p = two_sided(scores.reshape(-1, 30)).reshape(REPS, treatments)
    adjusted = holm_rows(p)
    mean = scores.mean(axis=2)
    any_label = float((adjusted <= LABEL).any(axis=1).mean())
    any_gate = float(((adjusted <= LABEL) & (mean < 0)).any(axis=1).mean())
    assert any_label <= upper_bound(REPS, LABEL), any_label
    assert any_gate <= upper_bound(REPS, GATE), any_gate
    unadjusted = float((p <= LABEL).any(axis=1).mean())
    assert unadjusted > upper_bound(REPS, LABEL)  # without Holm the family rate is exceeded


def test_holm_holds_the_family_rate_across_metrics() -> None:
    rng = np.random.default_rng(5)
    n, runs = 10, 2
    # Five metrics of one trial are correlated (a long trial has more tokens, turns, calls).
    stimulus = rng.lognormal(0.0, 0.5, (REPS, n, 1, 1))
    length = stimulus * rng.lognormal(0.0, 0.3, (REPS, n, runs, 2))
    metrics = np.stack(
        [
            1000 * length,
            rng.poisson(3 * length),
            rng.poisson(5 * length),
            2000 * length * rng.lognormal(0.0, 0.2, length.shape),
            rng.poisson(0.3, length.shape),
        ],
        axis=-1,
    ).astype(float)
    deltas = (metrics[:, :, :, 1, :] - metrics[:, :, :, 0, :]).mean(axis=2)  # (reps, n, 5)
    p = two_sided(np.moveaxis(deltas, 2, 1).reshape(-1, n)).reshape(REPS, 5)
    any_adjusted = float((holm_rows(p) <= LABEL).any(axis=1).mean())
    assert any_adjusted <= upper_bound(REPS, LABEL), any_adjusted
    assert float((p <= LABEL).any(axis=1).mean()) > upper_bound(REPS, LABEL)


def _pass_rate_differences(rng: np.random.Generator, n: int, trials: int) -> np.ndarray:
    """(reps, n) per-stimulus pass-rate differences of an A/A run with errored trials left
    out (a stimulus left with no graded trial on a side contributes a 0 difference-free
    zero: the sign-flip statistic ignores it)."""
    difficulty = rng.beta(1.0, 1.0, (REPS, n, 1, 1))
    passed = rng.random((REPS, n, trials, 2)) < difficulty
    graded = rng.random((REPS, n, trials, 2)) >= 0.1  # 10% of trials error
    counts = graded.sum(axis=2)
    rates = np.where(counts > 0, (passed & graded).sum(axis=2) / np.maximum(counts, 1), np.nan)
    diff = rates[:, :, 1] - rates[:, :, 0]
    return np.nan_to_num(diff, nan=0.0)


def test_pass_rate_labels_hold_their_level_at_every_size() -> None:
    rng = np.random.default_rng(11)
    for n in SIZES:
        diff = _pass_rate_differences(rng, n, 3)
        rate = float((two_sided(diff) <= LABEL).mean())
        assert rate <= upper_bound(REPS, LABEL), (n, rate)


def test_the_simulated_decision_is_the_products_decision() -> None:
    """A sample of simulated runs gives the same decision through vally's own code."""
    rng = np.random.default_rng(3)
    scores = judged_scores(rng, JUDGES["random"], (40, 8, 1))[:, :, 0]
    scores[:10] = -np.abs(scores[:10]) - 0.4  # some runs where the gate must fire
    gate = (two_sided(scores) <= LABEL) & (scores.mean(axis=1) < 0)
    for row, expected in zip(scores, gate, strict=True):
        results = []
        for i, score in enumerate(row):
            pair = compare.Pair(("ev", f"s{i}", 0), record(f"s{i}"), record(f"s{i}"))
            results.append(compare.PairResult(pair, float(score), judged_pairs.score_label(score)))
        pairing = compare.Pairing([r.pair for r in results], [], [])
        summary = compare.summarize("b", "t", pairing, results, "judge")
        assert summary.significant_regression == bool(expected)
    # pass rates through the reporters' public functions
    diff_rows = _pass_rate_differences(rng, 8, 1)[:20]
    for row in diff_rows:
        base = [record(f"s{i}", passed=d < 0) for i, d in enumerate(row)]
        treat = [record(f"s{i}", passed=d > 0) for i, d in enumerate(row)]
        estimate = pass_rate_deltas(stimulus_pass_rates(base), {"t": stimulus_pass_rates(treat)})
        assert estimate["t"].significant() == bool(two_sided(row[None, :])[0] <= LABEL)
