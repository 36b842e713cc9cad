"""Running a comparison request: the library behind ``vally compare`` and
``vally experiment run --compare``.

:func:`execute` loads the runs (an experiment folder, or a baseline and a treatment),
builds the pairwise judge and its LLM provider through the plugin session, compares each
treatment with the baseline (:mod:`vally.comparison.judged`), prints the report
(:mod:`vally.comparison.judged_text`) and writes the ``--output`` records. Runs named by
their files are compared pair by pair (:mod:`vally.comparison.judged_stream`), so memory does
not grow with the number of pairs.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vally.errors import ConfigError, VallyError

if TYPE_CHECKING:
    from vally.comparison.graded import GradedComparison
    from vally.comparison.judged import ComparisonResult
    from vally.contracts.protocols import JudgeSettings
    from vally.engine.trials.judge_cache import CachedJudge
    from vally.models.project import LLMSettings
    from vally.models.promotion import PromotionRules
    from vally.models.records import TrialResultRecord
    from vally.models.spec import EvalSpec
    from vally.plugins.session import Session

DEFAULT_JUDGE_TIMEOUT = 120.0
"""Seconds per judge turn when the request sets no ``judge_timeout``."""

UNSUPPORTED_EVIDENCE = ("diff", "golden_patch", "repo")
"""Evidence kinds a spec's judge may ask for that comparisons never deliver."""

Echo = Callable[[str], None]
"""Where a line of the report goes."""

RunRecords = tuple[str, list["TrialResultRecord"]]
"""A run's name and its trial records."""

RunSource = tuple[str, "list[TrialResultRecord] | Path"]
"""A run's name and its trial records, or the run directory or results file that holds
them (then the comparison reads one pair at a time)."""


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
    from vally.engine.records.run_folder import iter_records

    if request.experiment_dir is not None:
        from vally.comparison.sources import experiment_sources

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


def ignored_evidence(spec: EvalSpec) -> list[str]:
    """Warnings for judge graders whose ``evidence`` selects kinds compare ignores: it
    always gives each run's output, timeline and metrics, never workspace diffs, golden
    patches or repository snapshots."""
    warnings = []
    for stimulus in spec.stimuli:
        for grader in [*spec.graders, *stimulus.graders]:
            evidence = grader.config.get("evidence")
            if not isinstance(evidence, list):
                continue
            ignored = [kind for kind in evidence if kind in UNSUPPORTED_EVIDENCE]
            if ignored:
                warnings.append(
                    f"stimulus {stimulus.name!r}: the {grader.type} grader asks for "
                    f"{', '.join(ignored)} evidence; compare ignores it and judges output, "
                    "timeline and metrics only"
                )
    return warnings


def _load_spec(request: CompareRequest, warn: Echo) -> EvalSpec | None:
    """The ``--eval-spec`` file's spec (warning about evidence compare ignores), if given."""
    if request.eval_spec is None:
        return None
    from vally.specs.loading import find_project, load_eval_file

    project, _ = find_project(request.eval_spec.parent)
    loaded = load_eval_file(request.eval_spec, cli_params=request.params, project=project)
    for warning in ignored_evidence(loaded.spec):
        warn(warning)
    return loaded.spec


def _rubrics(spec: EvalSpec | None) -> dict[str, list[str]] | None:
    """The ``--eval-spec`` rubrics by stimulus name, which override the records' own."""
    if spec is None:
        return None
    return {s.name: list(s.rubric) for s in spec.stimuli if s.rubric}


# --------------------------------------------------------------------------- judging


def _judge_and_llm(session: Session, request: CompareRequest) -> tuple[Any, CachedJudge]:
    """The pairwise judge (the ``prompt`` grader) and the LLM provider it talks to, behind
    the judge cache (unless ``--no-cache``).

    Raises:
        ConfigError: The installed ``prompt`` grader cannot judge pairs.
    """
    from vally.engine.trials.judge_cache import CachedJudge, JudgeCache, cache_root
    from vally.engine.trials.llm_config import provider_config_from_settings
    from vally.plugins.capabilities import is_pairwise
    from vally.plugins.defaults import PAIRWISE_JUDGE

    registration = session.registration("grader", PAIRWISE_JUDGE)
    if not is_pairwise(registration.cls):
        raise ConfigError(
            f"the {PAIRWISE_JUDGE!r} grader ({registration.provenance.label()}) cannot judge "
            "pairs: its metadata does not declare pairwise=True",
            hint=f"install a {PAIRWISE_JUDGE!r} grader whose GraderMetadata declares "
            "pairwise=True and implements judge_pair",
        )
    judge = session.create("grader", PAIRWISE_JUDGE, {}, where="compare judge")
    settings = _llm_settings(session)
    provider = request.judge_provider or settings.provider
    llm = session.create(
        "llm_provider", provider, provider_config_from_settings(settings), where="judge provider"
    )
    cache = None
    if not request.no_cache:
        cache = JudgeCache(cache_root(session.project, session.project_root))
    return judge, CachedJudge(llm, cache, provider)


