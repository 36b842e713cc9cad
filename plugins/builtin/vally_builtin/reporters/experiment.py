"""The comparison of an experiment's variants with the baseline: shown on the console and
in the experiment report (:mod:`vally_builtin.reporters.experiment_report`) for experiment
runs and merges.

Comparison rules (shared by the console and the report):

* only variants with observed results are shown;
* when the baseline did not run, or variants observed different stimuli, the comparison is
  *unavailable* and no deltas are shown;
* pass rates are compared per stimulus (errored trials left out): a variant is labelled
  ``better`` or ``regression`` only when the sign-flip test over stimuli rejects at 5%
  (Holm-adjusted across the variants), otherwise ``no detectable difference`` with the
  smallest difference the run could have detected; the headline says "Tie" when every
  variant's per-stimulus pass rates equal the baseline's;
* a sharded run shows observed counts only, labelled partial with the shard index and total,
  without winners or deltas.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from vally import TrialFacts, TrialResultRecord
from vally_builtin.reporters import markdown_text

if TYPE_CHECKING:  # the statistics are imported when a figure needs them, not at start-up
    from vally_compare import Estimate

_EPSILON = 1e-9
NO_DIFFERENCE = "no detectable difference"
EVIDENCE_LIMIT = 300
"""Characters of grader evidence shown per failed grader in the report."""


@dataclass(frozen=True)
class VariantStats:
    """Observed counts of one variant."""

    name: str
    trials: int
    graded: int
    passed: int
    failed: int
    errored: int
    stimuli: frozenset[tuple[str, str, str | None]]
    """(eval, stimulus, model) observed."""
    rates: Mapping[tuple[str, str, str | None], float] = field(default_factory=dict)
    """Pass rate per stimulus over its graded trials (errored trials left out)."""

    @property
    def pass_rate(self) -> float | None:
        """Mean of the per-stimulus pass rates, None when nothing was graded."""
        from vally_compare import mean_rate

        return mean_rate(self.rates)


@dataclass(frozen=True)
class Comparison:
    """The comparison of observed variants with the baseline."""

    variants: tuple[VariantStats, ...]
    baseline: str
    available: bool
    reason: str | None
    partial: str | None
    """``i/n`` for a sharded run, else None."""
    deltas: Mapping[str, float | None]
    labels: Mapping[str, str]
    """``better``, ``regression``, ``no detectable difference`` or ``n/a`` per non-baseline
    variant."""
    headline: str
    estimates: Mapping[str, Estimate] = field(default_factory=dict)
    """The tested per-stimulus pass-rate difference per non-baseline variant."""

    def result_text(self, name: str) -> str:
        """The Result cell of a non-baseline variant."""
        label = self.labels.get(name, "n/a")
        if label != NO_DIFFERENCE:
            return label
        estimate = self.estimates.get(name)
        if estimate is None or estimate.mde is None:
            return f"{label} (too few stimuli to detect any)"
        return f"{label} (smallest detectable: ±{estimate.mde * 100:.1f} pts)"


Stimulus = tuple[str, str, str | None]
"""An observed stimulus: (eval, stimulus, model)."""


class VariantCounter:
    """The counters of one variant, fed one record at a time: per stimulus, not per trial."""

    def __init__(self) -> None:
        self.trials = self.graded = self.passed = self.errored = 0
        self.counts: dict[Stimulus, list[Any]] = {}
        """Each observed stimulus's passed and graded trials, and where its first graded
        trial came (None until one was graded; the order of the per-stimulus rates): one
        entry, found with one lookup a trial."""

    def add(self, record: TrialResultRecord, order: tuple[int, int] | None = None) -> None:
        """Count one record of the variant.

        Args:
            record: The record.
            order: Where the record comes in the order the per-stimulus rates follow (its
                place in the plan, then in the input); default: the order records are fed.
        """
        self.add_facts(TrialFacts.of_record(record), order)

    def add_facts(self, facts: TrialFacts, order: tuple[int, int] | None = None) -> None:
        """Count one trial of the variant from its facts (see :meth:`add`)."""
        key = (facts.eval_name, facts.stimulus_name, facts.model)
        counts = self.counts.get(key)
        if counts is None:
            counts = self.counts[key] = [0, 0, None]
        position = order if order is not None else (0, self.trials)
        self.trials += 1
        if facts.status != "success" or not facts.graded or facts.grade_errored:
            self.errored += 1  # TrialFacts.errored, without the call
            return
        if not facts.has_graders:  # graded: not errored, with graders
            return
        passed = 1 if facts.passed else 0
        self.graded += 1
        self.passed += passed
        counts[0] += passed
        counts[1] += 1
        first = counts[2]
        if first is None or position < first:
            counts[2] = position

    def state(self) -> dict[str, Any]:
        """The counters as JSON data, which :meth:`absorb` adds to another counter."""
        return {
            "trials": self.trials,
            "graded": self.graded,
            "passed": self.passed,
            "errored": self.errored,
            "stimuli": [list(key) for key in self.counts],
            "rated": [
                [*key, passed, graded, *first]
                for key, (passed, graded, first) in self.counts.items()
                if graded
            ],
        }

    def absorb(self, state: Mapping[str, Any], shift: int = 0) -> None:
        """Add another counter (its :meth:`state`), as if its records were added here.

        Args:
            state: The other counter's state.
            shift: Added to the second part of its records' orders (how many records came
                before its first one), so orders stay those of one pass over every record.
        """
        self.trials += int(state["trials"])
        self.graded += int(state["graded"])
        self.passed += int(state["passed"])
        self.errored += int(state["errored"])
        for eval_name, stimulus, model in state["stimuli"]:
            self.counts.setdefault((str(eval_name), str(stimulus), model), [0, 0, None])
        for eval_name, stimulus, model, passed, graded, place, at in state["rated"]:
            counts = self.counts.setdefault((str(eval_name), str(stimulus), model), [0, 0, None])
            counts[0] += int(passed)
            counts[1] += int(graded)
            order = (int(place), int(at) + shift)
            if counts[2] is None or order < counts[2]:
                counts[2] = order

    def stats(self, name: str) -> VariantStats:
        """The variant's observed counts; its per-stimulus rates ordered by where each
        stimulus's first graded trial came."""
        rated = [
            (first, key, passed / graded)
            for key, (passed, graded, first) in self.counts.items()
            if graded
        ]
        rated.sort(key=lambda item: item[0])
        return VariantStats(
            name=name,
            trials=self.trials,
            graded=self.graded,
            passed=self.passed,
            failed=self.graded - self.passed,
            errored=self.errored,
            stimuli=frozenset(self.counts),
            rates={key: rate for _first, key, rate in rated},
        )


