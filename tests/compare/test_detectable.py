"""The smallest detectable difference never lies beyond the scale: where not even the
largest possible difference would be detected with 80% power, or the stimuli are too few
for the test to reach 0.05, no figure is given and the text says it is not detectable."""

from __future__ import annotations

import pytest

from tests.compare.records import record
from vally.models import TrialResultRecord
from vally_builtin.reporters.experiment import compare_variants
from vally_compare import pass_rate_deltas, stimulus_pass_rates
from vally_compare.judged_text import mde_text
from vally_compare.statistics import estimates


def _run(variant: str, outcomes: list[bool]) -> list[TrialResultRecord]:
    return [
        record(f"s{i}", passed=passed).model_copy(update={"variant": variant})
        for i, passed in enumerate(outcomes)
    ]


def _delta(base: list[bool], treat: list[bool]):  # type: ignore[no-untyped-def]
    rates = stimulus_pass_rates(_run("t", treat))
    return pass_rate_deltas(stimulus_pass_rates(_run("b", base)), {"t": rates})["t"]


def test_a_figure_beyond_the_scale_is_not_given() -> None:
    """Six stimuli that flip both ways: the formula gives 1.56 (156 points on a 0-100
    scale), more than the largest possible difference."""
    base = [True, False] * 3
    treat = [False, True] * 3
    estimate = _delta(base, treat)
    assert estimate.n_stimuli == 6 and estimate.mde is None
    assert mde_text(estimate) == (
        "not detectable at this n: with 6 stimuli this spread hides even the largest "
        "possible difference"
    )
    records = _run("base", base) + _run("t1", treat)
    shown = compare_variants(["base", "t1"], "base", records).result_text("t1")
    assert "pts" not in shown and shown.startswith("no detectable difference (")


@pytest.mark.parametrize("n", [1, 2])
def test_one_or_two_stimuli_detect_nothing(n: int) -> None:
    estimate = _delta([True] * n, [False] * n)
    assert estimate.n_stimuli == n and estimate.mde is None
    assert mde_text(estimate) == "not detectable at this n: fewer than 6 stimuli"


def test_all_ties_give_a_figure_on_the_scale() -> None:
    """Every stimulus tied: the padded spread gives a finite, non-zero figure within the
    scale (never 0, which would claim any difference is detectable)."""
    estimate = _delta([True] * 8, [True] * 8)
    assert estimate.mean == 0.0
    assert estimate.mde is not None and 0 < estimate.mde <= 1
    assert mde_text(estimate) == f"smallest detectable at 80% power: ±{estimate.mde:.2f}"


def test_unbounded_figures_are_never_cut() -> None:
    """Metric deltas have no scale to exceed: their figure is the formula's."""
    values = [(f"s{i}", float(v)) for i, v in enumerate([-300, 300] * 3)]
    assert (estimates.tested_mean(values).mde or 0) > 300
    assert estimates.tested_mean(values, estimates.SCORE_BOUNDS).mde is None
