"""Run summaries: one ``run-summary.jsonl`` line per (variant, eval), written when a run ends.

Two layouts share one interface (:class:`RunSummaries`):

* :class:`PlanSummaries` (``vally eval``): one file in the run folder, a line per planned
  eval, records in the order the plan lists its stimuli.
* :class:`VariantSummaries` (``vally experiment run`` and ``merge``): one file per variant
  folder, a line per eval of the experiment's plan snapshot, records in plan order, with
  the ``experiment`` provenance block; a shard summarises its own trials only.

Every summary says what its eval measured (``evalHash``, ``suiteHash``, ``graders``,
``target``, see :mod:`vally.engine.planning.identity`): a plain run from its planned evals, an
experiment from its plan snapshot, which keeps them so a merge writes them unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from vally.engine.planning.identity import (
    EvalIdentity,
    eval_hash,
    eval_identity,
    identity_from_snapshot,
)
from vally.engine.planning.plan import PlannedEval
from vally.engine.records.run_folder import (
    SUMMARY_FILE,
    Scrubber,
    output_errors,
    safe_name,
    write_jsonl,
)
from vally.engine.records.tally import EvalTally
from vally.errors import OutputError
from vally.models.facts import TrialFacts
from vally.models.records import ExperimentBlock, RunSummaryRecord, TrialResultRecord
from vally.models.trajectory import utc_now


class SummaryCounter(Protocol):
    """Counts a run's records one at a time into its summaries; its memory grows with the
    run's evals, stimuli and models, not with its trials."""

    def add(self, record: TrialResultRecord) -> None:
        """Count one finished trial's record."""
        ...

    def summaries(self, started_at: str) -> list[RunSummaryRecord]:
        """One summary per (variant, eval) of the run from the records counted so far."""
        ...


class RunSummaries(Protocol):
    """Summarises a run's records and writes the summary files."""

    def summarize(
        self, records: Sequence[TrialResultRecord], started_at: str
    ) -> list[RunSummaryRecord]:
        """One summary per (variant, eval) of the run, in a stable order."""
        ...

    def counter(self) -> SummaryCounter:
        """An empty counter to feed records as trials finish (the same summaries as
        :meth:`summarize` over the same records, in any order)."""
        ...

    def write(self, summaries: Sequence[RunSummaryRecord]) -> None:
        """Write the summary files (nothing when the run writes no files).

        Raises:
            OutputError: A summary file could not be written.
        """
        ...


def _write(path: Path, summaries: Sequence[RunSummaryRecord], scrubber: Scrubber) -> None:
    with output_errors(str(path)):
        write_jsonl(path, summaries, scrubber)


class PlanSummaries:
    """A line per planned eval, written to ``<run_dir>/run-summary.jsonl``.

    Args:
        evals: The plan's evals.
        run_id: The run's id.
        run_dir: The run folder; None writes nothing.
        scrubber: Hides secrets in what is written.
        plugins: Provenance of the loaded plugins.
        identities: What each (variant, eval name) measured
            (:func:`vally.engine.planning.identity.plan_identities`); an eval missing from it gets
            the identity computed without a plugin session.
    """

    def __init__(
        self,
        evals: Sequence[PlannedEval],
        *,
        run_id: str,
        run_dir: Path | None,
        scrubber: Scrubber,
        plugins: Sequence[Mapping[str, Any]] = (),
        identities: Mapping[tuple[str, str], EvalIdentity] | None = None,
    ) -> None:
        self.evals = list(evals)
        self.run_id = run_id
        self.run_dir = run_dir
        self.scrubber = scrubber
        self.plugins = list(plugins)
        known = identities or {}
        self.identities = {
            (p.variant, p.name): known.get((p.variant, p.name)) or eval_identity(p)
            for p in self.evals
        }
        self.eval_hashes = {(p.variant, p.name): eval_hash(p.loaded) for p in self.evals}

    def summarize(
        self, records: Sequence[TrialResultRecord], started_at: str
    ) -> list[RunSummaryRecord]:
        """Summaries of every planned eval, records sorted by the plan's stimulus order."""
        counter = self.counter()
        for record in records:
            counter.add(record)
        return counter.summaries(started_at)

    def counter(self) -> PlanCounter:
        """An empty counter of every planned eval (see :class:`PlanCounter`)."""
        return PlanCounter(self)

    def write(self, summaries: Sequence[RunSummaryRecord]) -> None:
        """Write ``run-summary.jsonl`` in the run folder."""
        if self.run_dir is not None:
            _write(self.run_dir / SUMMARY_FILE, summaries, self.scrubber)


