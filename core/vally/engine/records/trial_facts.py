"""The few facts of a trial record that summaries and merges need, read without building
the record.

``vally experiment merge`` passes every shard line through unchanged; what it needs from a
line is its trial key (to check it against the shard's manifest) and what the run summary
counts (verdict, status, metrics, usage, times). :func:`facts_from_json` validates only
those fields of a parsed line, about ten times cheaper than validating the whole record
with pydantic; :meth:`TrialFacts.of_record` gives the same facts from a record already
built, so both feed one :class:`~vally.engine.records.tally.EvalTally`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ValidationError

from vally.engine.records.run_folder import model_label
from vally.errors import ConfigError
from vally.models.cost import Cost
from vally.models.records import TrialResultRecord
from vally.models.usage import JudgeCacheCounts, TokenTotals, Usage

M = TypeVar("M", bound=BaseModel)

STATUSES = frozenset({"success", "error", "cancelled"})
"""The values of a record's ``status``."""

USAGE_FIELDS = ("calls", "inputTokens", "outputTokens", "cacheReadTokens", "totalTokens")
"""The counters of each side (``agent``, ``judge``) of a record's ``usage``, in the order
:attr:`TrialFacts.usage` holds them."""

if TYPE_CHECKING:
    from vally.engine.records.run_folder import Warn

_TOTALS = ("calls", "input_tokens", "output_tokens", "cache_read_tokens", "total_tokens")

BAD_LINE_HINT = "each line must be one JSON trial record as written by vally eval"


class TrialFacts:
    """What a summary counts and a merge checks of one trial record.

    Attributes:
        variant: The record's variant ("" when it has none).
        eval_name: The eval.
        stimulus_name: The stimulus.
        model: The model (None for the default).
        trial_index: The trial's index.
        status: ``success``, ``error`` or ``cancelled``.
        stimulus_has_graders: The stimulus declares graders of its own.
        graded: The record has a grade result.
        passed: The grade result passed.
        score: The grade result's score.
        has_graders: The grade result came from graders.
        grade_errored: A grader errored.
        trajectory: The record has a trajectory (the metrics below are its).
        tokens: The trajectory's total tokens.
        turns: Its turns.
        tool_calls: Its tool calls.
        wall_time_ms: Its wall time.
        errors: Its errors.
        usage: The agent's then the judges' token counters, as :data:`USAGE_FIELDS`.
        started_at: When the trial started.
        completed_at: When it completed.
        offloaded: The record points to offloaded texts (their paths may need moving).
        cost: The record's cost (None when the line has none).
        judge_cache: How the judge cache answered its judges (None when not recorded).
    """

    __slots__ = (
        "completed_at",
        "cost",
        "errors",
        "eval_name",
        "grade_errored",
        "graded",
        "has_graders",
        "judge_cache",
        "model",
        "offloaded",
        "passed",
        "score",
        "started_at",
        "status",
        "stimulus_has_graders",
        "stimulus_name",
        "tokens",
        "tool_calls",
        "trajectory",
        "trial_index",
        "turns",
        "usage",
        "variant",
        "wall_time_ms",
    )

    def __init__(self) -> None:
        self.variant = self.eval_name = self.stimulus_name = self.status = ""
        self.model: str | None = None
        self.trial_index = 0
        self.stimulus_has_graders = self.graded = self.passed = False
        self.has_graders = self.grade_errored = self.trajectory = self.offloaded = False
        self.score = 0.0
        self.tokens = self.turns = self.tool_calls = self.wall_time_ms = self.errors = 0
        self.usage: tuple[int, ...] = (0,) * (2 * len(USAGE_FIELDS))
        self.started_at = self.completed_at = ""
        self.cost: Cost | None = None
        self.judge_cache: JudgeCacheCounts | None = None

    @property
    def errored(self) -> bool:
        """An operational error, no grade result, or an errored grader."""
        return self.status != "success" or not self.graded or self.grade_errored

    @property
    def key_id(self) -> str:
        """The trial's key as one string: ``variant/eval/stimulus/model/trial``."""
        return "/".join(
            (
                self.variant,
                self.eval_name,
                self.stimulus_name,
                model_label(self.model),
                str(self.trial_index),
            )
        )

    @classmethod
    def of_record(cls, record: TrialResultRecord) -> TrialFacts:
        """The facts of a record already built."""
        facts = cls()
        facts.variant = record.variant or ""
        facts.eval_name = record.eval_name
        facts.stimulus_name = record.stimulus_name
        facts.model = record.model
        facts.trial_index = record.trial_index
        facts.status = record.status
        facts.stimulus_has_graders = bool(record.stimulus.graders)
        grade = record.grade_result
        if grade is not None:
            facts.graded = True
            facts.passed, facts.score = grade.passed, grade.score
            facts.has_graders, facts.grade_errored = grade.has_graders, grade.errored
        if record.trajectory is not None:
            metrics = record.trajectory.metrics
            facts.trajectory = True
            facts.tokens = metrics.token_usage.total_tokens
            facts.turns, facts.tool_calls = metrics.turn_count, metrics.tool_call_count
            facts.wall_time_ms, facts.errors = metrics.wall_time_ms, metrics.error_count
        agent, judge = record.usage.agent, record.usage.judge
        facts.usage = tuple(getattr(side, name) for side in (agent, judge) for name in _TOTALS)
        facts.started_at, facts.completed_at = record.started_at, record.completed_at
        facts.offloaded = bool(record.offloaded)
        facts.cost, facts.judge_cache = record.cost, record.usage.judge_cache
        return facts


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


def _text(data: Mapping[str, Any], name: str, *, optional: bool = False) -> Any:
    value = data.get(name)
    if isinstance(value, str) or (optional and value is None):
        return value
    if name not in data:
        raise FieldError(f"{name} is missing")
    wanted = "a string or null" if optional else "a string"
    raise FieldError(f"{name} must be {wanted}, not {_kind(value)}")


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


