"""The hook plugin ``compare`` (entry-point group ``vally.hooks``): what ``vally experiment
run`` asks of the comparison.

* ``vally_experiment_gate``: the gate of ``--until-decided``
  (:class:`~vally_compare.sequential_gate.SequentialGate`);
* ``vally_experiment_decide``: once an unsharded run of two or more variants is done, its
  variants decided by the experiment file's promotion rules
  (:mod:`~vally_compare.experiment_decisions`), then, with ``--compare``, compared pair by
  pair through the LLM judge (:func:`vally_compare.run.execute`). The exit code is 1 when a
  variant is held, cannot be decided, or its comparison fails; the trial results are kept
  either way.

The hooks are specified in :mod:`vally.engine.experiment_hooks`; this module imports nothing
heavy, the work is imported when a hook runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import typer

from vally import VallyError, hookimpl

if TYPE_CHECKING:
    from vally import ExperimentGate, FinishedExperiment, PlannedTrial

EXIT_OK = 0
EXIT_FAILURE = 1


def _echo(message: str = "", *, err: bool = False) -> None:
    typer.echo(message, err=err)


class CompareHooks:
    """Promotion decisions, --compare and --until-decided for ``vally experiment run``.

    Decides an experiment's variants by its promotion rules, compares them pair by pair
    (``--compare``) and stops running a variant once it is decided (``--until-decided``).
    """

    @hookimpl
    def vally_experiment_gate(
        self, baseline: str, trials: Sequence[PlannedTrial]
    ) -> ExperimentGate:
        """The anytime-valid sequential gate over the planned trials."""
        from vally_compare.sequential_gate import SequentialGate

        return SequentialGate(baseline, trials)

    @hookimpl
    def vally_experiment_decide(self, experiment: FinishedExperiment) -> int:
        """The promotion rules' decision, then the judged comparison; 0 when both passed."""
        code = EXIT_OK
        if experiment.promotion is not None and decide(experiment) != EXIT_OK:
            code = EXIT_FAILURE
        if experiment.request.compare and compare(experiment) != EXIT_OK:
            code = EXIT_FAILURE
        return code


def decide(experiment: FinishedExperiment) -> int:
    """Decide every variant against the baseline by the experiment's promotion rules:
    print the graded comparisons and the verdicts, write ``comparison.jsonl`` and the
    report's section; 1 when a variant is held (or cannot be decided)."""
    from vally_compare.experiment_decisions import decide_experiment

    rules = experiment.promotion
    assert rules is not None
    _echo()
    try:
        return decide_experiment(experiment.run_dir, experiment.baseline, rules, echo=_echo)
    except VallyError as exc:
        _echo(f"Promotion rules could not be applied: {exc.render()}", err=True)
        return EXIT_FAILURE


def compare(experiment: FinishedExperiment) -> int:
    """The judged comparison of ``--compare``, its judge set by the flags, else by the
    selected evals when they agree; 1 when it fails or is incomplete."""
    from vally import parse_duration
    from vally_compare.experiment_judge import comparison_judge
    from vally_compare.run import CompareRequest, execute

    opts = experiment.request
    settings, conflicts = comparison_judge(
        experiment.evals,
        {
            "judge_model": opts.judge_model,
            "judge_reasoning_effort": opts.judge_reasoning_effort,
            "judge_timeout": opts.judge_timeout,
        },
    )
    if conflicts:
        _echo("Comparison failed: the comparison judge settings conflict:", err=True)
        for conflict in conflicts:
            _echo(f"  - {conflict}", err=True)
        _echo(
            "  Use --judge-model, --judge-reasoning-effort or --judge-timeout to choose one, "
            "or set a common judge_provider. Trial results are saved.",
            err=True,
        )
        return EXIT_FAILURE
    timeout = settings.get("judge_timeout")
    if isinstance(timeout, str):
        timeout = parse_duration(timeout, field="--judge-timeout")
    request = CompareRequest(
        experiment_dir=experiment.run_dir,
        baseline_variant=experiment.baseline,
        judge_model=settings.get("judge_model"),
        judge_reasoning_effort=settings.get("judge_reasoning_effort"),
        judge_provider=settings.get("judge_provider"),
        judge_timeout=float(timeout) if timeout is not None else None,
        params=dict(experiment.params),
        verbose=opts.verbose,
        no_cache=opts.no_cache,
    )
    _echo()
    _echo("Comparison (LLM-judged, baseline vs each variant):")
    try:
        return execute(request, experiment.session)
    except VallyError as exc:
        _echo(f"Comparison failed: {exc.render()}", err=True)
        return EXIT_FAILURE