class PlanCounter:
    """Counts records into a :class:`EvalTally` per planned eval (and variant), ranking each
    record as the plan lists it (stimulus order, then stimulus, model and trial), so the
    summaries list stimuli and models as a sort of every record would.

    Args:
        plan: The summaries it counts for.
    """

    def __init__(self, plan: PlanSummaries) -> None:
        self.plan = plan
        self.tallies = {(p.variant, p.name): EvalTally() for p in plan.evals}
        self.orders = {
            (p.variant, p.name): {name: i for i, name in enumerate(p.stimuli)} for p in plan.evals
        }

    def add(self, record: TrialResultRecord) -> None:
        """Count ``record`` in its eval; records of evals outside the plan are ignored."""
        key = (record.variant or "", record.eval_name)
        tally = self.tallies.get(key)
        if tally is None:
            return
        order = self.orders[key]
        rank = (
            order.get(record.stimulus_name, len(order)),
            record.stimulus_name,
            record.model or "",
            record.trial_index,
        )
        tally.add(record, rank)

    def summaries(self, started_at: str) -> list[RunSummaryRecord]:
        """A summary per planned eval, in plan order."""
        plan = self.plan
        completed = utc_now()
        out: list[RunSummaryRecord] = []
        for planned in plan.evals:
            key = (planned.variant, planned.name)
            identity = plan.identities[key]
            out.append(
                self.tallies[key].summary(
                    run_id=plan.run_id,
                    eval_name=planned.name,
                    eval_file=str(planned.loaded.source),
                    variant=planned.variant or None,
                    eval_hash=plan.eval_hashes[key],
                    suite_hash=identity.suite_hash,
                    graders=identity.graders,
                    target=identity.target,
                    threshold=planned.threshold,
                    started_at=started_at,
                    completed_at=completed,
                    plugins=plan.plugins,
                )
            )
        return out


def experiment_blocks(
    snapshot: Mapping[str, Any], *, run_id: str, shard: str | None = None
) -> dict[tuple[str, str], ExperimentBlock]:
    """The ``experiment`` provenance block of every (variant, eval name) of a plan snapshot,
    as records and summaries carry it."""
    return {
        (str(item["variant"]), str(item["name"])): ExperimentBlock(
            run_id=run_id,
            experiment=str(snapshot.get("experiment")),
            variant=str(item["variant"]),
            eval_hash=str(item.get("evalHash")),
            config_hash=str(item.get("configHash")),
            baseline=snapshot.get("baseline"),
            shard=shard,
        )
        for item in snapshot.get("evals") or []
    }


class PlanTallies:
    """Counters of every (variant, eval) of a plan snapshot, fed one record at a time; each
    record is ranked by its trial's place in the plan (unknown trials last, in arrival
    order), so the summaries list stimuli and models as the plan does.

    Args:
        snapshot: The plan snapshot.
        position: Trial key -> its place in the plan, when already built from the snapshot
            (else it is built the first time a record needs it).
    """

    def __init__(
        self, snapshot: Mapping[str, Any], position: Mapping[str, int] | None = None
    ) -> None:
        self.snapshot = snapshot
        self._position = position
        self.evals = {
            (str(item["variant"]), str(item["name"])): EvalTally()
            for item in snapshot.get("evals") or []
        }
        self.count = 0
        self.unsuccessful: dict[str, int] = {}
        """Records whose status is not ``success``, by status, in the order first seen."""

    @property
    def position(self) -> Mapping[str, int]:
        """Trial key -> its place in the plan."""
        if self._position is None:
            trials = self.snapshot.get("trials") or []
            self._position = {str(key): i for i, key in enumerate(trials)}
        return self._position

    def add(self, record: TrialResultRecord) -> None:
        """Count ``record`` in its (variant, eval); records of other evals are ignored."""
        self.add_facts(TrialFacts.of_record(record))

    def add_facts(self, facts: TrialFacts, place: int | None = None) -> None:
        """Count a record from its facts (see :meth:`add`); ``place`` is its trial's place
        in the plan when the caller looked it up already."""
        tally = self.evals.get((facts.variant, facts.eval_name))
        self.count += 1
        if facts.status != "success":
            self.unsuccessful[facts.status] = self.unsuccessful.get(facts.status, 0) + 1
        if tally is not None:
            if place is None:
                place = self.position.get(facts.key_id, len(self.position))
            tally.add_facts(facts, (place, self.count))


