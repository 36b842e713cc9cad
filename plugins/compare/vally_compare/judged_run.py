"""The judged pairwise comparison of a comparison request: the pairwise judge and its LLM
provider built through the plugin session (behind the judge cache), the judge's settings,
the one check request before any pair, and each treatment judged against the baseline, in
memory or pair by pair from the two files (:mod:`vally_compare.judged_stream`).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vally import ConfigError, VallyError

if TYPE_CHECKING:
    from vally import CachedJudge, EvalSpec, JudgeSettings, LLMSettings, Session, TrialResultRecord
    from vally_compare.judged import ComparisonResult
    from vally_compare.run import CompareRequest

PAIRWISE_JUDGE = "prompt"
"""The grader whose pairwise judging the comparison uses (any installed grader of that name
whose metadata declares ``pairwise=True``)."""

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


def _print_warning(text: str) -> None:
    print(f"warning: {text}", file=sys.stderr, flush=True)


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


def load_spec(request: CompareRequest, warn: Echo) -> EvalSpec | None:
    """The ``--eval-spec`` file's spec (warning about evidence compare ignores), if given."""
    if request.eval_spec is None:
        return None
    from vally import find_project, load_eval_file

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
    from vally import (
        CachedJudge,
        JudgeCache,
        cache_root,
        is_pairwise,
        provider_config_from_settings,
    )

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
    from vally import LLMSettings

    return session.project.llm if session.project is not None else LLMSettings()


JUDGE_DEFAULTS = ("judge_model", "judge_reasoning_effort", "judge_provider", "judge_timeout")
"""The eval-spec defaults that configure a judge; standalone compare takes none of them."""


def spec_judge_note(spec: EvalSpec | None) -> str | None:
    """The warning that the ``--eval-spec`` file's judge settings are not used, when it
    sets any (None otherwise)."""
    if spec is None:
        return None
    names = [name for name in JUDGE_DEFAULTS if getattr(spec.defaults, name) is not None]
    if not names:
        return None
    return (
        f"the --eval-spec file's judge settings ({', '.join(names)}) are not used by vally "
        "compare, which takes only its rubrics: pass --judge-model, --judge-reasoning-effort "
        "or --judge-timeout, or set defaults.judge_model in .vally.yaml"
    )


def judge_settings(
    request: CompareRequest, session: Session, spec: EvalSpec | None
) -> JudgeSettings:
    """The judge's settings: the request's (the flags, or for ``experiment run --compare``
    the settings the selected evals share), then ``.vally.yaml`` ``defaults.judge_model``,
    then the ``EVAL_JUDGE_*`` environment variables. Nothing comes from ``spec`` (the
    ``--eval-spec`` file): it is read only to say, when no model is found, that its
    ``judge_model`` is not inherited.

    Raises:
        ConfigError: No judge model is configured.
    """
    from vally import JudgeSettings
    from vally_compare.judge_preflight import resolve_judge_model

    project = session.project.defaults if session.project is not None else None
    model = resolve_judge_model(
        request.judge_model,
        project.judge_model if project is not None else None,
        spec_model=spec.defaults.judge_model if spec is not None else None,
    )
    return JudgeSettings(
        model=model,
        reasoning_effort=request.judge_reasoning_effort
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

    Runs given as files are compared pair by pair (:mod:`vally_compare.judged_stream`);
    with ``request.output`` each result's ``trials_file`` then holds its ``trials``
    entries (the caller removes it).

    Raises:
        ConfigError: No judge model is configured.
        LLMError: The judge's provider failed the one check request sent before any pair.
    """
    from dataclasses import replace

    from vally import PriceTable
    from vally_compare import judged as compare, judged_pairs as judging
    from vally_compare.judge_preflight import check_judge

    spec = load_spec(request, warn)
    note = spec_judge_note(spec)
    if note is not None:
        warn(note)
    settings = judge_settings(request, session, spec)
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
    options = judging.CompareOptions(
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

    from vally_compare.judged_pairs import compare_runs
    from vally_compare.judged_stream import TrialWriter, compare_indexed
    from vally_compare.pair_index import index_pairs

    (baseline_name, base), (name, treat) = baseline, treatment
    if not (isinstance(base, Path) and isinstance(treat, Path)):
        base_records = base if isinstance(base, list) else list(_records(base))
        treat_records = treat if isinstance(treat, list) else list(_records(treat))
        return await compare_runs(baseline_name, base_records, name, treat_records, judge, options)
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
    """Drop a torn-line warning: :func:`vally_compare.run.execute` gave it when it checked
    the lines."""


def _records(path: Path) -> Iterator[TrialResultRecord]:
    from vally import iter_records

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