def _grade(facts: TrialFacts, data: Mapping[str, Any]) -> None:
    grade = _object(data, "gradeResult", "", optional=True)
    if grade is None:
        return
    facts.graded = True
    facts.passed = _flag(grade, "passed", "gradeResult.")
    score = grade.get("score")
    if type(score) is not int and type(score) is not float:
        raise FieldError(f"gradeResult.score must be a number, not {_kind(score)}")
    facts.score = float(score)
    facts.has_graders = _flag(grade, "hasGraders", "gradeResult.")
    facts.grade_errored = _flag(grade, "errored", "gradeResult.")


def _metrics(facts: TrialFacts, data: Mapping[str, Any]) -> None:
    trajectory = _object(data, "trajectory", "", optional=True)
    if trajectory is None:
        return
    facts.trajectory = True
    metrics = _object(trajectory, "metrics", "trajectory.", optional=True) or {}
    where = "trajectory.metrics."
    tokens = _object(metrics, "tokenUsage", where, optional=True) or {}
    facts.tokens = _integer(tokens, "totalTokens", where + "tokenUsage.", 0)
    facts.turns = _integer(metrics, "turnCount", where, 0)
    facts.tool_calls = _integer(metrics, "toolCallCount", where, 0)
    facts.wall_time_ms = _integer(metrics, "wallTimeMs", where, 0)
    facts.errors = _integer(metrics, "errorCount", where, 0)


def _usage(facts: TrialFacts, data: Mapping[str, Any]) -> None:
    usage = _object(data, "usage", "", optional=True)
    if not usage:
        return
    values: list[int] = []
    for side in ("agent", "judge"):
        totals = _object(usage, side, "usage.", optional=True) or {}
        values.extend(_integer(totals, name, f"usage.{side}.", 0) for name in USAGE_FIELDS)
    facts.usage = tuple(values)


def _model_field(model: type[M], value: Any, where: str) -> M:
    if not isinstance(value, dict):
        raise FieldError(f"{where} must be an object, not {_kind(value)}")
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(part) for part in first["loc"])
        raise FieldError(f"{where}.{field}: {first['msg']}") from None


def _spend(facts: TrialFacts, data: Mapping[str, Any]) -> None:
    """The line's ``cost`` and ``usage.judgeCache`` (both optional)."""
    cost = data.get("cost")
    if cost is not None:
        facts.cost = _model_field(Cost, cost, "cost")
    usage = data.get("usage")
    cache = usage.get("judgeCache") if isinstance(usage, dict) else None
    if cache is not None:
        facts.judge_cache = _model_field(JudgeCacheCounts, cache, "usage.judgeCache")


def facts_from_json(data: Mapping[str, Any]) -> TrialFacts:
    """The facts of one parsed ``trial-result`` line, checking only the fields they come
    from (the rest of the line is not looked at).

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
    usage, offloaded = get("usage"), get("offloaded")
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
    facts = TrialFacts()
    facts.variant, facts.eval_name, facts.stimulus_name = variant or "", eval_name, stimulus_name
    facts.model, facts.trial_index, facts.status = model, trial_index, status
    facts.started_at, facts.completed_at = started, completed
    facts.stimulus_has_graders, facts.offloaded = bool(graders), bool(offloaded)
    if grade is not None and not _plain_grade(facts, grade):
        return None
    try:
        if trajectory is not None:
            _metrics(facts, data)
        if usage:
            _usage(facts, data)
        _spend(facts, data)
    except FieldError:
        return None
    return facts


def _plain_grade(facts: TrialFacts, grade: Mapping[str, Any]) -> bool:
    """Take a well-formed ``gradeResult``'s facts; False when a field is not of its type."""
    passed, score = grade.get("passed"), grade.get("score")
    has_graders, errored = grade.get("hasGraders"), grade.get("errored")
    if not (
        type(passed) is bool
        and (type(score) is float or type(score) is int)
        and type(has_graders) is bool
        and type(errored) is bool
    ):
        return False
    facts.graded, facts.passed, facts.score = True, passed, float(score)
    facts.has_graders, facts.grade_errored = has_graders, errored
    return True


def _checked_facts(data: Mapping[str, Any]) -> TrialFacts:
    """:func:`facts_from_json` field by field, raising on the first bad one."""
    facts = TrialFacts()
    facts.variant = _text(data, "variant", optional=True) or ""
    facts.eval_name = _text(data, "evalName")
    facts.stimulus_name = _text(data, "stimulusName")
    facts.model = _text(data, "model", optional=True)
    facts.trial_index = _integer(data, "trialIndex", "")
    status = data.get("status")
    if not isinstance(status, str) or status not in STATUSES:
        raise FieldError(
            f"status must be one of {', '.join(sorted(STATUSES))}, not {status!r}"
            if "status" in data
            else "status is missing"
        )
    facts.status = status
    stimulus = _object(data, "stimulus", "", optional=False)
    graders = stimulus.get("graders")
    if graders is not None and not isinstance(graders, list):
        raise FieldError(f"stimulus.graders must be a list, not {_kind(graders)}")
    facts.stimulus_has_graders = bool(graders)
    _grade(facts, data)
    _metrics(facts, data)
    _usage(facts, data)
    _spend(facts, data)
    facts.started_at = _text(data, "startedAt")
    facts.completed_at = _text(data, "completedAt")
    offloaded = data.get("offloaded")
    if offloaded is not None and not isinstance(offloaded, list):
        raise FieldError(f"offloaded must be a list, not {_kind(offloaded)}")
    facts.offloaded = bool(offloaded)
    return facts


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
