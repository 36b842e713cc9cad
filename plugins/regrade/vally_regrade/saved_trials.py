"""Read saved trials back: the input of ``vally grade``.

The input is JSON Lines (one document per line) or one JSON document (an object or an
array, possibly spread over several lines). Each document's shape is detected:

* ``{"type": "trial-result", ...}``: a line of ``results.jsonl`` or ``vally eval --output
  jsonl`` -> :class:`vally.TrialResultRecord`;
* ``{"type": "run-summary", ...}``: skipped (older versions appended one to the results);
* a document with ``schema_version`` and ``steps``: an ATIF trajectory (Agent Trajectory
  Interchange Format), mapped onto a :class:`vally.Trajectory` (:mod:`vally_regrade.atif`);
* a document with ``events`` and ``stimulus``: a bare trajectory;
* a document with a ``trajectory`` object (``{stimulus, trajectory, gradeResult, ...}``): a
  legacy ``EvalOutcome``; its trajectory is read and its stimulus filled in when missing.

Blank lines are skipped. A line that is not JSON, or a document of no known shape, is a
:class:`vally.ConfigError` naming the source and the line.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TextIO

from pydantic import ValidationError

from vally import (
    ConfigError,
    JsonTooDeepError,
    SourceLocation,
    Stimulus,
    Trajectory,
    TrialResultRecord,
    loads_bounded,
    record_depth,
)
from vally_regrade.atif import atif_to_trajectory
from vally_regrade.formats import FORMAT_KEY, InputFormat


@dataclass(frozen=True)
class SavedTrial:
    """One trial read from the input.

    Attributes:
        format: The shape it was detected as.
        line: The 1-based line where its document starts.
        value: The record or trajectory.
    """

    format: InputFormat
    line: int
    value: TrialResultRecord | Trajectory

    @property
    def trajectory(self) -> Trajectory | None:
        """The trajectory to grade (a record's trajectory, or the value itself)."""
        if isinstance(self.value, Trajectory):
            return self.value
        return self.value.trajectory

    @property
    def stimulus_name(self) -> str | None:
        """The stimulus this trial claims to belong to (None for ATIF input)."""
        if self.format == "atif":
            return None
        if isinstance(self.value, TrialResultRecord):
            return self.value.stimulus_name
        return self.value.stimulus.name


def read_records(
    stream: TextIO | Iterable[str], *, source: str = "<stdin>"
) -> list[TrialResultRecord | Trajectory]:
    """Read every trial of ``stream`` (see the module docs for the accepted shapes).

    Args:
        stream: A text stream or any iterable of lines.
        source: How to name the input in error messages.

    Raises:
        ConfigError: A line is not JSON or holds no known shape (message names the line).
    """
    return [item.value for item in read_trials(stream, source=source)]


def read_trials(stream: TextIO | Iterable[str], *, source: str = "<stdin>") -> list[SavedTrial]:
    """Like :func:`read_records`, keeping each item's detected format and line."""
    return list(iter_trials(stream, source=source))


def iter_trials(
    stream: TextIO | Iterable[str],
    *,
    source: str = "<stdin>",
    warn: Callable[[str], None] | None = None,
) -> Iterator[SavedTrial]:
    """The trials of ``stream``, one at a time.

    JSON Lines input is read line by line, so memory does not grow with the number of
    trials; a torn last line (no line end, not JSON: a killed writer) is skipped with a
    warning to ``warn``. Input whose first document spans several lines is read whole as
    one JSON document (an object, or an array of them).

    Raises:
        ConfigError: A line is not JSON or holds no known shape (message names the line).
    """
    lines = iter(stream)
    for line_no, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            document = _parse(line, line_no, source)
        except json.JSONDecodeError as exc:
            rest = "".join(_ended(x) for x in lines)
            if not rest.strip() and not line.endswith("\n") and warn is not None:
                warn(
                    f"{source}: line {line_no} is incomplete (no line end: its writer was "
                    "killed while writing it); it is skipped"
                )
                return
            yield from _whole_document(line_no, _ended(line), rest, exc, source)
            return
        if isinstance(document, list):
            following = next((x for x in lines if x.strip()), None)
            if following is not None:  # JSON Lines whose first line is an array: refused
                yield from _convert_document(document, line_no, source)
            for element in document:  # one array holding every document
                yield from _convert_document(element, line_no, source)
            return
        yield from _convert_document(document, line_no, source)
        yield from _json_lines(lines, line_no + 1, source, warn)
        return


def _parse(text: str, line_no: int, source: str) -> Any:
    """``text`` parsed as JSON, nesting bounded (a too-deep document is a located error).

    Raises:
        ConfigError: The document nests deeper than the record depth limit.
        json.JSONDecodeError: It is not JSON.
    """
    try:
        return loads_bounded(text, max_depth=record_depth())
    except JsonTooDeepError as exc:
        raise ConfigError(
            f"line {line_no}: {exc}",
            location=_location(source, line_no),
            hint="expected records as vally writes them; remove that line, or raise the limit",
        ) from None


def _ended(line: str) -> str:
    return line if line.endswith("\n") else line + "\n"


def _json_lines(
    lines: Iterator[str], first: int, source: str, warn: Callable[[str], None] | None
) -> Iterator[SavedTrial]:
    """The items of the JSON Lines after the first document."""
    for line_no, line in enumerate(lines, first):
        if not line.strip():
            continue
        try:
            document = _parse(line, line_no, source)
        except json.JSONDecodeError as exc:
            if not line.endswith("\n"):
                if warn is not None:
                    warn(
                        f"{source}: line {line_no} is incomplete ({len(line):,} characters, "
                        "no line end: its writer was killed while writing it); it is skipped"
                    )
                return
            raise ConfigError(
                f"line {line_no} is not valid JSON ({exc.msg} at column {exc.colno})",
                location=_location(source, line_no),
                hint=_JSONL_HINT,
            ) from exc
        yield from _convert_document(document, line_no, source)


_JSONL_HINT = (
    "expected JSON Lines: one trial record, trajectory or ATIF document per line (as "
    "written by `vally eval --output jsonl`)"
)


def _whole_document(
    first_line: int,
    head: str,
    rest: str,
    line_error: json.JSONDecodeError,
    source: str,
) -> Iterator[SavedTrial]:
    """The items of input whose first line is not a JSON document by itself: one JSON
    document spread over lines (an object, or an array of them)."""
    text = "\n" * (first_line - 1) + head + rest
    try:
        document = _parse(text, first_line, source)
    except json.JSONDecodeError as exc:
        if exc.msg != "Extra data":
            # One JSON document spread over lines, broken somewhere inside.
            line_no, column, message = exc.lineno, exc.colno, exc.msg
        else:
            line_no, column, message = first_line, line_error.colno, line_error.msg
        raise ConfigError(
            f"line {line_no} is not valid JSON ({message} at column {column})",
            location=_location(source, line_no),
            hint=_JSONL_HINT,
        ) from exc
    for element in document if isinstance(document, list) else [document]:
        yield from _convert_document(element, first_line, source)


# ----------------------------------------------------------------------------- parsing


def _location(source: str, line: int) -> SourceLocation:
    return SourceLocation(source, line)


def _validation_message(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors()[:3]:
        where = ".".join(str(p) for p in error["loc"]) or "(document)"
        parts.append(f"{where}: {error['msg']}")
    more = f" (+{exc.error_count() - 3} more)" if exc.error_count() > 3 else ""
    return "; ".join(parts) + more


def _convert_document(document: Any, line: int, source: str) -> list[SavedTrial]:
    where = _location(source, line)
    if not isinstance(document, dict):
        raise ConfigError(
            f"line {line} holds a JSON {type(document).__name__}, not an object",
            location=where,
            hint="each line must be one JSON object (a trial record or a trajectory)",
        )
    kind = document.get("type")
    try:
        if kind == "trial-result":
            return [SavedTrial("trial-result", line, TrialResultRecord.model_validate(document))]
        if kind == "run-summary":
            return []
        if "schema_version" in document and "steps" in document:
            return [SavedTrial("atif", line, atif_to_trajectory(document))]
        if "events" in document and "stimulus" in document:
            trajectory = _tag(Trajectory.model_validate(document), "trajectory")
            return [SavedTrial("trajectory", line, trajectory)]
        if isinstance(document.get("trajectory"), dict):
            return [SavedTrial("eval-outcome", line, _eval_outcome(document))]
    except ValidationError as exc:
        label = kind if isinstance(kind, str) else "trajectory"
        raise ConfigError(
            f"line {line} looks like a {label} document but is invalid: {_validation_message(exc)}",
            location=where,
        ) from exc
    except ValueError as exc:
        raise ConfigError(f"line {line}: {exc}", location=where) from exc
    keys = ", ".join(sorted(document)[:8]) or "none"
    raise ConfigError(
        f"line {line} is not a trial record, trajectory, EvalOutcome or ATIF document "
        f"(keys: {keys})",
        location=where,
        hint="pipe the output of `vally eval --output jsonl`, a results.jsonl file, or ATIF "
        "trajectories (with schema_version and steps)",
    )


def _tag(trajectory: Trajectory, fmt: InputFormat) -> Trajectory:
    extra = {**trajectory.metadata.extra, FORMAT_KEY: fmt}
    metadata = trajectory.metadata.model_copy(update={"extra": extra})
    return trajectory.model_copy(update={"metadata": metadata})


def _loose_stimulus(value: Any) -> Stimulus | None:
    """A stimulus from a full object, a partial one (``{name, prompt}``) or a bare name."""
    if isinstance(value, str) and value.strip():
        return Stimulus(name=value, prompt="")
    if not isinstance(value, Mapping):
        return None
    try:
        return Stimulus.model_validate(value)
    except ValidationError:
        name = value.get("name")
        if not isinstance(name, str) or not name.strip():
            return None
        prompt = value.get("prompt")
        return Stimulus(name=name, prompt=prompt if isinstance(prompt, str) else "")


def _eval_outcome(document: Mapping[str, Any]) -> Trajectory:
    raw = dict(document["trajectory"])
    outer = _loose_stimulus(document.get("stimulus")) or _loose_stimulus(
        document.get("stimulusName")
    )
    inner = _loose_stimulus(raw.get("stimulus"))
    stimulus = inner or outer
    if stimulus is None:
        raise ValueError(
            "the EvalOutcome names no stimulus (neither 'stimulus' nor 'trajectory.stimulus')"
        )
    raw["stimulus"] = stimulus
    return _tag(Trajectory.model_validate(raw), "eval-outcome")
