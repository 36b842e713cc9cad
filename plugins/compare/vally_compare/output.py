"""The ``--output`` file of ``vally compare``: one JSON line per treatment, written
atomically (see ``docs/reference/comparison-records.md``)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vally import OutputError

if TYPE_CHECKING:
    from vally_compare.judged import ComparisonResult


def check_output_file(path: Path) -> None:
    """Fail before any judging when ``--output`` cannot be written.

    Raises:
        OutputError: ``path`` is a directory, or its folder is a file or cannot be created.
    """
    if path.is_dir():
        raise OutputError(
            f"--output {path} is a directory", hint="pass a file path, e.g. comparison.jsonl"
        )
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise OutputError(
                    f"--output {path} cannot be written: {parent} is a file",
                    hint="pass another --output path",
                )
            break
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(
            f"--output {path}: cannot create {path.parent}: {exc.strerror or exc}",
            hint="pass a writable --output path",
        ) from exc


def write_output(
    path: Path, results: Sequence[ComparisonResult], graded: Mapping[str, dict[str, Any]]
) -> None:
    """Write one record per treatment (JSON Lines), atomically: the judged ``comparison``
    record with the ``graded-comparison`` record under ``graded`` when the pairs were
    judged, else the ``graded-comparison`` record alone.

    Raises:
        OutputError: The file cannot be written.
    """
    from vally import output_errors, write_text_atomic

    with output_errors(
        f"--output {path}",
        hint="the comparison printed above is complete; pass a writable --output path",
    ):
        if not results:
            lines = "".join(json.dumps(g, ensure_ascii=False) + "\n" for g in graded.values())
            write_text_atomic(path, lines)
            return
        if not any(r.trials_file is not None for r in results):
            lines = "".join(
                json.dumps(judged_record(r, graded), ensure_ascii=False) + "\n" for r in results
            )
            write_text_atomic(path, lines)
            return
        splice_output(path, results, graded)


def judged_record(
    result: ComparisonResult, graded: Mapping[str, dict[str, Any]] | None
) -> dict[str, Any]:
    """The judged record of a treatment with its graded comparison under ``graded``,
    ``trials`` last (the judged record alone when no graded comparisons are given)."""
    from vally_compare.judged_record import to_record

    record = to_record(result)
    if graded is None:
        return record
    trials = record.pop("trials")
    record["graded"] = graded.get(result.treatment)
    record["trials"] = trials
    return record


def splice_output(
    path: Path,
    results: Sequence[ComparisonResult],
    graded: Mapping[str, dict[str, Any]] | None = None,
) -> None:
    """Write the records, each streamed comparison's ``trials`` copied from its file (the
    same bytes as dumping the whole record), to a temp file renamed into place."""
    import shutil
    import uuid

    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        with open(tmp, "x", encoding="utf-8") as out:
            for result in results:
                record = judged_record(result, graded)
                if result.trials_file is None:
                    out.write(json.dumps(record, ensure_ascii=False) + "\n")
                    continue
                del record["trials"]  # the last key: spliced in from the file
                out.write(json.dumps(record, ensure_ascii=False)[:-1] + ', "trials": [')
                with result.trials_file.open(encoding="utf-8") as part:
                    shutil.copyfileobj(part, out)
                out.write("]}\n")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
