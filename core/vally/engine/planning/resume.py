"""Resuming a run: reuse the finished trials of a run folder, run the rest into it.

A run writes ``run-plan.json`` when it starts: its run id and one fingerprint per planned
trial (the trial's identity, ``[variant/]eval/stimulus/model/trial``, mapped to a hash of
everything that decides what the trial does: stimulus, environment, graders, constraints,
timeout, model, executor, threshold, weights, judge settings). ``--resume <run-dir>`` plans
the same command again and compares:

* every trial of the new plan must be in the old one with the same fingerprint, and the
  other way round; otherwise the resume is refused, naming the first difference;
* a trial whose record is ``success`` (or ``error``, unless ``--retry-errors``) is reused;
  every other trial (no record, ``cancelled``, or errored with ``--retry-errors``) runs
  again under the same run id.

Before the trials run, ``results.jsonl`` (each variant's, in an experiment) is rewritten
(atomically) to hold only the reused records, byte for byte; the lines it drops are
appended to ``results.superseded.jsonl`` next to it and the folders of trials that run
again are renamed ``trial-<n>.superseded-<k>``, so nothing written before is lost.

Memory does not grow with the kept trials: deciding what is reused and rewriting the files
read them one line at a time (holding the numbers of the dropped lines), and the kept
records are read back from the rewritten files whenever the run needs them
(:class:`~vally.engine.records.record_log.ReusedRecords`).
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pydantic_core

from vally.engine.planning.plan import PlannedTrial, PlannedTrials, trial_keys
from vally.engine.records.record_log import ReusedRecords
from vally.engine.records.run_folder import (
    RESULTS_FILE,
    output_errors,
    trial_relpath,
    write_text_atomic,
)
from vally.errors import ConfigError
from vally.models.jsontext import loads_bounded
from vally.models.records import TrialResultRecord

PLAN_FILE = "run-plan.json"
SUPERSEDED_FILE = "results.superseded.jsonl"
PLAN_VERSION = 1

RERUN_HINT = "run the same command (same evals, flags and .vally.yaml) with --resume"


def trial_fingerprint(trial: PlannedTrial, *, skip_grade: bool = False) -> str:
    """A hash of everything that decides what ``trial`` does (stable across processes)."""
    document = {
        "evalFile": str(trial.loaded.source),
        "stimulus": trial.stimulus,
        "environment": trial.environment,
        "graders": list(trial.graders),
        "constraints": trial.constraints,
        "timeout": trial.timeout,
        "model": trial.model,
        "executor": trial.executor,
        "threshold": trial.threshold,
        "weights": dict(trial.weights),
        "judge": trial.judge,
        "tags": dict(trial.tags),
        "reasoningEffort": trial.reasoning_effort,
        "skipGrade": skip_grade,
    }
    plain = pydantic_core.to_jsonable_python(document, by_alias=True, fallback=str)
    text = json.dumps(plain, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def plan_document(
    trials: Sequence[PlannedTrial], *, run_id: str, command: str, skip_grade: bool
) -> dict[str, Any]:
    """The content of ``run-plan.json`` for ``trials``."""
    return {
        "version": PLAN_VERSION,
        "runId": run_id,
        "command": command,
        "trials": {t.key.as_id(): trial_fingerprint(t, skip_grade=skip_grade) for t in trials},
    }


def write_plan(run_dir: Path, document: Mapping[str, Any]) -> None:
    """Write ``run-plan.json`` into ``run_dir`` (atomically).

    Raises:
        OutputError: The file cannot be written.
    """
    path = run_dir / PLAN_FILE
    with output_errors(str(path), hint="check that the run folder is writable"):
        write_text_atomic(path, json.dumps(document, indent=2, sort_keys=True) + "\n")


def _fingerprint(
    trials: Sequence[PlannedTrial], index: int, known: dict[int, str], skip_grade: bool
) -> str:
    """:func:`trial_fingerprint` of ``trials[index]``, computed once per trial group when
    ``trials`` is a plan's lazy sequence (``known``: group id -> its fingerprint)."""
    if not isinstance(trials, PlannedTrials):
        return trial_fingerprint(trials[index], skip_grade=skip_grade)
    group = trials.group_at(index)
    fingerprint = known.get(id(group))
    if fingerprint is None:
        fingerprint = known[id(group)] = trial_fingerprint(group.first, skip_grade=skip_grade)
    return fingerprint


