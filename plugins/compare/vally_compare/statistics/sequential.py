"""An anytime-valid sequential sign test: decide as soon as the data allow, at any stop.

Each paired observation (one stimulus in one round: treatment against baseline) is a win,
a loss or a tie for the treatment. Under the null hypothesis that the two sides are
exchangeable, a non-tied observation is a win with probability 1/2 whatever came before.
The mixture of the likelihood ratios of every win probability p under a Beta(a, a) prior,

    E_t = B(a + W_t, a + L_t) / B(a, a) * 2^(W_t + L_t),

(W_t wins and L_t losses so far, B the beta function) is then a nonnegative martingale with
E_0 = 1 under the null, and Ville's inequality gives ``P(sup_t E_t >= 1/alpha) <= alpha``:
rejecting the first time E_t reaches 1/alpha keeps the false-positive rate at alpha however
often the data are looked at and whenever the experiment stops. ``1 / max_{s <= t} E_s`` is
the matching always-valid p-value. Ties carry no information about the sign and are skipped.

A variant also stops early for *futility* when even an unbroken run of wins or losses over
the remaining budget could not reach 1/alpha (log E_t is convex in W_t, so the extremes
bound it); stopping to accept never raises the false-positive rate.

Sources: H. Robbins, "Statistical methods related to the law of the iterated logarithm",
Annals of Mathematical Statistics 41 (1970); A. Ramdas, P. Grunwald, V. Vovk and G. Shafer,
"Game-theoretic statistics and safe anytime-valid inference", Statistical Science 38 (2023);
J. Ville, *Etude critique de la notion de collectif* (1939).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Literal

ALPHA = 0.05
PRIOR = 1.0
"""The a of the Beta(a, a) mixing prior (uniform on the win probability)."""

Status = Literal["running", "better", "worse", "futile", "budget"]


def log_e_value(wins: int, losses: int, prior: float = PRIOR) -> float:
    """log E_t for ``wins`` and ``losses`` (see the module docstring)."""
    return (
        _log_beta(prior + wins, prior + losses)
        - _log_beta(prior, prior)
        + (wins + losses) * math.log(2.0)
    )


def _log_beta(x: float, y: float) -> float:
    return math.lgamma(x) + math.lgamma(y) - math.lgamma(x + y)


@dataclass(frozen=True)
class SequentialState:
    """The monitoring state of one treatment.

    Attributes:
        wins: Non-tied observations won by the treatment so far.
        losses: Non-tied observations lost.
        ties: Tied observations (skipped by the test).
        rounds: Rounds observed.
        max_log_e: The largest log E_t seen (the always-valid p-value is its inverse).
        status: ``running``; ``better``/``worse`` once decided; ``futile`` when the budget
            cannot decide any more; ``budget`` when the budget ran out undecided.
    """

    wins: int = 0
    losses: int = 0
    ties: int = 0
    rounds: int = 0
    max_log_e: float = 0.0
    status: Status = "running"

    @property
    def e_value(self) -> float:
        """E_t now."""
        return math.exp(log_e_value(self.wins, self.losses))

    @property
    def p_value(self) -> float:
        """The always-valid p-value, ``min(1, 1 / max_s E_s)``."""
        return min(1.0, math.exp(-self.max_log_e))

    @property
    def stopped(self) -> bool:
        """True once the treatment needs no more rounds."""
        return self.status != "running"


def observe(
    state: SequentialState,
    signs: Iterable[int],
    *,
    remaining: int,
    alpha: float = ALPHA,
) -> SequentialState:
    """The state after one round's signs (+1 win, -1 loss, 0 tie).

    Args:
        state: The state before the round.
        signs: One sign per paired observation of the round.
        remaining: Observations the budget still allows after this round (for futility).
        alpha: The level.
    """
    if state.stopped:
        return state
    wins, losses, ties = state.wins, state.losses, state.ties
    for sign in signs:
        wins += sign > 0
        losses += sign < 0
        ties += sign == 0
    log_e = log_e_value(wins, losses)
    new = replace(
        state,
        wins=wins,
        losses=losses,
        ties=ties,
        rounds=state.rounds + 1,
        max_log_e=max(state.max_log_e, log_e),
    )
    threshold = math.log(1.0 / alpha)
    if log_e >= threshold:
        return replace(new, status="better" if wins > losses else "worse")
    best = max(log_e_value(wins + remaining, losses), log_e_value(wins, losses + remaining))
    if best < threshold:
        return replace(new, status="futile" if remaining else "budget")
    return new
