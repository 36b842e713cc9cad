"""The experiment report (``report.md``): what the ``markdown`` reporter writes for an
experiment run or merge.

It is a pure function of the plan snapshot, the run summaries and the records. Apart from
the ``Rendered:`` line, the report is deterministic: what depends on order follows the
plan, and no wall-clock values appear, so a merged run renders the same report as an
unsharded run. The records are read once and counted
(:class:`~vally_builtin.reporters.experiment_aggregate.ExperimentAggregate`), never held:
each report row lists its first
:data:`~vally_builtin.reporters.aggregate.FAILURES_KEPT` trials with failed graders or
errors in plan order, then how many more.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from vally import RunInfo, RunOutcome, RunSummaryRecord, TrialResultRecord, utc_now
from vally_builtin.reporters.experiment import Comparison, cell, compare_stats, pct
from vally_builtin.reporters.experiment_aggregate import ExperimentAggregate
from vally_builtin.reporters.jsonl import RESULTS_FILE
from vally_compare import Estimate


def _test_text(estimate: Estimate | None) -> str:
    """The interval and p-value behind a label, for the report."""
    shown = None if estimate is None else estimate.decision_ci or estimate.ci
    if estimate is None or shown is None:
        return ""
    # the interval that inverts the test deciding the label, so the two never disagree
    ci = f"{shown.level:.0%} CI [{shown.low * 100:+.1f}, {shown.high * 100:+.1f}] pts"
    p = estimate.decision_p
    return f"; {ci}, p = {'n/a' if p is None else f'{p:.3f}'} (sign-flip over stimuli, Holm)"


def _num(value: float | None, digits: int = 2) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def render_experiment_report(
    run: RunInfo,
    records: Iterable[TrialResultRecord],
    summaries: Sequence[RunSummaryRecord],
    *,
    rendered_at: str | None = None,
    aggregate: ExperimentAggregate | None = None,
) -> str:
    """The experiment-level ``report.md`` of a run (or merge) that has a plan snapshot.

    Args:
        run: The run; its ``snapshot`` gives the experiment, baseline, variants, evals and
            the plan order of the trials.
        records: Every trial record of the run (any order, read once; not read when
            ``aggregate`` is given).
        summaries: The run summaries (any variant).
        rendered_at: The render timestamp (the only non-deterministic line; default now).
        aggregate: ``records`` counted already (see :func:`experiment_aggregate`).
    """
    snapshot: Mapping[str, Any] = run.snapshot or {}
    by_variant: dict[str, list[RunSummaryRecord]] = {}
    for summary in summaries:
        by_variant.setdefault(summary.variant or "", []).append(summary)
    return render_report(
        snapshot,
        by_variant,
        records,
        run_id=run.run_id,
        rendered_at=rendered_at or utc_now(),
        aggregate=aggregate,
    )


def experiment_aggregate(
    snapshot: Mapping[str, Any], records: Iterable[TrialResultRecord] = ()
) -> ExperimentAggregate:
    """The experiment report's figures for the plan ``snapshot``, counting ``records``
    (none by default: feed each trial's record as it ends)."""
    return ExperimentAggregate.of(*_plan_of(snapshot), records)


def _plan_of(snapshot: Mapping[str, Any]) -> tuple[list[str], Sequence[str]]:
    """The variants and the planned trial keys of a plan snapshot (the snapshot's own
    list: :class:`PlanPlaces` reads the keys as text only when it places a record)."""
    variants = [str(v) for v in snapshot.get("variants") or []]
    trials = snapshot.get("trials")
    return variants, trials if isinstance(trials, list) else []


SEALED_KEY = "markdown.experiment-aggregate"
"""The key of the experiment report's figures in a shard's seal (``vally_seal_counters``)."""


def sealed_experiment_aggregate(
    snapshot: Mapping[str, Any], outcome: RunOutcome
) -> ExperimentAggregate | None:
    """The experiment report's figures added up from the sealed shards' (a merge of
    sealed shards), or None when the outcome has none or they do not add up to its
    records."""
    states = outcome.sealed.get(SEALED_KEY)
    if not states:
        return None
    try:
        aggregate = ExperimentAggregate.of_states(*_plan_of(snapshot), states)
    except (KeyError, TypeError, ValueError):
        return None
    return aggregate if aggregate.finished == len(outcome.records) else None


def render_report(
    snapshot: Mapping[str, Any],
    summaries: Mapping[str, Sequence[RunSummaryRecord]],
    records: Iterable[TrialResultRecord],
    *,
    run_id: str,
    rendered_at: str,
    aggregate: ExperimentAggregate | None = None,
) -> str:
    """The experiment-level ``report.md`` from its parts (see :func:`render_experiment_report`).

    Args:
        snapshot: The plan snapshot (experiment, baseline, variants, evals, trials).
        summaries: The run summaries by variant.
        records: Every trial record of the run (any order, read once; not read when
            ``aggregate`` is given).
        run_id: The experiment run id.
        rendered_at: The render timestamp (the only non-deterministic line).
        aggregate: ``records`` counted already.
    """
    variants = [str(v) for v in snapshot.get("variants") or []]
    baseline = str(snapshot.get("baseline"))
    planned = snapshot.get("trials") or []
    if aggregate is None:
        aggregate = experiment_aggregate(snapshot, records)
    comparison = compare_stats(aggregate.variant_stats(), baseline)
    lines = [
        f"# Experiment report: {cell(str(snapshot.get('experiment')))}",
        "",
        f"Rendered: {rendered_at}",
        "",
        f"- Run ID: `{run_id}`",
        f"- Baseline: `{baseline}`",
        f"- Variants: {', '.join(f'`{v}`' for v in variants)}",
        f"- Vary: {', '.join(f'`{p}`' for p in snapshot.get('vary') or []) or '(matrix)'}",
        f"- Planned trials: {len(planned)}; finished: {aggregate.finished}",
        f"- Cost: {aggregate.cost.line()}",
        "",
        *_comparison_lines(comparison),
    ]
    evals: list[Mapping[str, Any]] = list(snapshot.get("evals") or [])
    for variant in variants:
        title = f"## Variant `{variant}`" + (" (baseline)" if variant == baseline else "")
        lines += [title, "", f"Cost: {aggregate.variant_cost[variant].line()}", ""]
        for summary in summaries.get(variant, []):
            meta: Mapping[str, Any] = next(
                (e for e in evals if e["variant"] == variant and e["name"] == summary.eval_name),
                {},
            )
            lines += _summary_lines(summary, meta)
            problems = aggregate.failure_lines(
                variant, summary.eval_name, f"the variant's {RESULTS_FILE}"
            )
            if problems:
                lines += ["Failed graders and errors:", "", *problems, ""]
    return "\n".join(lines).rstrip() + "\n"


def _comparison_lines(comparison: Comparison) -> list[str]:
    """The comparison with the baseline: a row per observed variant, then the headline."""
    lines = [
        "## Comparison with the baseline",
        "",
        "| Variant | Trials | Passed | Failed | Errored | Pass rate | Δ vs baseline | Result |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for s in comparison.variants:
        if s.name == comparison.baseline:
            delta, label = "—", "baseline"
        elif comparison.available:
            value = comparison.deltas.get(s.name)
            delta = "n/a" if value is None else f"{value * 100:+.1f} pts"
            label = comparison.result_text(s.name) + _test_text(comparison.estimates.get(s.name))
        else:
            delta, label = "n/a", "n/a"
        lines.append(
            f"| `{cell(s.name)}` | {s.trials} | {s.passed} | {s.failed} | {s.errored} | "
            f"{pct(s.pass_rate)} | {delta} | {label} |"
        )
    return [*lines, "", comparison.headline, ""]


def _summary_lines(summary: RunSummaryRecord, meta: Mapping[str, Any]) -> list[str]:
    """One eval of a variant: its verdict, file and hashes, and a row per stimulus."""
    lines = [
        f"### {cell(summary.eval_name)}: verdict {summary.verdict}",
        "",
        f"File: `{meta.get('file', summary.eval_file)}`; config hash "
        f"`{summary.config_hash}`; eval hash `{summary.eval_hash}`; "
        f"threshold {_num(summary.threshold)}",
        "",
        "| Stimulus | Model | Trials | Passed | Errored | Pass rate | pass@k | pass^k | "
        "Flaky | Mean score | Mean tokens | Mean turns | Mean tool calls |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|",
    ]
    for st in summary.stimuli:
        m = st.metrics
        lines.append(
            f"| {cell(st.stimulus_name)} | {cell(st.model or 'default')} | "
            f"{st.trials} | {st.passed} | {st.errored} | {pct(m.per_trial_pass_rate)} | "
            f"{_num(m.pass_at_k)} | {_num(m.pass_to_the_k)} | "
            f"{'yes' if st.flaky else 'no'} | {_num(st.mean_score)} | "
            f"{_num(st.mean_tokens, 1)} | {_num(st.mean_turns, 1)} | "
            f"{_num(st.mean_tool_calls, 1)} |"
        )
    if not summary.stimuli:
        lines.append("| (no trials) | | | | | | | | | | | | |")
    lines.append("")
    return lines
