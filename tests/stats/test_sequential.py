"""The anytime-valid sequential sign test: formula, decisions, and its error rate under
monitoring after every round (seeded, vectorised simulations)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import special, stats

from tests.stats.simulate import JUDGES, judged_scores, upper_bound
from vally_compare.statistics import sequential

REPS = 2_000
ROUNDS = 10
SIZES = (2, 3, 5, 10, 30)
THRESHOLD = math.log(1 / sequential.ALPHA)


def test_e_value_is_the_beta_binomial_mixture() -> None:
    for wins, losses in [(0, 0), (3, 0), (7, 2), (20, 18), (0, 9)]:
        expected = (
            special.betaln(1 + wins, 1 + losses)
            - special.betaln(1, 1)
            + (wins + losses) * math.log(2)
        )
        assert sequential.log_e_value(wins, losses) == pytest.approx(expected)
    # uniform prior: E = 2^t * W! L! / (t + 1)!; 10 straight wins give 1024 / 11
    assert math.exp(sequential.log_e_value(10, 0)) == pytest.approx(1024 / 11)


def test_decides_stops_for_futility_and_keeps_the_always_valid_p() -> None:
    state = sequential.SequentialState()
    state = sequential.observe(state, [1, 1, 1, 0], remaining=20)
    assert state.status == "running" and (state.wins, state.ties) == (3, 1)
    state = sequential.observe(state, [1] * 4, remaining=16)
    assert state.status == "running"  # E = 2^7 / 8 = 16 < 20
    state = sequential.observe(state, [1], remaining=15)
    assert state.status == "better"  # 2^8 / 9 = 28.4 >= 20
    assert state.p_value == pytest.approx(9 / 256)
    assert sequential.observe(state, [-1] * 10, remaining=0) is state  # stopped stays stopped
    futile = sequential.observe(sequential.SequentialState(), [1, -1, 1, -1], remaining=2)
    assert futile.status == "futile"
    spent = sequential.observe(sequential.SequentialState(), [1, -1], remaining=0)
    assert spent.status == "budget"


def _signs(rng: np.random.Generator, judge: str, n: int, effect: float = 0.0) -> np.ndarray:
    """(reps, rounds, n) signs of pair scores: one pair per stimulus per round."""
    return np.sign(judged_scores(rng, JUDGES[judge], (REPS, ROUNDS, n), effect)).astype(int)


def _monitor(signs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Vectorised monitoring after every round: (decision per rep, rounds used per rep).
    Decision +1/-1 when E reached 1/alpha, else 0 (futility and budget never reject)."""
    wins = np.cumsum((signs > 0).sum(axis=2), axis=1)
    losses = np.cumsum((signs < 0).sum(axis=2), axis=1)
    log_e = (
        special.betaln(1 + wins, 1 + losses) - special.betaln(1, 1) + (wins + losses) * np.log(2)
    )
    hit = log_e >= THRESHOLD
    decided = hit.any(axis=1)
    first = np.where(decided, hit.argmax(axis=1), ROUNDS - 1)
    rows = np.arange(len(signs))
    direction = np.sign(wins[rows, first] - losses[rows, first])
    return np.where(decided, direction, 0), first + 1


def test_vectorised_monitoring_matches_observe() -> None:
    rng = np.random.default_rng(2)
    signs = _signs(rng, "only-slightly", 5, effect=0.6)[:200]
    decisions, used = _monitor(signs)
    per_round = signs.shape[2]
    for row, decision, rounds in zip(signs, decisions, used, strict=True):
        state = sequential.SequentialState()
        for index, round_signs in enumerate(row):
            remaining = (ROUNDS - index - 1) * per_round
            state = sequential.observe(state, round_signs.tolist(), remaining=remaining)
            if state.status in ("better", "worse"):
                break
        expected = {"better": 1, "worse": -1}.get(state.status, 0)
        assert expected == decision
        if expected:
            assert state.rounds == rounds


@pytest.mark.parametrize("judge", sorted(JUDGES))
def test_monitoring_after_every_round_holds_the_level(judge: str) -> None:
    rng = np.random.default_rng(21)
    for n in SIZES:
        decisions, _ = _monitor(_signs(rng, judge, n))
        labels = float((decisions != 0).mean())
        gate = float((decisions < 0).mean())
        assert labels <= upper_bound(REPS, sequential.ALPHA), (judge, n, labels)
        assert gate <= upper_bound(REPS, sequential.ALPHA / 2), (judge, n, gate)


def test_a_fixed_sample_test_repeated_every_round_does_not_hold_it() -> None:
    # The reason for the e-process: the fixed-sample sign test on the wins and losses so far,
    # repeated after each round of an A/A run of 30 stimuli, rejects more often than 5%.
    rng = np.random.default_rng(4)
    signs = _signs(rng, "only-slightly", 30)
    wins = np.cumsum((signs > 0).sum(axis=2), axis=1)
    losses = np.cumsum((signs < 0).sum(axis=2), axis=1)
    p = np.minimum(1.0, 2 * stats.binom.cdf(np.minimum(wins, losses), wins + losses, 0.5))
    assert float((p <= 0.05).any(axis=1).mean()) > upper_bound(REPS, 0.05)


def test_a_real_difference_stops_early() -> None:
    rng = np.random.default_rng(9)
    decisions, used = _monitor(_signs(rng, "only-slightly", 10, effect=1.0))
    assert float((decisions > 0).mean()) >= 0.9
    assert float(used.mean()) <= ROUNDS / 2  # half the budget or less on average
