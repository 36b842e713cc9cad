"""The experiment report's figures, counted in one pass over the records: a few counters
per variant and stimulus, never a list of every trial.

:class:`ExperimentAggregate` takes the records in any order (a run's results files read
back, a merge's records, or their facts: :class:`vally.TrialFacts`, which a merge reads of
each line) and keeps what ``report.md`` of an experiment shows: each
variant's counts and per-stimulus pass rates (for the comparison with the baseline), the
token and cost totals, and per report row (variant, eval, stimulus, model) the first
:data:`~vally_builtin.reporters.aggregate.FAILURES_KEPT` trials with failed graders or
errors, by place in the plan, as the lines the report prints, and how many more.

The report lists records in plan order. Rather than sorting them, each record gets its
place in the plan from :class:`PlanPlaces`, and what depends on the order (the order of
the per-stimulus rates, which pairs the sign-flip test draws, and the failure lines) is
ordered by it, so the figures are those of the records sorted by plan.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from vally import TrialFacts, TrialResultRecord
from vally_builtin.reporters.aggregate import admits, keep
from vally_builtin.reporters.cost import CostTotals
from vally_builtin.reporters.experiment import (
    EVIDENCE_LIMIT,
    VariantCounter,
    VariantStats,
    cell,
    observed_stats,
)

Order = tuple[int, int]
"""Where a record comes: its place in the plan (the plan's length when it is not planned),
then its place in the input."""


def _row_id(facts: TrialFacts) -> str:
    """The plan key of a trial without its trial index: ``variant/eval/stimulus/model``."""
    model = facts.model or "default"
    return f"{facts.variant}/{facts.eval_name}/{facts.stimulus_name}/{model}"


class PlanPlaces:
    """Each planned trial's place in the plan, from the plan snapshot's keys
    (``variant/eval/stimulus/model/trial``, in plan order), held per report row.

    A plan lists each row's trials by trial index at even steps (together, or one trial of
    every row in turn), so a trial's place is its row's first place plus its index times
    the row's step: the map holds one entry per row, not per trial. A plan laid out
    otherwise is mapped key by key.

    Args:
        keys: The planned keys, in plan order (the snapshot's ``trials``).
    """

    def __init__(self, keys: Sequence[str]) -> None:
        self.size = len(keys)
        self._planned: Sequence[str] | None = keys
        """The keys until the first :meth:`place` maps them (a report added up from
        sealed shards places no record, so it never pays for the map)."""
        self.rows: dict[str, list[int]] = {}
        """Row -> [its first place, its number of trials, the step between its places]."""
        self.keys: dict[str, int] | None = None
        """Key -> place, for a plan whose rows are not laid out at even steps."""

    def _map(self, keys: Sequence[str]) -> None:
        """Fill :attr:`rows`, or :attr:`keys` when the rows are not at even steps."""
        for place, key in enumerate(map(str, keys)):
            row, _, index = key.rpartition("/")
            span = self.rows.get(row)
            if span is None:
                span = self.rows[row] = [place, 0, 0]
            start, count, step = span
            if count == 1:
                step = span[2] = place - start
            if start + count * step != place or index != str(count):
                self.rows = {}
                self.keys = {str(key): place for place, key in enumerate(keys)}
                return
            span[1] = count + 1

    def place(self, record: TrialResultRecord | TrialFacts) -> int | None:
        """The place in the plan of a trial (its record or facts), or None when the plan
        does not hold it."""
        facts = TrialFacts.of_record(record) if isinstance(record, TrialResultRecord) else record
        if self._planned is not None:
            keys, self._planned = self._planned, None
            self._map(keys)
        row = _row_id(facts)
        index = facts.trial_index
        if self.keys is not None:
            return self.keys.get(f"{row}/{index}")
        span = self.rows.get(row)
        if span is None or not 0 <= index < span[1]:
            return None
        return span[0] + index * span[2]


def problem_lines(record: TrialResultRecord | TrialFacts) -> list[str]:
    """The report's lines for a trial (its record or facts): its error, else each failed
    grader with its evidence (none when nothing failed)."""
    facts = TrialFacts.of_record(record) if isinstance(record, TrialResultRecord) else record
    error = facts.error
    failed = [detail for detail in facts.failed_graders if not detail.passed]
    if error is None and not failed:
        return []
    where = f"`{facts.stimulus_name}` trial {facts.trial_index}"
    if facts.model:
        where += f" ({facts.model})"
    if error is not None:
        message = cell(error.message[:EVIDENCE_LIMIT])
        return [f"- {where}: error in {error.phase}: {message}"]
    return [
        f"- {where}: {cell(detail.name)} failed: {cell(detail.evidence[:EVIDENCE_LIMIT])}"
        for detail in failed
    ]


@dataclass
class ProblemRow:
    """The trials of one report row with failed graders or errors: the first
    :data:`~vally_builtin.reporters.aggregate.FAILURES_KEPT` by place, as their report
    lines, and how many there were."""

    stimulus: str
    model: str | None
    kept: list[tuple[int, int, list[str]]] = field(default_factory=list)
    """A heap on the negated order: the kept trials with the latest first."""
    seen: int = 0

    def add(self, order: Order, lines: list[str] | Callable[[], list[str]]) -> None:
        """Count one trial with problems; keep its lines while it is among the first
        (``lines`` may be a function giving them, then called only for a trial kept)."""
        self.seen += 1
        negated = (-order[0], -order[1])
        if admits(self.kept, negated):
            keep(self.kept, (*negated, lines if isinstance(lines, list) else lines()))

    def absorb(self, state: Mapping[str, Any], shift: int) -> None:
        """Add another row's trials (its :meth:`ExperimentAggregate.state` entry), their
        orders' second part shifted by ``shift``."""
        self.seen += int(state["seen"])
        for place, at, lines in state["kept"]:
            entry = (-int(place), -(int(at) + shift), [str(line) for line in lines])
            if admits(self.kept, entry[:2]):
                keep(self.kept, entry)

    def entries(self) -> list[tuple[Order, list[str]]]:
        """The kept trials' lines with their order."""
        return [((-a, -b), lines) for a, b, lines in self.kept]

    @property
    def left_out(self) -> int:
        """Trials with problems whose lines were not kept."""
        return self.seen - len(self.kept)


class ExperimentAggregate:
    """An experiment's report figures, fed one record at a time (memory grows with the
    report's rows, not with the trials).

    Args:
        variants: The experiment's variants, in order.
        places: Where the planned trials come in the plan.
    """

    def __init__(self, variants: Sequence[str], places: PlanPlaces) -> None:
        self.places = places
        self.counters = {name: VariantCounter() for name in variants}
        self.finished = 0
        self.cost = CostTotals()
        self.variant_cost = {name: CostTotals() for name in variants}
        self.problems: dict[tuple[str, str], dict[tuple[str, str | None], ProblemRow]] = {}
        """(variant, eval) -> (stimulus, model) -> the row's trials with problems."""

    @classmethod
    def of(
        cls, variants: Sequence[str], planned: Sequence[str], records: Iterable[TrialResultRecord]
    ) -> ExperimentAggregate:
        """The aggregate of ``records`` (read once, in any order) for the plan ``planned``."""
        aggregate = cls(variants, PlanPlaces(planned))
        for record in records:
            aggregate.add(record)
        return aggregate

    def add(self, record: TrialResultRecord) -> None:
        """Count one finished trial."""
        self.add_facts(TrialFacts.of_record(record))

    def add_facts(self, facts: TrialFacts) -> bool:
        """Count one finished trial from its facts (see :meth:`add`); always counted
        (:class:`vally.FactCounter`)."""
        place = self.places.place(facts)
        order = (self.places.size if place is None else place, self.finished)
        self.finished += 1
        self.cost.add_facts(facts)
        variant = facts.variant
        counter = self.counters.get(variant)
        if counter is not None:
            counter.add_facts(facts, order)
        totals = self.variant_cost.get(variant)
        if totals is not None:
            totals.add_facts(facts)
        failed = facts.failed_graders
        if facts.error is not None or (failed and any(not g.passed for g in failed)):
            rows = self.problems.setdefault((variant, facts.eval_name), {})
            row_key = (facts.stimulus_name, facts.model)
            row = rows.get(row_key)
            if row is None:
                row = rows[row_key] = ProblemRow(facts.stimulus_name, facts.model)
            row.add(order, lambda: problem_lines(facts))  # written only for a trial kept
        return True

    def state(self) -> dict[str, Any]:
        """The figures as JSON data, which :meth:`absorb` adds to another aggregate of the
        same plan (a sealed shard holds it, so a merge adds it up instead of reading every
        record)."""
        return {
            "finished": self.finished,
            "counters": [[name, counter.state()] for name, counter in self.counters.items()],
            "cost": self.cost.state(),
            "variantCost": [[name, totals.state()] for name, totals in self.variant_cost.items()],
            "problems": [
                [
                    variant,
                    eval_name,
                    [
                        {
                            "stimulus": row.stimulus,
                            "model": row.model,
                            "seen": row.seen,
                            "kept": [[-a, -b, lines] for a, b, lines in row.kept],
                        }
                        for row in rows.values()
                    ],
                ]
                for (variant, eval_name), rows in self.problems.items()
            ],
        }

    def absorb(self, state: Mapping[str, Any]) -> None:
        """Add the figures of another aggregate of the same plan (its :meth:`state`), as if
        the records it counted came here next."""
        shift = self.finished
        self.finished += int(state["finished"])
        for name, counter_state in state["counters"]:
            counter = self.counters.get(str(name))
            if counter is not None:
                counter.absorb(counter_state, shift=shift)
        self.cost.absorb(state["cost"])
        for name, totals_state in state["variantCost"]:
            totals = self.variant_cost.get(str(name))
            if totals is not None:
                totals.absorb(totals_state)
        for variant, eval_name, rows_state in state["problems"]:
            rows = self.problems.setdefault((str(variant), str(eval_name)), {})
            for row_state in rows_state:
                model = row_state["model"]
                key = (str(row_state["stimulus"]), None if model is None else str(model))
                row = rows.get(key)
                if row is None:
                    row = rows[key] = ProblemRow(*key)
                row.absorb(row_state, shift)

    @classmethod
    def of_states(
        cls, variants: Sequence[str], planned: Sequence[str], states: Iterable[Mapping[str, Any]]
    ) -> ExperimentAggregate:
        """The aggregate of several aggregates' states of the plan ``planned``, in order."""
        aggregate = cls(variants, PlanPlaces(planned))
        for state in states:
            aggregate.absorb(state)
        return aggregate

    def variant_stats(self) -> list[VariantStats]:
        """Counts per variant, in the experiment's order, for variants with records."""
        return observed_stats(self.counters, self.counters)

    def failure_lines(self, variant: str, eval_name: str, results_file: str) -> list[str]:
        """The failed graders and errors of a variant's eval: the kept trials' lines in plan
        order, then one line per row saying how many trials were not listed."""
        rows: Mapping[tuple[str, str | None], ProblemRow] = self.problems.get(
            (variant, eval_name), {}
        )
        entries = sorted(
            (entry for row in rows.values() for entry in row.entries()), key=lambda e: e[0]
        )
        lines = [line for _, own in entries for line in own]
        for row in sorted(rows.values(), key=lambda r: min(o for o, _ in r.entries())):
            if row.left_out:
                where = f"`{row.stimulus}`" + (f" ({row.model})" if row.model else "")
                lines.append(
                    f"- {where}: {row.left_out} more trial(s) with failed graders or errors "
                    f"not listed (see {results_file})"
                )
        return lines
