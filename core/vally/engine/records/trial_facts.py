"""The facts of a trial record that summaries, merges and report counters need, read
without building the record.

``vally experiment merge`` passes every shard line through unchanged; what it needs from a
line is its trial key (to check it against the shard's manifest), what the run summary
counts (verdict, status, metrics, usage, times) and what the reporters' counters count
(the same, and of a trial that failed its error, failing graders and violated
constraints). :func:`facts_from_json` validates only those fields of a parsed line, many
times cheaper than validating the whole record with pydantic (only a failing grader's
result, and an error, are validated whole); :meth:`vally.models.facts.TrialFacts.of_record`
gives the same facts from a record already built, so both feed one
:class:`~vally.engine.records.tally.EvalTally` or counter.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ValidationError

from vally.errors import ConfigError
from vally.models.cost import Cost
from vally.models.facts import USAGE_FIELDS as USAGE_FIELDS, TrialFacts as TrialFacts
from vally.models.records import GraderResult, TrialError
from vally.models.usage import JudgeCacheCounts, TokenTotals, Usage

M = TypeVar("M", bound=BaseModel)

STATUSES = frozenset({"success", "error", "cancelled"})
"""The values of a record's ``status``."""

GRADER_STATUSES = ("success", "error")
"""The values of a grader result's ``status``."""

if TYPE_CHECKING:
    from vally.engine.records.run_folder import Warn

BAD_LINE_HINT = "each line must be one JSON trial record as written by vally eval"

_new_facts = tuple.__new__
"""Makes a :class:`TrialFacts` of its values in field order: the constructor matching a
keyword for each of its fields takes about 1 us, most of what checking a small line's
fields costs (``tests/experiments/test_merge_lines.py`` checks the order)."""
_NO_USAGE = (0,) * (2 * len(USAGE_FIELDS))
_NO_TOTALS = (0,) * len(USAGE_FIELDS)
_INTEGERS = {int}
_NO_CACHE_HITS = {"hits": 0, "misses": 0}
_NO_CACHE = JudgeCacheCounts()
"""The judge cache counts of a trial whose judges asked nothing (shared: facts are read,
never changed)."""
_NO_METRICS: tuple[int, int, int, int, int, str | None] = (0, 0, 0, 0, 0, None)


def usage_of(counters: Sequence[int]) -> Usage:
    """Counters laid out as :attr:`TrialFacts.usage` (e.g. their sums) as a
    :class:`~vally.models.usage.Usage`."""
    half = len(USAGE_FIELDS)
    return Usage(agent=_totals(counters[:half]), judge=_totals(counters[half:]))


def _totals(values: Sequence[int]) -> TokenTotals:
    calls, inputs, outputs, cache_read, total = values
    return TokenTotals(
        calls=calls,
        input_tokens=inputs,
        output_tokens=outputs,
        cache_read_tokens=cache_read,
        total_tokens=total,
    )


class FieldError(ValueError):
    """A field of a record line that is missing or of the wrong type; the message names
    the field as a JSON path (``gradeResult.passed``) and what it holds."""


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _text(data: Mapping[str, Any], name: str, where: str = "", *, optional: bool = False) -> Any:
    value = data.get(name)
    if isinstance(value, str) or (optional and value is None):
        return value
    if name not in data:
        raise FieldError(f"{where}{name} is missing")
    wanted = "a string or null" if optional else "a string"
    raise FieldError(f"{where}{name} must be {wanted}, not {_kind(value)}")


def _integer(data: Mapping[str, Any], name: str, where: str, default: int | None = None) -> int:
    value = data.get(name, default)
    if type(value) is int:
        return value
    if value is None and name not in data:
        raise FieldError(f"{where}{name} is missing")
    raise FieldError(f"{where}{name} must be an integer, not {_kind(value)}")


def _flag(data: Mapping[str, Any], name: str, where: str) -> bool:
    value = data.get(name)
    if type(value) is bool:
        return value
    if name not in data:
        raise FieldError(f"{where}{name} is missing")
    raise FieldError(f"{where}{name} must be true or false, not {_kind(value)}")


def _object(data: Mapping[str, Any], name: str, where: str, *, optional: bool) -> Any:
    value = data.get(name)
    if isinstance(value, dict) or (optional and value is None):
        return value
    if name not in data:
        if optional:
            return None
        raise FieldError(f"{where}{name} is missing")
    raise FieldError(f"{where}{name} must be an object, not {_kind(value)}")