def stream_plan(
    run_dir: Path,
    trials: Sequence[PlannedTrial],
    *,
    run_id: str,
    command: str,
    skip_grade: bool,
) -> None:
    """Write ``run-plan.json`` for ``trials`` (atomically), the same bytes as
    :func:`write_plan` of :func:`plan_document`, one trial at a time: only the trial keys
    are held while it writes, not the whole document and its text.

    Raises:
        OutputError: The file cannot be written.
    """
    keys = [key.as_id() for key in trial_keys(trials)]
    order = sorted(range(len(keys)), key=keys.__getitem__)
    fingerprints: dict[int, str] = {}  # a group's trials differ only in their index
    path = run_dir / PLAN_FILE
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    with output_errors(str(path), hint="check that the run folder is writable"):
        try:
            run_dir.mkdir(parents=True, exist_ok=True)
            with open(tmp, "x", encoding="utf-8") as handle:
                handle.write(
                    f'{{\n  "command": {json.dumps(command)},\n  "runId": {json.dumps(run_id)},'
                    '\n  "trials": {'
                )
                written = 0
                for n, i in enumerate(order):
                    if n + 1 < len(order) and keys[order[n + 1]] == keys[i]:
                        continue  # a repeated key: the last one counts, as in a dict
                    fingerprint = _fingerprint(trials, i, fingerprints, skip_grade)
                    separator = ",\n    " if written else "\n    "
                    handle.write(f"{separator}{json.dumps(keys[i])}: {json.dumps(fingerprint)}")
                    written += 1
                handle.write("\n  }," if written else "},")
                handle.write(f'\n  "version": {json.dumps(PLAN_VERSION)}\n}}\n')
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)


@dataclass
class ResultsFile:
    """One results file of the run folder: how many of its lines are kept, and which are
    dropped (the lines themselves stay in the file until :func:`apply_resume` moves them).

    Attributes:
        path: The file (``results.jsonl``, or a variant folder's in an experiment).
        kept: How many of its lines are reused (its first records once it is rewritten).
        dropped: The numbers of its non-blank lines that are superseded (cancelled,
            retried, torn).
    """

    path: Path
    kept: int = 0
    dropped: set[int] = field(default_factory=set)


@dataclass
class ResumePlan:
    """What a resumed run reuses and what it runs.

    Attributes:
        run_dir: The run folder being resumed.
        run_id: The run id of the original run (records keep it).
        reused: The records kept, in file order: once :func:`apply_resume` has rewritten
            the results files, read from them again on every pass (not held in memory).
        to_run: The trials to run, in plan order.
        files: The results files, with their kept and dropped lines.
    """

    run_dir: Path
    run_id: str
    reused: Sequence[TrialResultRecord]
    to_run: list[PlannedTrial]
    files: list[ResultsFile] = field(default_factory=list)


def resumed_run_id(run_dir: Path) -> str:
    """The run id of the run in ``run_dir`` (from its ``run-plan.json``).

    Raises:
        ConfigError: The folder holds no readable run plan.
    """
    return str(_read_plan(run_dir).get("runId"))


def _read_plan(run_dir: Path) -> dict[str, Any]:
    path = run_dir / PLAN_FILE
    if not run_dir.is_dir():
        problem = "is a file, not a directory" if run_dir.exists() else "does not exist"
        raise ConfigError(
            f"--resume {run_dir}: {problem}", hint="pass the run folder of the run to continue"
        )
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(
            f"--resume {run_dir}: no {PLAN_FILE} in it, so it cannot be resumed",
            hint="only run folders written by this version of vally can be resumed; "
            "start a new run instead",
        ) from None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"--resume: cannot read {path}: {exc}") from None
    if not isinstance(data, dict) or data.get("version") != PLAN_VERSION:
        raise ConfigError(f"--resume: {path} is not a run plan of version {PLAN_VERSION}")
    return data


def check_same_plan(old: Mapping[str, Any], new: Mapping[str, Any], run_dir: Path) -> None:
    """Refuse unless ``new`` plans exactly the trials of ``old``, unchanged.

    Raises:
        ConfigError: Naming the first trial that is new, gone or changed.
    """
    where = f"cannot resume {run_dir}"
    if old.get("command") != new.get("command"):
        raise ConfigError(
            f"{where}: it was written by 'vally {old.get('command')}', "
            f"not 'vally {new.get('command')}'",
            hint=RERUN_HINT,
        )
    before: Mapping[str, str] = old.get("trials") or {}
    after: Mapping[str, str] = new["trials"]
    for trial, fingerprint in after.items():
        if trial not in before:
            raise ConfigError(
                f"{where}: the plan changed: trial {trial} was not in the original run",
                hint=RERUN_HINT,
            )
        if before[trial] != fingerprint:
            raise ConfigError(
                f"{where}: the spec or config of trial {trial} changed since the run "
                "(stimulus, environment, graders, model, executor, timeout or judge)",
                hint="resume only with the specs and flags of the original run; start a new "
                "run to use the changed ones",
            )
    gone = [trial for trial in before if trial not in after]
    if gone:
        raise ConfigError(
            f"{where}: the plan changed: trial {gone[0]} of the original run is not planned "
            f"now ({len(gone)} trial(s) missing)",
            hint=RERUN_HINT,
        )


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """``(number, text)`` of each non-blank line of a results file (none when it is
    missing), one at a time."""
    if not path.exists():
        return
    with path.open(encoding="utf-8", newline="\n") as handle:
        for number, line in enumerate(handle, 1):
            if line.strip():
                yield number, line


