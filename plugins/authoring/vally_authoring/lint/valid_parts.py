"""The parts of an eval spec that validate, for ``vally lint``.

A schema error (``timeout: 90`` where a duration is expected) makes the whole document
fail to load, which would hide every other finding of the file until it is fixed.
:func:`load_valid_parts` removes each invalid part instead (the offending value, or the
stimulus, grader or file entry that lacks a required field) and validates again, so lint
can check what remains. Positions keep pointing at the original document: when a list item
is removed, the positions of the items after it move down with them.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from vally import (
    EvalSpec,
    LoadedEval,
    NodePosition,
    PathKey,
    Positions,
    ProjectConfig,
    VallyError,
    data_path,
    finish_eval,
    read_eval_data,
)

MAX_REMOVALS = 100
"""Invalid parts removed from one document at most before giving up."""


def load_valid_parts(
    path: Path,
    *,
    cli_params: Mapping[str, str],
    project: ProjectConfig | None = None,
) -> tuple[LoadedEval, Positions] | None:
    """The eval at ``path`` without its invalid parts, and positions in the original file.

    Returns None when the file cannot be read, or what validates is not a spec (the
    document itself, or its ``stimuli``, is invalid).
    """
    try:
        source, project, data, positions = read_eval_data(
            path, cli_params=cli_params, project=project
        )
    except VallyError:
        return None
    data = copy.deepcopy(data)
    table = dict(positions.table)
    for _ in range(MAX_REMOVALS):
        try:
            spec = EvalSpec.model_validate(data)
        except ValidationError as exc:
            invalid = _first_invalid_path(exc, data)
            if invalid is None or not _remove(data, table, invalid):
                return None
            continue
        except VallyError:
            return None
        kept = Positions(positions.file, table)
        try:
            return finish_eval(source, spec, data, kept, project), kept
        except VallyError:
            return None
    return None


def _first_invalid_path(exc: ValidationError, data: Any) -> PathKey | None:
    """The document path of the first relevant error (union branches that do not apply
    are skipped)."""
    fallback: PathKey | None = None
    for error in exc.errors(include_url=False):
        found, irrelevant = data_path(
            list(error.get("loc", ())), data, missing=error.get("type") == "missing"
        )
        if not irrelevant:
            return found
        fallback = fallback if fallback is not None else found
    return fallback


def _remove(data: dict[str, Any], table: dict[PathKey, NodePosition], path: PathKey) -> bool:
    """Remove the deepest part of ``path`` present in ``data`` (a missing field removes
    the item that lacks it). False when only the whole document would be left to remove."""
    parents: list[Any] = []
    current: Any = data
    present = 0
    for part in path:
        in_list = isinstance(current, list) and isinstance(part, int) and 0 <= part < len(current)
        if not (in_list or (isinstance(current, Mapping) and part in current)):
            break
        parents.append(current)
        current = current[part]
        present += 1
    if present == 0:
        return False
    container, key = parents[-1], path[present - 1]
    if isinstance(container, list):
        assert isinstance(key, int)
        del container[key]
        _shift_positions(table, path[: present - 1], key)
    else:
        del container[key]
    return True


def _shift_positions(
    table: dict[PathKey, NodePosition], list_path: PathKey, removed: int
) -> None:
    """Drop the positions of item ``removed`` of the list at ``list_path`` and move those
    of the items after it down by one, as the list itself moved."""
    depth = len(list_path)
    moved: dict[PathKey, NodePosition] = {}
    for key in list(table):
        if len(key) <= depth or key[:depth] != list_path or not isinstance(key[depth], int):
            continue
        index = key[depth]
        position = table.pop(key)
        if isinstance(index, int) and index > removed:
            moved[(*list_path, index - 1, *key[depth + 1 :])] = position
    table.update(moved)