def variant_stats(
    variants: Sequence[str], records: Iterable[TrialResultRecord]
) -> list[VariantStats]:
    """Counts per variant, in ``variants`` order, for variants with at least one record
    (one pass over ``records``; memory grows with the stimuli, not the trials)."""
    counters = {name: VariantCounter() for name in variants}
    for record in records:
        counter = counters.get(record.variant or "")
        if counter is not None:
            counter.add(record)
    return observed_stats(counters, variants)


def observed_stats(
    counters: Mapping[str, VariantCounter], variants: Iterable[str]
) -> list[VariantStats]:
    """The counts of each of ``variants`` (in that order) whose counter took a record."""
    return [
        counters[name].stats(name)
        for name in variants
        if name in counters and counters[name].trials
    ]


def compare_variants(
    variants: Sequence[str],
    baseline: str,
    records: Iterable[TrialResultRecord],
    *,
    shard: str | None = None,
) -> Comparison:
    """Apply the comparison rules (see the module docstring)."""
    return compare_stats(variant_stats(variants, records), baseline, shard=shard)


def compare_stats(
    observed: Sequence[VariantStats], baseline: str, *, shard: str | None = None
) -> Comparison:
    """Apply the comparison rules (see the module docstring) to counted variants (those
    with records, in the experiment's order)."""
    stats = tuple(observed)
    names = [s.name for s in stats]
    deltas: dict[str, float | None] = {}
    labels: dict[str, str] = {}
    if shard is not None:
        index, _, total = shard.partition("/")
        headline = (
            f"Partial results (shard {index} of {total}): observed counts only, no winner. "
            "Run 'vally experiment merge' for the full comparison."
        )
        return Comparison(stats, baseline, False, "partial", shard, deltas, labels, headline)
    if not stats:
        return Comparison(
            stats,
            baseline,
            False,
            "no results",
            None,
            deltas,
            labels,
            "Comparison unavailable: no variant produced results.",
        )
    if baseline not in names:
        return Comparison(
            stats,
            baseline,
            False,
            "baseline missing",
            None,
            deltas,
            labels,
            f"Comparison unavailable: the baseline variant '{baseline}' did not run.",
        )
    if len(stats) == 1:
        return Comparison(
            stats,
            baseline,
            False,
            "single variant",
            None,
            deltas,
            labels,
            "Comparison unavailable: only the baseline variant ran.",
        )
    if len({s.stimuli for s in stats}) > 1:
        return Comparison(
            stats,
            baseline,
            False,
            "different stimuli",
            None,
            deltas,
            labels,
            "Comparison unavailable: variants observed different stimuli.",
        )
    base = next(s for s in stats if s.name == baseline)
    rated = {s.name: s.rates for s in stats if s.name != baseline and s.rates}
    from vally_compare import pass_rate_deltas

    estimates = pass_rate_deltas(base.rates, rated) if base.rates else {}
    for item in stats:
        if item.name == baseline:
            continue
        estimate = estimates.get(item.name)
        if estimate is None or estimate.mean is None:
            deltas[item.name] = None
            labels[item.name] = "n/a"
            continue
        deltas[item.name] = estimate.mean
        direction = estimate.direction
        labels[item.name] = (
            "better" if direction > 0 else "regression" if direction < 0 else NO_DIFFERENCE
        )
    headline = _headline(stats, base, labels, estimates)
    return Comparison(stats, baseline, True, None, None, deltas, labels, headline, estimates)