def _model_field(model: type[M], value: Any, where: str) -> M:
    if not isinstance(value, dict):
        raise FieldError(f"{where} must be an object, not {_kind(value)}")
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(part) for part in first["loc"])
        raise FieldError(f"{where}.{field}: {first['msg']}") from None


def _failed_graders(details: Any) -> tuple[GraderResult, ...]:
    """The graders of a grade result's ``details`` that failed or errored, each validated
    whole; the others' ``passed`` and ``status`` only."""
    if details is None or details == []:
        return ()
    if type(details) is not list:
        raise FieldError(f"gradeResult.details must be a list, not {_kind(details)}")
    failed: list[GraderResult] = []
    for at, detail in enumerate(details):
        where = f"gradeResult.details[{at}]"
        if type(detail) is not dict:
            raise FieldError(f"{where} must be an object, not {_kind(detail)}")
        passed, status = detail.get("passed"), detail.get("status", "success")
        if type(passed) is not bool:
            _flag(detail, "passed", where + ".")
        if status not in GRADER_STATUSES or type(status) is not str:
            raise FieldError(f"{where}.status must be success or error, not {status!r}")
        if not passed or status == "error":
            failed.append(_model_field(GraderResult, detail, where))
    return tuple(failed)


def _violations(value: Any) -> tuple[str, ...]:
    """A grade result's ``constraintViolations``."""
    if value is None or value == []:
        return ()
    if type(value) is not list or not all(type(item) is str for item in value):
        raise FieldError("gradeResult.constraintViolations must be a list of strings")
    return tuple(value)


def _metrics(trajectory: Mapping[str, Any]) -> tuple[int, int, int, int, int, str | None]:
    """A trajectory's tokens, turns, tool calls, wall time, errors and reported model."""
    metrics = _object(trajectory, "metrics", "trajectory.", optional=True) or {}
    where = "trajectory.metrics."
    tokens = _object(metrics, "tokenUsage", where, optional=True) or {}
    metadata = _object(trajectory, "metadata", "trajectory.", optional=True) or {}
    return (
        _integer(tokens, "totalTokens", where + "tokenUsage.", 0),
        _integer(metrics, "turnCount", where, 0),
        _integer(metrics, "toolCallCount", where, 0),
        _integer(metrics, "wallTimeMs", where, 0),
        _integer(metrics, "errorCount", where, 0),
        _text(metadata, "model", "trajectory.metadata.", optional=True),
    )


def _usage(usage: Mapping[str, Any]) -> tuple[int, ...]:
    """A record's ``usage`` counters, as :attr:`TrialFacts.usage`."""
    agent, judge = usage.get("agent"), usage.get("judge")
    if type(agent) is dict and type(judge) is dict:  # as vally writes it: read in C
        values = (
            *map(agent.get, USAGE_FIELDS, _NO_TOTALS),
            *map(judge.get, USAGE_FIELDS, _NO_TOTALS),
        )
        if set(map(type, values)) == _INTEGERS:
            return values
    return _checked_usage(usage)


def _checked_usage(usage: Mapping[str, Any]) -> tuple[int, ...]:
    """:func:`_usage` field by field, raising on the first bad one."""
    values: list[int] = []
    for side in ("agent", "judge"):
        totals = _object(usage, side, "usage.", optional=True) or {}
        values.extend(_integer(totals, name, f"usage.{side}.", 0) for name in USAGE_FIELDS)
    return tuple(values)


def _spend(data: Mapping[str, Any]) -> tuple[Cost | None, JudgeCacheCounts | None]:
    """The line's ``cost`` and ``usage.judgeCache`` (both optional)."""
    cost = data.get("cost")
    usage = data.get("usage")
    cache = usage.get("judgeCache") if isinstance(usage, dict) else None
    return (
        None if cost is None else _model_field(Cost, cost, "cost"),
        None if cache is None else _judge_cache(cache),
    )


def _judge_cache(value: Any) -> JudgeCacheCounts:
    """A record's ``usage.judgeCache`` (most records': no judge asked, one shared value)."""
    if value == _NO_CACHE_HITS:
        return _NO_CACHE
    return _model_field(JudgeCacheCounts, value, "usage.judgeCache")


def _error(value: Any) -> TrialError | None:
    """A record's ``error``."""
    return None if value is None else _model_field(TrialError, value, "error")


