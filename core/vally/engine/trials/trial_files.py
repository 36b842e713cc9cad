"""A trial's own files: its ``metadata.json`` and ``events.jsonl``, written when it ends, and
the secrets scrubbed from everything in its folder."""

from __future__ import annotations

import functools
import os
import socket
from pathlib import Path

import pydantic_core

from vally._version import __version__
from vally.engine.planning.plan import PlannedTrial
from vally.engine.records.run_folder import (
    EVENTS_FILE,
    METADATA_FILE,
    REDACTED,
    Scrubber,
)
from vally.engine.trials.context import (
    ATTEMPT,
    NODE,
)
from vally.errors import OutputError
from vally.models.records import TrialResultRecord


@functools.cache
def host_name() -> str:
    """This machine's host name, asked once per process (``socket.gethostname`` is a system
    call, and every trial's ``metadata.json`` names its node)."""
    return socket.gethostname()


def write_trial_files(
    scrub: Scrubber,
    trial: PlannedTrial,
    trial_dir: Path,
    record: TrialResultRecord,
    notes: list[str],
) -> None:
    """Write a finished trial's ``metadata.json`` (and its ``events.jsonl`` when the executor
    kept none) into ``trial_dir``, scrubbing secrets from everything in the folder.

    Raises:
        OutputError: The files cannot be written.
    """
    grade = record.grade_result
    metadata = {
        "runId": record.run_id,
        "trialId": record.trial_id,
        "variant": record.variant,
        "evalName": record.eval_name,
        "evalFile": record.eval_file,
        "stimulus": record.stimulus_name,
        "model": record.model,
        "trialIndex": record.trial_index,
        "executor": trial.executor.name,
        "status": record.status,
        "error": record.error.to_json_dict() if record.error else None,
        "passed": grade.passed if grade else None,
        "score": grade.score if grade else None,
        "startedAt": record.started_at,
        "completedAt": record.completed_at,
        "durationMs": record.duration_ms,
        "timeoutMs": int(trial.timeout * 1000),
        "workspace": record.trajectory.work_dir if record.trajectory else None,
        "keptWorkspace": str(trial.keep_workspace) if trial.keep_workspace else None,
        "endReason": record.trajectory.end_reason if record.trajectory else None,
        "attempt": ATTEMPT.get(),
        "node": NODE.get() or host_name(),
        "notes": notes,
        "vallyVersion": __version__,
    }
    try:
        events = trial_dir / EVENTS_FILE
        if not trial_dir.is_dir():  # the trial failed before its executor started
            trial_dir.mkdir(parents=True, exist_ok=True)
        if not events.exists() and record.trajectory is not None and record.trajectory.events:
            # The executor kept no session log: save the trajectory's events instead.
            write_text_file(
                events,
                "".join(
                    scrub.text(e.model_dump_json(by_alias=True)) + "\n"
                    for e in record.trajectory.events
                ),
            )
        if scrub:
            scrub_tree(trial_dir, scrub)  # the executor's own logs, copied artifacts
        # Per-trial files are written in place (no temp file and rename): they are
        # complete once the trial's record is emitted, and this is the hot path.
        write_file(
            trial_dir / METADATA_FILE,
            pydantic_core.to_json(scrub.data(metadata), indent=2) + b"\n",
        )
    except OSError as exc:
        raise OutputError(
            f"cannot write the trial files in {trial_dir}: {exc.strerror or exc}",
            hint="check free disk space and permissions of the output directory",
        ) from exc


FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0)
"""How :func:`write_file` opens a file: as ``open(path, "wb")`` does."""


def write_file(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` (created with mode 0666 minus the umask, or truncated), as
    ``path.write_bytes(data)`` does, with three system calls instead of seven (no buffered
    file object: no ``fstat``, ``ioctl`` or ``lseek``).

    Raises:
        OSError: The file cannot be written.
    """
    fd = os.open(path, FILE_FLAGS, 0o666)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def write_text_file(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` as UTF-8, as ``path.write_text(text, encoding="utf-8")``
    does (on a system whose line ends are not ``\n``, through it, to keep them).

    Raises:
        OSError: The file cannot be written.
        UnicodeEncodeError: ``text`` holds a lone surrogate.
    """
    if os.linesep != "\n":  # pragma: no cover - POSIX line ends everywhere vally runs
        path.write_text(text, encoding="utf-8")
        return
    write_file(path, text.encode("utf-8"))


SCRUB_LIMIT = 64 * 1024 * 1024
"""Files larger than this are not scanned for secrets."""


def scrub_tree(folder: Path, scrubber: Scrubber) -> None:
    """Replace secret values in every file below ``folder`` (in place), and in the names of
    its files and folders (renamed, deepest first)."""
    needles = [(s.encode(), REDACTED.encode()) for s in scrubber.secrets]
    for path in folder.rglob("*"):
        if path.is_symlink() or not path.is_file() or path.stat().st_size > SCRUB_LIMIT:
            continue
        data = path.read_bytes()
        cleaned = data
        for needle, replacement in needles:
            if needle in cleaned:
                cleaned = cleaned.replace(needle, replacement)
        if cleaned != data:
            path.write_bytes(cleaned)
    for current, dirs, files in os.walk(folder, topdown=False):
        for name in [*files, *dirs]:
            clean = scrubber.text(name)
            if clean != name:
                _rename_free(Path(current, name), Path(current, clean))


def _rename_free(source: Path, target: Path) -> None:
    """Rename ``source`` to ``target``, or to ``target`` with a ``-2``, ``-3``, ... suffix
    when that name is taken."""
    candidate, n = target, 1
    while candidate.exists() or candidate.is_symlink():
        n += 1
        candidate = target.with_name(f"{target.name}-{n}")
    source.rename(candidate)
