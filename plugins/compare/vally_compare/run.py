"""Running a comparison request: the library behind ``vally compare`` and
``vally experiment run --compare``.

:func:`execute` loads the runs (an experiment folder, or a baseline and a treatment),
compares each treatment with the baseline from the graded records, then through the
pairwise judge when one is wanted (:mod:`vally_compare.judged_run`), prints the report
(:mod:`vally_compare.graded_text`, :mod:`vally_compare.judged_text`), applies the promotion
rules and writes the ``--output`` and ``--junit`` files. Runs named by their files are
judged pair by pair (:mod:`vally_compare.judged_stream`), so memory does not grow with the
number of pairs.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from vally import ConfigError

if TYPE_CHECKING:
    from vally import (
        PromotionRules,
        Session,
    )
    from vally_compare.graded import GradedComparison
    from vally_compare.judged import ComparisonResult
    from vally_compare.judged_run import Echo, RunSource


@dataclass
class CompareRequest:
    """Everything ``vally compare`` (or ``experiment run --compare``) was asked to do."""

    experiment_dir: Path | None = None
    baseline: Path | None = None
    treatment: Path | None = None
    baseline_variant: str | None = None
    eval_spec: Path | None = None
    judge_model: str | None = None
    judge_timeout: float | None = None
    judge_reasoning_effort: str | None = None
    judge_provider: str | None = None
    judge_evidence: str = "tools"
    judge_workers: int = 4
    output: Path | None = None
    fail_on_regression: bool = False
    params: dict[str, str] = field(default_factory=dict)
    verbose: bool = False
    rejudge: int = 0
    plan: float | None = None
    no_cache: bool = False
    judge: bool | None = None
    """True: judge (a judge model is required); False: graded comparison only; None: judge
    when a judge model is configured."""
    rules: Path | None = None
    confidence_level: float | None = None
    """None: the rules file's, else 0.95."""
    interval: str | None = None
    """None: the rules file's, else ``cases``."""
    by: list[str] = field(default_factory=list)
    allow_different_suites: bool = False
    junit: Path | None = None


def _print_out(text: str) -> None:
    print(text, file=sys.stdout, flush=True)


def _print_warning(text: str) -> None:
    print(f"warning: {text}", file=sys.stderr, flush=True)


def _load_runs(request: CompareRequest) -> list[RunSource]:
    """The runs to compare, baseline first, as the files that hold them, each line
    validated as a trial record.

    Raises:
        ConfigError: Fewer than two runs, or a run without records.
    """
    from vally import iter_records

    if request.experiment_dir is not None:
        from vally_compare.sources import experiment_sources

        _, folders = experiment_sources(request.experiment_dir, request.baseline_variant)
        ordered: list[RunSource] = list(folders.items())
    else:
        assert request.baseline is not None and request.treatment is not None
        ordered = [
            (str(request.baseline), request.baseline),
            (str(request.treatment), request.treatment),
        ]
    if len(ordered) < 2:
        raise ConfigError("nothing to compare: only the baseline has results")
    for name, source in ordered:
        assert isinstance(source, Path)
        # every line checked before any judging (one record at a time: memory stays flat)
        if not sum(1 for _ in iter_records(source)):
            raise ConfigError(
                f"no trial records in {name}",
                hint="pass a results.jsonl (or its run directory) that holds finished trials",
            )
    return ordered


def execute(
    request: CompareRequest,
    session: Session | None = None,
    *,
    echo: Echo = _print_out,
    warn: Echo = _print_warning,
) -> int:
    """Run a comparison request, print it, write ``--output``; return the exit code.

    Every treatment is first compared with the baseline from their graded records, with no
    model (:mod:`vally_compare.graded`); runs of different suites are refused there,
    before any judging. The judged pairwise comparison follows when a judge is wanted
    (``request.judge``), then the promotion rules, which may read the judged win rate.

    Args:
        request: What to compare and how to judge.
        session: The plugin session (default: one for the working folder's project).
        echo: Where report lines go (default: standard output).
        warn: Where warnings go (default: standard error, prefixed ``warning:``).

    Raises:
        VallyError: The runs or the rules cannot be loaded, the runs are of different
            suites, the judge cannot be built, or ``--output`` cannot be written.
    """
    import asyncio

    from vally import Session, find_project
    from vally_compare.graded_run import load_rules, rule_dimensions
    from vally_compare.judged_run import remove_trials_files, run_comparisons
    from vally_compare.statistics.decisions import check_confidence_level

    if session is None:
        project, root = find_project(Path.cwd())
        session = Session(project=project, project_root=root)
    rules = load_rules(request.rules) if request.rules is not None else None
    level = request.confidence_level
    if level is None:
        level = rules.confidence_level if rules is not None else None
    if level is None:
        level = 0.95
    try:
        level = check_confidence_level(level)
    except ValueError as exc:
        raise ConfigError(f"--confidence-level: {exc}", hint="write e.g. 0.95 or 0.9") from None
    method = request.interval or (rules.interval if rules is not None else None) or "cases"
    if method not in ("cases", "repeats"):
        raise ConfigError(
            f"--interval must be 'cases' or 'repeats', got {method!r}",
            hint="cases: over stimuli (the default); repeats: Welch over repeats",
        )
    ordered = _load_runs(request)
    if request.output is not None:
        from vally_compare.output import check_output_file

        check_output_file(request.output)
    if rules is not None:  # every scope a rule names is broken down
        request.by = [*request.by, *(d for d in rule_dimensions(rules) if d not in request.by)]
    graded = _graded_comparisons(request, ordered, level, method, warn)
    results: list[ComparisonResult] = []
    if _judge_wanted(request, session, warn):
        results = asyncio.run(run_comparisons(request, ordered, session, warn=warn))
    try:
        return _report(request, graded, results, rules, echo, warn)
    finally:
        remove_trials_files(results)