def facts_from_json(data: Mapping[str, Any]) -> TrialFacts:
    """The facts of one parsed ``trial-result`` line, checking only the fields they come
    from (the rest of the line is not looked at; of the grade result's graders, only
    those that failed or errored are validated whole).

    Raises:
        FieldError: A field the facts come from is missing or of the wrong type.
    """
    facts = _plain_facts(data)
    return facts if facts is not None else _checked_facts(data)


def _plain_facts(data: Mapping[str, Any]) -> TrialFacts | None:
    """The facts of a well-formed line in one pass, or None when any field the facts
    come from is not of its usual type (:func:`_checked_facts` then says which)."""
    get = data.get
    variant, model, status = get("variant"), get("model"), get("status")
    eval_name, stimulus_name = get("evalName"), get("stimulusName")
    trial_index, started, completed = get("trialIndex"), get("startedAt"), get("completedAt")
    stimulus, grade, trajectory = get("stimulus"), get("gradeResult"), get("trajectory")
    usage, offloaded, error = get("usage"), get("offloaded"), get("error")
    if not (
        (variant is None or type(variant) is str)
        and (model is None or type(model) is str)
        and type(eval_name) is str
        and type(stimulus_name) is str
        and type(trial_index) is int
        and type(status) is str
        and status in STATUSES
        and type(started) is str
        and type(completed) is str
        and type(stimulus) is dict
        and (grade is None or type(grade) is dict)
        and (trajectory is None or type(trajectory) is dict)
        and (usage is None or type(usage) is dict)
        and (offloaded is None or type(offloaded) is list)
    ):
        return None
    graders = stimulus.get("graders")
    if graders is not None and type(graders) is not list:
        return None
    cost, cache = get("cost"), usage.get("judgeCache") if usage else None
    try:
        grading = _NO_GRADE if grade is None else _plain_grade(grade)
        if grading is None:
            return None
        metrics = _NO_METRICS if trajectory is None else _metrics(trajectory)
        counters = _usage(usage) if usage else _NO_USAGE
        cost = None if cost is None else _model_field(Cost, cost, "cost")
        cache = None if cache is None else _judge_cache(cache)
        error = None if error is None else _error(error)
    except FieldError:
        return None
    passed, score, has_graders, grade_errored, failed, violations = grading
    return _new_facts(
        TrialFacts,
        (
            variant or "",
            eval_name,
            stimulus_name,
            model,
            trial_index,
            status,
            bool(graders),  # stimulus_has_graders
            grade is not None,  # graded
            passed,
            score,
            has_graders,
            grade_errored,
            trajectory is not None,
            metrics[0],  # tokens
            metrics[1],  # turns
            metrics[2],  # tool_calls
            metrics[3],  # wall_time_ms
            metrics[4],  # errors
            counters,  # usage
            started,
            completed,
            bool(offloaded),
            cost,
            cache,  # judge_cache
            error,
            failed,  # failed_graders
            violations,  # constraint_violations
            metrics[5],  # reported_model
        ),
    )


Grading = tuple[bool, float, bool, bool, tuple[GraderResult, ...], tuple[str, ...]]
"""What the facts take of a grade result: passed, score, has graders, errored, the graders
that failed or errored, the violated constraints."""
_NO_GRADE: Grading = (False, 0.0, False, False, (), ())


def _plain_grade(grade: Mapping[str, Any]) -> Grading | None:
    """A well-formed grade result's facts, or None when a field of its own is not of its
    type (:func:`_checked_facts` then says which).

    Raises:
        FieldError: A grader result or the violated constraints are bad.
    """
    passed, score = grade.get("passed"), grade.get("score")
    has_graders, errored = grade.get("hasGraders"), grade.get("errored")
    if not (
        type(passed) is bool
        and (type(score) is float or type(score) is int)
        and type(has_graders) is bool
        and type(errored) is bool
    ):
        return None
    details, broken = grade.get("details"), grade.get("constraintViolations")
    failed = () if details is None or details == [] else _failed_graders(details)
    violations = () if broken is None or broken == [] else _violations(broken)
    return passed, float(score), has_graders, errored, failed, violations