def _llm_settings(session: Session) -> LLMSettings:
    """The project's ``llm:`` settings (defaults without a project)."""
    from vally.models.project import LLMSettings

    return session.project.llm if session.project is not None else LLMSettings()


def _judge_settings(
    request: CompareRequest, session: Session, spec: EvalSpec | None
) -> JudgeSettings:
    """The judge's settings: flags, then the ``--eval-spec`` defaults, then ``.vally.yaml``,
    then the ``EVAL_JUDGE_*`` environment variables.

    Raises:
        ConfigError: No judge model is configured anywhere.
    """
    from vally.comparison.judge_preflight import resolve_judge_model
    from vally.contracts.protocols import JudgeSettings

    defaults = spec.defaults if spec is not None else None
    project = session.project.defaults if session.project is not None else None
    model = resolve_judge_model(
        request.judge_model,
        defaults.judge_model if defaults is not None else None,
        project.judge_model if project is not None else None,
        spec_given=spec is not None,
    )
    return JudgeSettings(
        model=model,
        reasoning_effort=request.judge_reasoning_effort
        or (defaults.judge_reasoning_effort if defaults is not None else None)
        or os.environ.get("EVAL_JUDGE_REASONING_EFFORT")
        or None,
        provider=request.judge_provider,
        timeout=request.judge_timeout or DEFAULT_JUDGE_TIMEOUT,
    )


async def run_comparisons(
    request: CompareRequest,
    runs: Sequence[RunSource],
    session: Session,
    *,
    warn: Echo = _print_warning,
) -> list[ComparisonResult]:
    """Compare each run after the first (the baseline) with the first. A comparison that
    fails is reported in its result (``error``), not raised.

    Runs given as files are compared pair by pair (:mod:`vally.comparison.judged_stream`);
    with ``request.output`` each result's ``trials_file`` then holds its ``trials``
    entries (the caller removes it).

    Raises:
        ConfigError: No judge model is configured.
        LLMError: The judge's provider failed the one check request sent before any pair.
    """
    from dataclasses import replace

    from vally.comparison import judged as compare
    from vally.comparison.judge_preflight import check_judge
    from vally.models.pricing import PriceTable

    spec = _load_spec(request, warn)
    settings = _judge_settings(request, session, spec)
    panel = panel_settings(settings)
    judge, llm = _judge_and_llm(session, request)
    try:
        for member in panel:
            await check_judge(
                llm, str(member.model), _llm_settings(session), timeout=request.judge_timeout
            )
    except BaseException:
        with contextlib.suppress(Exception):
            await llm.aclose()
        raise
    options = compare.CompareOptions(
        judge=panel[0],
        llm=llm,
        rubric_override=_rubrics(spec),
        delivery="inline" if request.judge_evidence == "inline" else "tools",
        judge_workers=request.judge_workers,
        panel=panel if len(panel) > 1 else (),
        rejudge=request.rejudge,
    )
    (baseline_name, baseline), *treatments = runs
    prices = PriceTable(session.project.prices if session.project is not None else None)
    results = []
    try:
        for name, records in treatments:
            mark = llm.checkpoint()
            try:
                result = await _compare_one(
                    request, (baseline_name, baseline), (name, records), judge, options
                )
            except Exception as exc:  # a comparison that errors is reported, not raised
                message = (
                    exc.message if isinstance(exc, VallyError) else f"{type(exc).__name__}: {exc}"
                )
                pairing = compare.Pairing([], [], [])
                result = compare.summarize(
                    baseline_name, name, pairing, [], settings.model, error=message
                )
            spend = llm.spend_since(mark, prices)
            results.append(replace(result, judge_spend=spend))
    except BaseException:
        remove_trials_files(results)  # interrupted: no --output is written
        raise
    finally:
        with contextlib.suppress(Exception):
            await llm.aclose()
    return compare.adjust(results)


def remove_trials_files(results: Sequence[ComparisonResult]) -> None:
    """Remove the ``trials`` files streamed comparisons wrote for ``--output``."""
    for result in results:
        if result.trials_file is not None:
            result.trials_file.unlink(missing_ok=True)