class VariantSummaries:
    """A line per eval of an experiment's plan snapshot, one file per variant folder.

    Args:
        snapshot: The plan snapshot (``plan-snapshot.json``: experiment, baseline, variants,
            evals with hashes and thresholds, trial keys in plan order).
        run_id: The experiment run's id.
        run_dir: The run (or shard, or merged) folder; None writes nothing.
        scrubber: Hides secrets in what is written.
        plugins: Provenance of the loaded plugins.
        shard: ``"i/n"`` for a shard's partial summaries.
    """

    def __init__(
        self,
        snapshot: Mapping[str, Any],
        *,
        run_id: str,
        run_dir: Path | None,
        scrubber: Scrubber | None = None,
        plugins: Sequence[Mapping[str, Any]] = (),
        shard: str | None = None,
    ) -> None:
        self.snapshot = snapshot
        self.run_id = run_id
        self.run_dir = run_dir
        self.scrubber = scrubber or Scrubber()
        self.plugins = list(plugins)
        self.shard = shard

    @property
    def variants(self) -> list[str]:
        """The experiment's variants, baseline first as planned."""
        return [str(v) for v in self.snapshot.get("variants") or []]

    def summarize(
        self, records: Sequence[TrialResultRecord], started_at: str | None = None
    ) -> list[RunSummaryRecord]:
        """Summaries of every (variant, eval) of the snapshot, records in plan order, so a
        merged run and an unsharded run of the same plan summarise identically."""
        tallies = self.tallies()
        for record in records:
            tallies.add(record)
        return self.finish(tallies)

    def counter(self) -> VariantCounter:
        """An empty counter of every (variant, eval) of the snapshot."""
        return VariantCounter(self, self.tallies())

    def tallies(self, position: Mapping[str, int] | None = None) -> PlanTallies:
        """Empty counters for every (variant, eval) of the snapshot, to feed records one at
        a time (in any order) and then :meth:`finish`; ``position`` maps trial keys to plan
        places when that map exists already."""
        return PlanTallies(self.snapshot, position)

    def finish(self, tallies: PlanTallies) -> list[RunSummaryRecord]:
        """Summaries of every (variant, eval) of the snapshot from fed ``tallies``."""
        blocks = experiment_blocks(self.snapshot, run_id=self.run_id, shard=self.shard)
        out: list[RunSummaryRecord] = []
        for item in self.snapshot.get("evals") or []:
            variant, name = str(item["variant"]), str(item["name"])
            identity = identity_from_snapshot(item)
            out.append(
                tallies.evals[(variant, name)].summary(
                    run_id=self.run_id,
                    eval_name=name,
                    eval_file=str(item.get("file")),
                    variant=variant,
                    eval_hash=item.get("evalHash"),
                    config_hash=item.get("configHash"),
                    threshold=item.get("threshold"),
                    plugins=self.plugins,
                    experiment=blocks[(variant, name)],
                    suite_hash=identity.suite_hash,
                    graders=identity.graders,
                    target=identity.target,
                )
            )
        return out

    def by_variant(
        self, summaries: Sequence[RunSummaryRecord]
    ) -> dict[str, list[RunSummaryRecord]]:
        """``summaries`` grouped by variant (every variant present, maybe empty)."""
        out: dict[str, list[RunSummaryRecord]] = {v: [] for v in self.variants}
        for summary in summaries:
            out.setdefault(summary.variant or "", []).append(summary)
        return out

    def write(self, summaries: Sequence[RunSummaryRecord]) -> None:
        """Write ``<variant>/run-summary.jsonl`` for every variant; tries every variant
        before raising the first failure."""
        if self.run_dir is None:
            return
        failures: list[OutputError] = []
        for variant, items in self.by_variant(summaries).items():
            try:
                _write(self.run_dir / safe_name(variant) / SUMMARY_FILE, items, self.scrubber)
            except OutputError as exc:
                failures.append(exc)
        if failures:
            raise failures[0]


class VariantCounter:
    """Counts records into the tallies of an experiment's plan snapshot (see
    :class:`VariantSummaries`).

    Args:
        variants: The summaries it counts for.
        tallies: Their empty tallies.
    """

    def __init__(self, variants: VariantSummaries, tallies: PlanTallies) -> None:
        self.variants = variants
        self.tallies = tallies

    def add(self, record: TrialResultRecord) -> None:
        """Count ``record`` in its (variant, eval)."""
        self.tallies.add(record)

    def summaries(self, started_at: str) -> list[RunSummaryRecord]:
        """A summary per (variant, eval) of the snapshot (times from the records)."""
        return self.variants.finish(self.tallies)