def _checked_facts(data: Mapping[str, Any]) -> TrialFacts:
    """:func:`facts_from_json` field by field, raising on the first bad one."""
    variant = _text(data, "variant", optional=True) or ""
    eval_name = _text(data, "evalName")
    stimulus_name = _text(data, "stimulusName")
    model = _text(data, "model", optional=True)
    trial_index = _integer(data, "trialIndex", "")
    status = data.get("status")
    if not isinstance(status, str) or status not in STATUSES:
        raise FieldError(
            f"status must be one of {', '.join(sorted(STATUSES))}, not {status!r}"
            if "status" in data
            else "status is missing"
        )
    stimulus = _object(data, "stimulus", "", optional=False)
    graders = stimulus.get("graders")
    if graders is not None and not isinstance(graders, list):
        raise FieldError(f"stimulus.graders must be a list, not {_kind(graders)}")
    grade = _object(data, "gradeResult", "", optional=True)
    passed = has_graders = grade_errored = False
    score = 0.0
    failed: tuple[GraderResult, ...] = ()
    violations: tuple[str, ...] = ()
    if grade is not None:
        passed = _flag(grade, "passed", "gradeResult.")
        value = grade.get("score")
        if type(value) is not int and type(value) is not float:
            raise FieldError(f"gradeResult.score must be a number, not {_kind(value)}")
        score = float(value)
        has_graders = _flag(grade, "hasGraders", "gradeResult.")
        grade_errored = _flag(grade, "errored", "gradeResult.")
        failed = _failed_graders(grade.get("details"))
        violations = _violations(grade.get("constraintViolations"))
    trajectory = _object(data, "trajectory", "", optional=True)
    metrics = _NO_METRICS if trajectory is None else _metrics(trajectory)
    usage = _object(data, "usage", "", optional=True)
    counters = _usage(usage) if usage else _NO_USAGE
    cost, cache = _spend(data)
    trial_error = _error(data.get("error"))
    started_at = _text(data, "startedAt")
    completed_at = _text(data, "completedAt")
    offloaded = data.get("offloaded")
    if offloaded is not None and not isinstance(offloaded, list):
        raise FieldError(f"offloaded must be a list, not {_kind(offloaded)}")
    return TrialFacts(
        variant=variant,
        eval_name=eval_name,
        stimulus_name=stimulus_name,
        model=model,
        trial_index=trial_index,
        status=status,
        stimulus_has_graders=bool(graders),
        graded=grade is not None,
        passed=passed,
        score=score,
        has_graders=has_graders,
        grade_errored=grade_errored,
        trajectory=trajectory is not None,
        tokens=metrics[0],
        turns=metrics[1],
        tool_calls=metrics[2],
        wall_time_ms=metrics[3],
        errors=metrics[4],
        usage=counters,
        started_at=started_at,
        completed_at=completed_at,
        offloaded=bool(offloaded),
        cost=cost,
        judge_cache=cache,
        error=trial_error,
        failed_graders=failed,
        constraint_violations=violations,
        reported_model=metrics[5],
    )


def iter_fact_lines(
    handle: IO[str], where: str, warn: Warn | None = None
) -> Iterator[tuple[int, str, TrialFacts]]:
    """``(line number, line text, facts)`` for each ``trial-result`` line of an open
    results file (other record types are skipped; so is a torn last line, with a warning).

    Raises:
        ConfigError: A line is not JSON, not an object, or a field the facts come from is
            missing or of the wrong type; the message gives ``file:line`` and the field.
    """
    from vally.engine.records.run_folder import iter_raw_json_lines

    for number, line, data in iter_raw_json_lines(handle, where, warn):
        if not isinstance(data, dict):
            raise ConfigError(
                f"{where}:{number}: holds a JSON {type(data).__name__}, not a trial record object",
                hint=BAD_LINE_HINT,
            )
        if data.get("type") != "trial-result":
            continue
        try:
            facts = facts_from_json(data)
        except FieldError as exc:
            raise ConfigError(
                f"{where}:{number}: not a trial-result record: {exc}", hint=BAD_LINE_HINT
            ) from None
        yield number, line, facts


def read_fact_lines(path: Path, warn: Warn | None = None) -> Iterator[tuple[int, str, TrialFacts]]:
    """:func:`iter_fact_lines` over the file at ``path``.

    Raises:
        ConfigError: The file is unreadable or not UTF-8, or a line is bad (see
            :func:`iter_fact_lines`).
    """
    from vally.engine.records.run_folder import reading_results

    with reading_results(path) as handle:
        yield from iter_fact_lines(handle, str(path), warn)