def _result_lines(path: Path) -> Iterator[tuple[int, TrialResultRecord | None]]:
    """Each non-blank line's number with its record (None for a torn or foreign line)."""
    for number, line in _lines(path):
        record: TrialResultRecord | None = None
        if line.endswith("\n"):
            try:
                data = loads_bounded(line)
            except ValueError:  # not JSON, or nested too deep
                data = None
            if isinstance(data, dict) and data.get("type") == "trial-result":
                record = TrialResultRecord.model_validate(data)
        yield number, record


def _reusable(record: TrialResultRecord, *, retry_errors: bool) -> bool:
    if record.status == "success":
        return True
    return record.status == "error" and not retry_errors


def plan_resume(
    run_dir: Path,
    trials: Sequence[PlannedTrial],
    *,
    command: str,
    skip_grade: bool,
    retry_errors: bool,
    results: Sequence[Path] = (),
) -> ResumePlan:
    """Compare the run folder with the new plan and decide what is reused and what runs.

    Args:
        run_dir: The run folder.
        trials: The new plan's trials (this process's shard of them).
        command: ``eval`` or ``experiment``; must be the original run's.
        skip_grade: Whether the new run grades (part of each trial's fingerprint).
        retry_errors: Run errored trials again instead of keeping them.
        results: The results files to read (default: the folder's ``results.jsonl``).

    Raises:
        ConfigError: The folder cannot be resumed, or the plan or a spec changed.
    """
    old = _read_plan(run_dir)
    run_id = str(old.get("runId"))
    new = plan_document(trials, run_id=run_id, command=command, skip_grade=skip_grade)
    check_same_plan(old, new, run_dir)
    pending = {t.key.as_id() for t in trials}
    """The planned trials no kept record holds yet (a trial is reused once at most)."""
    files = [ResultsFile(path) for path in results or [run_dir / RESULTS_FILE]]
    for file in files:
        for number, record in _result_lines(file.path):
            identity = _record_identity(record) if record is not None else None
            if (
                record is not None
                and identity in pending
                and _reusable(record, retry_errors=retry_errors)
            ):
                pending.discard(identity)
                file.kept += 1
            else:
                file.dropped.add(number)
    reused = ReusedRecords([f.path for f in files], [f.kept for f in files])
    to_run = [t for t in trials if t.key.as_id() in pending]
    return ResumePlan(run_dir, run_id, reused, to_run, files)


def _record_identity(record: TrialResultRecord) -> str:
    """The trial identity (``TrialKey.as_id()``) of a record."""
    return record.trial_id if record.variant else "/" + record.trial_id


def apply_resume(resume: ResumePlan) -> None:
    """Make the run folder hold only what is reused: rewrite ``results.jsonl``, keep the
    dropped lines in ``results.superseded.jsonl`` and move the folders of trials that run
    again aside.

    Raises:
        OutputError: A file of the run folder cannot be written.
    """
    run_dir = resume.run_dir
    for file in resume.files:
        if file.dropped:
            _split(file)
    for trial in resume.to_run:
        folder = run_dir / trial_relpath(trial.key)
        if not folder.exists():
            continue
        for n in range(1, 10_000):
            target = folder.with_name(f"{folder.name}.superseded-{n}")
            if not target.exists():
                with output_errors(str(folder)):
                    folder.rename(target)
                break


def _split(file: ResultsFile) -> None:
    """Append ``file``'s dropped lines to ``results.superseded.jsonl`` next to it and
    rewrite it (atomically) with its kept lines only, byte for byte, one line at a time.

    Raises:
        OutputError: Either file cannot be written.
    """
    superseded = file.path.with_name(SUPERSEDED_FILE)
    tmp = file.path.with_name(f".{file.path.name}.{uuid.uuid4().hex}.tmp")
    with output_errors(str(superseded)):
        moved = superseded.open("a", encoding="utf-8", newline="\n")
    with moved, output_errors(str(file.path)):
        try:
            with open(tmp, "x", encoding="utf-8", newline="\n") as kept:
                for number, line in _lines(file.path):
                    if number in file.dropped:
                        moved.write(line if line.endswith("\n") else line + "\n")
                    else:
                        kept.write(line)
            os.replace(tmp, file.path)
        finally:
            tmp.unlink(missing_ok=True)