async def _compare_one(
    request: CompareRequest,
    baseline: RunSource,
    treatment: RunSource,
    judge: Any,
    options: Any,
) -> ComparisonResult:
    """One treatment's comparison: from the records in memory, or pair by pair from the
    two files (writing the ``--output`` trials next to it as pairs finish)."""
    from dataclasses import replace

    from vally.comparison import judged as compare
    from vally.comparison.judged_stream import TrialWriter, compare_indexed
    from vally.comparison.pair_index import index_pairs

    (baseline_name, base), (name, treat) = baseline, treatment
    if not (isinstance(base, Path) and isinstance(treat, Path)):
        base_records = base if isinstance(base, list) else list(_records(base))
        treat_records = treat if isinstance(treat, list) else list(_records(treat))
        return await compare.compare_runs(
            baseline_name, base_records, name, treat_records, judge, options
        )
    index = index_pairs(base, treat, _already_warned)
    writer = None
    if request.output is not None:
        writer = TrialWriter(trials_part(request.output))
    try:
        result = await compare_indexed(
            baseline_name, name, index, judge, options, trials=writer, keep_results=request.verbose
        )
    except BaseException:
        if writer is not None:
            writer.close()
            writer.path.unlink(missing_ok=True)
        raise
    if writer is None:
        return result
    writer.close()
    return replace(result, trials_file=writer.path)


def _already_warned(text: str) -> None:
    """Drop a torn-line warning: :func:`_load_runs` gave it when it checked the lines."""


def _records(path: Path) -> Iterator[TrialResultRecord]:
    from vally.engine.records.run_folder import iter_records

    return iter_records(path)


def trials_part(output: Path) -> Path:
    """A fresh hidden file next to ``output`` for one comparison's ``trials`` entries."""
    import uuid

    return output.with_name(f".{output.name}.{uuid.uuid4().hex}.trials")


def panel_settings(settings: JudgeSettings) -> tuple[JudgeSettings, ...]:
    """One judge's settings per model of a comma-separated ``--judge-model a,b,c``.

    Raises:
        ConfigError: The list names a model twice or has an empty entry.
    """
    from dataclasses import replace

    models = [m.strip() for m in str(settings.model).split(",")]
    if any(not m for m in models) or len(set(models)) != len(models):
        raise ConfigError(
            f"--judge-model {settings.model!r}: a panel lists distinct, non-empty models",
            hint="write e.g. --judge-model model-a,model-b,model-c",
        )
    return tuple(replace(settings, model=m) for m in models)


def judge_spend_lines(result: ComparisonResult) -> list[str]:
    """The judge's tokens and cost, then the judge cache's hits and misses."""
    spend = result.judge_spend
    if spend is None:
        return []
    lines = [spend.tokens_line()]
    if spend.cache_hits is not None:
        lines.append(f"Judge cache: {spend.cache_hits} hits, {spend.cache_misses} misses")
    else:
        lines.append("Judge cache: off (--no-cache)")
    return lines


def execute(
    request: CompareRequest,
    session: Session | None = None,
    *,
    echo: Echo = _print_out,
    warn: Echo = _print_warning,
) -> int:
    """Run a comparison request, print it, write ``--output``; return the exit code.

    Every treatment is first compared with the baseline from their graded records, with no
    model (:mod:`vally.comparison.graded`); runs of different suites are refused there,
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

    from vally.comparison.graded_run import load_rules, rule_dimensions
    from vally.plugins.session import Session
    from vally.specs.loading import find_project
    from vally.statistics.decisions import check_confidence_level

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
        from vally.comparison.output import check_output_file

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
    from vally.comparison.graded_run import compare_paths

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
    configured (the flag, the ``--eval-spec`` defaults, ``.vally.yaml`` or
    ``EVAL_JUDGE_MODEL``)."""
    if request.judge is not None:
        return request.judge
    try:
        _judge_settings(request, session, _load_spec(request, lambda _text: None))
    except ConfigError:
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
    from vally.comparison.graded_records import comparison_json
    from vally.comparison.graded_run import apply_rules
    from vally.comparison.graded_text import comparison_lines as graded_lines, promotion_lines
    from vally.comparison.judged import exit_code
    from vally.comparison.judged_text import cleanup_warnings, comparison_lines
    from vally.comparison.output import write_output
    from vally.comparison.plan import plan_lines
    from vally.comparison.rules import WinRateEvidence

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
        from vally.comparison.junit import write_rules_junit

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