def _headline(
    stats: Sequence[VariantStats],
    base: VariantStats,
    labels: Mapping[str, str],
    estimates: Mapping[str, Estimate],
) -> str:
    """The one-line verdict under the table."""
    same = all(s.rates == base.rates for s in stats)
    if labels and same and all(v != "n/a" for v in labels.values()):
        return "Tie: every variant matches the baseline."
    better = [n for n, v in labels.items() if v == "better"]
    worse = [n for n, v in labels.items() if v == "regression"]
    unclear = [n for n, v in labels.items() if v == NO_DIFFERENCE]
    parts = []
    if better:
        parts.append("better than the baseline: " + ", ".join(better))
    if worse:
        parts.append("regression: " + ", ".join(worse))
    if unclear:
        parts.append(f"{NO_DIFFERENCE} from the baseline: " + ", ".join(unclear))
    if not parts:
        parts.append("no graded trials to compare")
    text = "; ".join(parts)
    headline = text[0].upper() + text[1:] + "."
    if better:
        top = max(estimates[n].mean or 0.0 for n in better)
        leaders = [n for n in better if abs((estimates[n].mean or 0.0) - top) < _EPSILON]
        if len(leaders) == 1:
            headline += f" Best: {leaders[0]}."
    return headline


def pct(value: float | None) -> str:
    """A rate as a percentage with one decimal (``87.5%``), or ``n/a``."""
    return "n/a" if value is None else f"{value * 100:.1f}%"


def cell(text: str) -> str:
    """``text`` as one Markdown table cell or list line (one line, pipes escaped)."""
    return markdown_text(text).replace("|", "\\|").replace("\n", " ").strip()


def comparison_table(comparison: Comparison) -> list[str]:
    """The comparison as plain-text lines for the console."""
    lines: list[str] = []
    title = "Experiment results"
    if comparison.partial:
        title += f" (partial: shard {comparison.partial.replace('/', ' of ')})"
    lines.append(title)
    width = max([len(s.name) + 11 for s in comparison.variants] + [8])
    header = f"  {'Variant':<{width}}  {'Trials':>6}  {'Passed':>6}  {'Failed':>6}  "
    header += f"{'Errored':>7}  {'Pass rate':>9}"
    show_delta = comparison.available
    if show_delta:
        header += f"  {'Δ vs baseline':>13}  Result"
    lines.append(header)
    for s in comparison.variants:
        name = s.name + (" (baseline)" if s.name == comparison.baseline else "")
        row = (
            f"  {name:<{width}}  {s.trials:>6}  {s.passed:>6}  {s.failed:>6}  {s.errored:>7}  "
            f"{pct(s.pass_rate):>9}"
        )
        if show_delta:
            if s.name == comparison.baseline:
                row += f"  {'—':>13}  baseline"
            else:
                delta = comparison.deltas.get(s.name)
                text = "n/a" if delta is None else f"{delta * 100:+.1f} pts"
                row += f"  {text:>13}  {comparison.result_text(s.name)}"
        lines.append(row)
    lines.append(comparison.headline)
    return lines
