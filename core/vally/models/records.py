"""What vally writes: grader results, trial records (``results.jsonl``) and run summaries
(``run-summary.jsonl``).

Every record carries every field, ``null`` where a value does not apply, so scripts over
the files never meet a missing key. The schema is versioned by ``schemaVersion``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Literal, Self

from pydantic import Field
from pydantic_core import PydanticSerializationError

from vally.models.base import RecordModel, share_field_keys
from vally.models.cost import Cost
from vally.models.spec import Stimulus
from vally.models.trajectory import Trajectory
from vally.models.usage import Usage

SCHEMA_VERSION = 1

_LINE = "_vally_json_line"
"""Where a :class:`TrialResultRecord` keeps the line :meth:`TrialResultRecord.writable`
made (a key of the instance's ``__dict__`` that is no field: serialisation, equality and
iteration skip it)."""


class GraderResult(RecordModel):
    """One grader's verdict on one trial.

    ``status`` is ``error`` when the grader itself failed (operational); then ``passed`` is
    false and ``score`` 0, but the trial is reported as errored, never as a low score. When
    the grader raised an unexpected exception, ``metadata`` holds ``location`` (``path:line``
    of the grader's frame) and ``traceback``; the trial's ``error`` repeats them.
    """

    name: str
    type: str
    passed: bool
    score: float = Field(ge=0.0, le=1.0)
    evidence: str = ""
    status: Literal["success", "error"] = "success"
    required: bool = False
    weight: float = 1.0
    turn: int | None = None
    details: list[GraderResult] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)


class GradeResult(RecordModel):
    """The trial-level verdict.

    ``mode`` is ``threshold`` when a threshold decided (score >= threshold) and ``binary``
    when every grader had to pass. Required graders and constraint violations fail the
    trial in both modes.
    """

    passed: bool
    score: float
    threshold: float | None
    mode: Literal["threshold", "binary", "no-graders"]
    has_graders: bool
    errored: bool
    details: list[GraderResult] = Field(default_factory=list)
    constraint_violations: list[str] = Field(default_factory=list)


class TrialError(RecordModel):
    """An operational error of one trial: which phase, which code, what happened.

    When a plugin raised an unexpected exception (not a vally error), ``location`` is the
    ``path:line`` of the plugin's own frame where it happened and ``traceback`` the
    Python traceback (``vally --debug`` prints it); both are null otherwise.
    """

    phase: Literal["setup", "execute", "grade", "cleanup", "plan"]
    code: str
    message: str
    location: str | None = None
    traceback: str | None = None


class OffloadedText(RecordModel):
    """A text of a trial record too long to keep inline (see ``offloaded``).

    Attributes:
        pointer: Where the text is in the record, as a JSON Pointer (RFC 6901) over its
            JSON form, e.g. ``/trajectory/output`` or ``/trajectory/events/7/data/content``.
        path: The file holding the whole text (UTF-8), relative to the run folder: the
            folder of ``results.jsonl``, or of the variant folder holding it in an
            experiment run (a merged experiment's records point into the shard folders).
        chars: The length of the whole text, in characters.
        sha256: The SHA-256 of the file's bytes.
    """

    pointer: str
    path: str
    chars: int
    sha256: str


class ExperimentBlock(RecordModel):
    """Provenance of a trial run inside an experiment."""

    run_id: str
    experiment: str
    variant: str
    eval_hash: str
    config_hash: str
    baseline: str | None = None
    shard: str | None = None


class _EvalRecord(RecordModel):
    """What every line of ``results.jsonl`` and ``run-summary.jsonl`` starts with: its
    type, the schema version, and the run and eval it belongs to."""

    type: str
    schema_version: int = SCHEMA_VERSION
    run_id: str
    eval_name: str
    eval_file: str | None


class TrialResultRecord(_EvalRecord):
    """One line of ``results.jsonl``.

    Records stay small: a text of the trajectory longer than the inline limit (64 Ki
    characters) keeps only its start here, and the whole text is a file of the trial's
    folder that ``offloaded`` points to (empty when nothing was cut, and in records
    written before it existed).
    """

    type: Literal["trial-result"] = "trial-result"
    stimulus_name: str
    stimulus: Stimulus
    case_hash: str | None = None
    variant: str | None
    model: str | None
    trial_index: int
    trial_id: str
    status: Literal["success", "error", "cancelled"]
    error: TrialError | None
    started_at: str
    completed_at: str
    duration_ms: int
    tags: dict[str, str] = Field(default_factory=dict)
    grade_result: GradeResult | None
    trajectory: Trajectory | None
    experiment: ExperimentBlock | None = None
    offloaded: list[OffloadedText] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    cost: Cost = Field(default_factory=Cost)

    def writable(self) -> Self:
        """This record itself when it can be written as UTF-8 JSON (see
        :meth:`RecordModel.writable`), keeping the line that checked it for
        :meth:`to_json_line`: a trial's record is serialised once for the check and its
        ``results.jsonl`` line (and the scrubber's look for secrets), not three times."""
        try:
            line = self.model_dump_json(by_alias=True)
        except PydanticSerializationError:
            return super().writable()
        self.__dict__[_LINE] = line
        return self

    def to_json_line(self) -> str:
        """One compact JSON line (see :meth:`RecordModel.to_json_line`): the one
        :meth:`writable` made when no field was set since."""
        line = self.__dict__.get(_LINE)
        if isinstance(line, str):
            return line
        return super().to_json_line()

    def __setattr__(self, name: str, value: Any) -> None:
        """Set a field, forgetting the line :meth:`writable` kept."""
        self.__dict__.pop(_LINE, None)
        super().__setattr__(name, value)

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy (see :meth:`pydantic.BaseModel.model_copy`) without the line
        :meth:`writable` kept: an updated copy serialises itself."""
        copied = super().model_copy(update=update, deep=deep)
        copied.__dict__.pop(_LINE, None)
        return copied


class MultiTrialMetrics(RecordModel):
    """Pass rate, unbiased pass@k (Chen et al. 2021), naive pass@k and pass^k with k = n."""

    per_trial_pass_rate: float | None
    pass_at_k: float | None
    pass_at_k_naive: float | None
    pass_to_the_k: float | None
    k: int


class StimulusSummary(RecordModel):
    """Aggregates of one stimulus (for one eval, model and variant)."""

    stimulus_name: str
    model: str | None
    trials: int
    graded: int
    passed: int
    errored: int
    mean_score: float | None
    metrics: MultiTrialMetrics
    flaky: bool
    has_graders: bool
    mean_tokens: float | None
    mean_turns: float | None
    mean_tool_calls: float | None
    mean_wall_time_ms: float | None
    total_errors: int

    def model_post_init(self, context: Any, /) -> None:
        """Hold the fields in a dictionary sharing its keys with the other summaries
        (:func:`~vally.models.base.share_field_keys`): a run holds one summary a stimulus
        to its end."""
        share_field_keys(self)


class GraderIdentity(RecordModel):
    """One distinct grader of an eval (by name and type): deterministic, or judged by a
    model, and which."""

    name: str
    type: str
    judged: bool = False
    model: str | None = None


class TargetIdentity(RecordModel):
    """What an eval's cases were put to: the executor, a digest of its config, the model
    and the variant."""

    executor: str | None = None
    config_digest: str | None = None
    model: str | None = None
    variant: str | None = None


PIECED_STIMULI = 64
"""From this many stimuli on a run summary is written a stimulus at a time."""

_EMPTY_STIMULI = '"stimuli":[]'


class RunSummaryRecord(_EvalRecord):
    """One line of ``run-summary.jsonl``: one eval (and variant) of a run, with what it
    measured (``evalHash``, ``suiteHash``, ``graders``, ``target``)."""

    type: Literal["run-summary"] = "run-summary"
    variant: str | None
    eval_hash: str | None
    config_hash: str | None
    suite_hash: str | None = None
    target: TargetIdentity = Field(default_factory=TargetIdentity)
    graders: list[GraderIdentity] = Field(default_factory=list)
    threshold: float | None
    models: list[str | None]
    trials: int
    passed: int
    failed: int
    errored: int
    pass_rate: float | None
    verdict: Literal["pass", "fail", "none"]
    stimuli: list[StimulusSummary]
    started_at: str
    completed_at: str
    vally_version: str
    plugins: list[dict[str, Any]] = Field(default_factory=list)
    experiment: ExperimentBlock | None = None
    usage: Usage = Field(default_factory=Usage)
    cost: Cost = Field(default_factory=Cost)

    def json_pieces(self) -> Iterator[str]:
        """:meth:`to_json_line` in pieces: the line around an empty ``stimuli``, then its
        stimuli one at a time (a summary of 10^4 stimuli is a line of megabytes, which
        serialising whole holds twice). The line whole when its stimuli are few, not all
        plain :class:`StimulusSummary` entries, or the empty list is not found once."""
        stimuli = self.stimuli
        if len(stimuli) < PIECED_STIMULI or any(type(s) is not StimulusSummary for s in stimuli):
            yield self.to_json_line()
            return
        shell = self.model_copy(update={"stimuli": []}).to_json_line()
        if shell.count(_EMPTY_STIMULI) != 1:
            yield self.to_json_line()
            return
        head, _, tail = shell.partition(_EMPTY_STIMULI)
        yield head + '"stimuli":['
        for index, stimulus in enumerate(stimuli):
            yield "," + stimulus.to_json_line() if index else stimulus.to_json_line()
        yield "]" + tail