def _graded_comparisons(
    request: CompareRequest,
    ordered: Sequence[RunSource],
    level: float,
    method: str,
    warn: Echo,
) -> list[GradedComparison]:
    """Each treatment compared with the baseline from the graded records.

    Raises:
        SuiteMismatchError: A treatment is of another suite than the baseline (unless
            allowed).
    """
    from vally_compare.graded_run import compare_paths

    (base_name, base_path), *treatments = ordered
    assert isinstance(base_path, Path)
    comparisons = []
    for name, path in treatments:
        assert isinstance(path, Path)
        comparisons.append(
            compare_paths(
                base_path,
                path,
                labels=(base_name, name),
                by=request.by,
                confidence_level=level,
                method="repeats" if method == "repeats" else "cases",
                allow_different_suites=request.allow_different_suites,
                warn=warn,
            )
        )
    return comparisons


def _judge_wanted(request: CompareRequest, session: Session, warn: Echo) -> bool:
    """Whether to run the judged comparison: as asked, or when a judge model is
    configured (the flag, ``.vally.yaml`` or ``EVAL_JUDGE_MODEL``; never the
    ``--eval-spec`` file, whose judge settings are not inherited: when it has some and no
    judge is configured, ``warn`` says so)."""
    from vally_compare.judged_run import judge_settings, load_spec, spec_judge_note

    if request.judge is not None:
        return request.judge
    try:
        judge_settings(request, session, None)
    except ConfigError:
        if request.eval_spec is not None:
            note = spec_judge_note(load_spec(request, lambda _text: None))
            if note is not None:
                warn(note)
        return False
    return True


def _report(
    request: CompareRequest,
    graded: Sequence[GradedComparison],
    results: Sequence[ComparisonResult],
    rules: PromotionRules | None,
    echo: Echo,
    warn: Echo,
) -> int:
    """Print each comparison (graded, then judged), the rules' verdicts, write
    ``--output`` and ``--junit``; the exit code."""
    from vally_compare.graded_records import comparison_json
    from vally_compare.graded_run import apply_rules
    from vally_compare.graded_text import comparison_lines as graded_lines, promotion_lines
    from vally_compare.judged import exit_code
    from vally_compare.judged_run import judge_spend_lines
    from vally_compare.judged_text import cleanup_warnings, comparison_lines
    from vally_compare.output import write_output
    from vally_compare.plan import plan_lines
    from vally_compare.rules import WinRateEvidence

    judged = {r.treatment: r for r in results}
    outcomes = []
    for comparison in graded:
        for line in graded_lines(comparison, verbose=request.verbose):
            echo(line)
        echo("")
        result = judged.get(comparison.candidate.label)
        evidence = None
        if result is not None and result.status == "complete":
            rate = result.win_rate
            evidence = WinRateEvidence(rate.win_rate, rate.ci, result.n_judged)
        outcomes.append(apply_rules(comparison, rules, evidence))
    for result in results:
        for line in comparison_lines(result, request.verbose):
            echo(line)
        for line in judge_spend_lines(result):
            echo(line)
        if request.plan is not None:
            for line in plan_lines(result, request.plan):
                echo(line)
        for note in cleanup_warnings(result):
            warn(note)
        echo("")
    if not results and request.judge is None:
        echo(
            "No judged comparison (no judge model configured): pass --judge-model MODEL to add one."
        )
    source = str(request.rules) if request.rules is not None else None
    for outcome in outcomes:
        if outcome.promotion is not None:
            if len(outcomes) > 1:
                echo(f"Candidate {outcome.comparison.candidate.label}:")
            for line in promotion_lines(outcome.promotion, source):
                echo(line)
            echo("")
    if request.output is not None:
        records = {
            o.comparison.candidate.label: comparison_json(o.comparison, o.promotion, source)
            for o in outcomes
        }
        write_output(request.output, results, records)
    if request.junit is not None:
        from vally_compare.junit import write_rules_junit

        write_rules_junit(request.junit, outcomes)
    code = exit_code(results, fail_on_regression=request.fail_on_regression) if results else 0
    if request.fail_on_regression and any(_graded_regression(o.comparison) for o in outcomes):
        code = 1
    if any(o.promotion is not None and o.promotion.exit_code for o in outcomes):
        code = 1
    return code


def _graded_regression(comparison: GradedComparison) -> bool:
    """True when the pass rate or a deterministic grader is worse by its interval."""
    figures = [m for m in comparison.metrics if m.name == "pass_rate"]
    figures += [g for g in comparison.graders if not g.judged]
    return any(f.difference == "worse" for f in figures)
