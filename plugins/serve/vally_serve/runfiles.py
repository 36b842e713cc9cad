"""Finding run folders and reading their JSONL files tolerantly.

A run folder is any folder holding ``results.jsonl`` or ``run-summary.jsonl``: a plain run,
a variant folder of an experiment, a shard, or a merged experiment's variant folder. The
search descends from each given path and stops at a run folder (its subfolders are trial
trees) and at trial folders (those holding ``metadata.json``).

Reading never stops at a bad line: a torn line (a killed writer), a line that is not a JSON
object, or a record of an unknown type becomes a :class:`Problem` naming ``file:line``, and
the rest of the file is read.
"""

from __future__ import annotations

import json
import os
from codecs import BOM_UTF8
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from vally import JsonTooDeepError, json_depth_limit, loads_bounded

RESULTS_FILE = "results.jsonl"
SUMMARY_FILE = "run-summary.jsonl"
METADATA_FILE = "metadata.json"
SKIPPED_DIRS = frozenset({"artifacts", "node_modules", "__pycache__"})


@dataclass(frozen=True)
class Problem:
    """Something skipped while reading: where and why."""

    file: str
    line: int | None
    message: str

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        return f"{where}: {self.message}"


@dataclass(frozen=True)
class RunFolder:
    """A folder with run files.

    Attributes:
        path: The folder.
        results: Its ``results.jsonl``, when present.
        summaries: Its ``run-summary.jsonl``, when present.
    """

    path: Path
    results: Path | None
    summaries: Path | None


class Line(NamedTuple):
    """One valid JSON object line: its number, the parsed object and its bytes as read
    (valid UTF-8, without the line ending). A named tuple: one is made for every line read,
    in a third of the time of a frozen dataclass."""

    number: int
    data: dict[str, Any]
    raw: bytes

    @property
    def text(self) -> str:
        """The line as text."""
        return self.raw.decode("utf-8")


def find_run_folders(paths: Iterable[Path]) -> tuple[list[RunFolder], list[Problem]]:
    """Every run folder at or below ``paths``, in path order; a missing path is a problem."""
    found: list[RunFolder] = []
    problems: list[Problem] = []
    for path in paths:
        if path.is_file() and path.name in (RESULTS_FILE, SUMMARY_FILE):
            path = path.parent
        if not path.is_dir():
            problems.append(Problem(str(path), None, "no such folder"))
            continue
        found.extend(_walk(path))
    return found, problems


def _walk(folder: Path) -> Iterator[RunFolder]:
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        return
    names = {e.name for e in entries if e.is_file()}
    if RESULTS_FILE in names or SUMMARY_FILE in names:
        yield RunFolder(
            folder,
            folder / RESULTS_FILE if RESULTS_FILE in names else None,
            folder / SUMMARY_FILE if SUMMARY_FILE in names else None,
        )
        return
    if METADATA_FILE in names:
        return
    for entry in entries:
        hidden = entry.name.startswith(".") or entry.name in SKIPPED_DIRS
        if not hidden and entry.is_dir(follow_symlinks=False):
            yield from _walk(Path(entry.path))


def read_lines(file: Path, problems: list[Problem]) -> Iterator[Line]:
    """The JSON object lines of ``file``; every other non-blank line is added to
    ``problems`` and skipped."""
    try:
        handle = file.open("rb")
    except OSError as exc:
        problems.append(Problem(str(file), None, f"cannot read: {exc.strerror or exc}"))
        return
    limit = json_depth_limit()  # read once, not from the environment for every line
    with handle:
        for number, raw in enumerate(handle, 1):
            if raw.isspace():  # a blank line (a line from the file is never empty)
                continue
            try:
                if raw.isascii() and b"\0" not in raw:  # UTF-8, without a byte-order mark
                    data = loads_bounded(raw, max_depth=limit)
                else:
                    text = raw.decode("utf-8")  # only checked: the bytes are parsed and kept
                    # (a byte-order mark or a NUL could make json read the bytes as another
                    # encoding: such a line is parsed as text, as its errors say what it is)
                    data = loads_bounded(
                        text if raw.startswith(BOM_UTF8) or b"\0" in raw else raw,
                        max_depth=limit,
                    )
            except UnicodeDecodeError as exc:
                problems.append(Problem(str(file), number, f"not UTF-8 ({exc.reason})"))
                continue
            except json.JSONDecodeError as exc:
                torn = "" if raw.endswith(b"\n") else " (a torn last line: the writer stopped)"
                problems.append(
                    Problem(str(file), number, f"not JSON: {exc.msg} at column {exc.colno}{torn}")
                )
                continue
            except JsonTooDeepError as exc:
                problems.append(Problem(str(file), number, str(exc)))
                continue
            if not isinstance(data, dict):
                kind = type(data).__name__
                problems.append(Problem(str(file), number, f"a JSON {kind}, not a record"))
                continue
            yield Line(number, data, raw.rstrip(b"\r\n"))
