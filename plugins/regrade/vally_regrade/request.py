"""What ``vally grade`` is asked to do (:class:`GradeOptions`, its flags) and what it returns
(:class:`RegradeOutcome`, the re-graded trials kept small by :func:`slim`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vally import TrialResultRecord


@dataclass
class GradeOptions:
    """What ``vally grade`` was asked to do (its flags).

    Attributes:
        eval_spec: The eval spec whose graders to apply, relative to the working folder.
        stimulus: The stimulus of ATIF input (needed when the prompt matches several).
        workspace: A folder file and command graders work in (used in place).
        output: ``"jsonl"`` to write the re-graded records to standard output.
        judge_model: Model for LLM judge graders.
        grader_plugins: Grader plugin specifiers to load.
        verbose: Show agent output and full evidence.
        threshold: Pass threshold 0..1, overriding the spec's.
        params: ``KEY=VALUE`` param values.
        no_cache: Judge graders send every request, bypassing the judge cache.
    """

    eval_spec: str
    stimulus: str | None = None
    workspace: str | None = None
    output: str | None = None
    judge_model: str | None = None
    grader_plugins: list[str] = field(default_factory=list)
    verbose: bool = False
    threshold: float | None = None
    params: dict[str, str] = field(default_factory=dict)
    no_cache: bool = False


@dataclass(frozen=True)
class RegradeOutcome:
    """The re-graded trials, in input order.

    Attributes:
        records: One record per graded input trial, slimmed for the summary: the
            trajectory keeps its metrics and the start of its output, not its events (the
            full records went to the reporters one by one as they were graded).
        cancelled: True when the user interrupted grading.
        to_stdout: True when the records went to standard output (``--output jsonl``), so
            anything else belongs on standard error.
    """

    records: list[TrialResultRecord]
    cancelled: bool
    to_stdout: bool
    judge_cache: str | None = None
    """The judge cache's hits and misses, when a judge was called through it."""

    def counts(self) -> tuple[int, int, int]:
        """(passed, failed, errored) over the records."""
        passed = failed = errored = 0
        for record in self.records:
            grade = record.grade_result
            if record.status != "success" or grade is None or grade.errored:
                errored += 1
            elif grade.passed:
                passed += 1
            else:
                failed += 1
        return passed, failed, errored


SUMMARY_OUTPUT_CHARS = 4000
"""Characters of a trial's output kept in :attr:`RegradeOutcome.records`."""


def slim(record: TrialResultRecord) -> TrialResultRecord:
    """``record`` as kept for the summary: no events, the output cut to
    :data:`SUMMARY_OUTPUT_CHARS` (so memory grows by a few KB per trial, whatever its size)."""
    trajectory = record.trajectory
    if trajectory is None:
        return record
    small = trajectory.model_copy(
        update={"events": [], "output": trajectory.output[:SUMMARY_OUTPUT_CHARS], "diff": None}
    )
    return record.model_copy(update={"trajectory": small})

