"""A compact index of two results files, for comparisons that read a pair only while it
is judged.

:func:`index_pairs` reads each file once and keeps, per trial record, its key (a number
for its eval and stimulus, its trial index) and the byte offset of its line: 24 bytes
a record while reading, 16 a matched pair after, against tens of kilobytes for the
parsed record. :class:`PairIndex` lists the matched pairs in key order and reads a
pair's two records back on demand.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from vally import ConfigError, TrialResultRecord, loads_bounded
from vally_compare.judged import Pair, PairKey

BAD_LINE_HINT = "each line must be one JSON trial record as written by vally eval"


@dataclass
class _Side:
    """One results file's records: stimulus numbers, trial indices and line offsets."""

    file: Path
    stimulus: array[int]
    trial: array[int]
    offset: array[int]


def _scan(path: Path, names: dict[tuple[str, str], int], warn: Callable[[str], None]) -> _Side:
    """Index the trial records of a run directory or results file (see module docstring).

    Raises:
        ConfigError: The file cannot be read, or a line is not a trial record.
    """
    from vally import results_file

    file = results_file(path)
    side = _Side(file, array("q"), array("q"), array("q"))
    try:
        with file.open("rb") as handle:
            for number, offset, data in _lines(handle, file, warn):
                if data.get("type") != "trial-result":
                    continue
                key = _key(data, file, number)
                side.stimulus.append(names.setdefault(key[:2], len(names)))
                side.trial.append(key[2])
                side.offset.append(offset)
    except OSError as exc:
        raise ConfigError(f"cannot read {file}: {exc.strerror or exc}") from exc
    return side


def _lines(
    handle: IO[bytes], file: Path, warn: Callable[[str], None]
) -> Iterator[tuple[int, int, dict[str, Any]]]:
    """``(line number, byte offset, object)`` of each non-blank line; a torn last line
    (no newline, not JSON) is skipped with a warning."""
    offset = 0
    for number, raw in enumerate(handle, 1):
        start, offset = offset, offset + len(raw)
        if not raw.strip():
            continue
        try:
            data = loads_bounded(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            if not raw.endswith(b"\n"):
                warn(f"{file}:{number}: skipping a torn last line (the run was interrupted)")
                continue
            raise ConfigError(f"{file}:{number}: not JSON ({exc})", hint=BAD_LINE_HINT) from None
        if not isinstance(data, dict):
            raise ConfigError(
                f"{file}:{number}: holds a JSON {type(data).__name__}, not a trial record object",
                hint=BAD_LINE_HINT,
            )
        yield number, start, data


def _key(data: dict[str, Any], file: Path, number: int) -> PairKey:
    """A record's (eval, stimulus, trial index).

    Raises:
        ConfigError: A field is missing or of the wrong type.
    """
    key = (data.get("evalName"), data.get("stimulusName"), data.get("trialIndex"))
    if not (isinstance(key[0], str) and isinstance(key[1], str)) or type(key[2]) is not int:
        raise ConfigError(
            f"{file}:{number}: not a trial-result record: evalName, stimulusName and "
            "trialIndex must be two strings and an integer",
            hint=BAD_LINE_HINT,
        )
    if not 0 <= key[2] < 2**31:
        raise ConfigError(
            f"{file}:{number}: trialIndex {key[2]} is out of range", hint=BAD_LINE_HINT
        )
    return key[0], key[1], key[2]


@dataclass
class PairIndex:
    """The matched pairs of two results files, in key order, and the unmatched keys."""

    baseline_file: Path
    treatment_file: Path
    names: list[tuple[str, str]]
    """(eval, stimulus) by stimulus number."""
    keys: Any
    """Each matched pair's composite key (numpy int64): stimulus rank * 2^31 + trial."""
    baseline_offsets: Any
    treatment_offsets: Any
    only_baseline: list[PairKey]
    only_treatment: list[PairKey]

    def __len__(self) -> int:
        return len(self.keys)

    def key(self, position: int) -> PairKey:
        """The key of the pair at ``position``."""
        return self._decode(int(self.keys[position]))

    def _decode(self, composite: int) -> PairKey:
        eval_name, stimulus = self.names[composite >> 31]
        return eval_name, stimulus, composite & (2**31 - 1)

    @contextmanager
    def reader(self) -> Iterator[Callable[[int], Pair]]:
        """A function reading the pair at a position, while both files are open."""
        with self.baseline_file.open("rb") as base, self.treatment_file.open("rb") as treat:

            def read(position: int) -> Pair:
                return Pair(
                    self.key(position),
                    _record(base, int(self.baseline_offsets[position]), self.baseline_file),
                    _record(treat, int(self.treatment_offsets[position]), self.treatment_file),
                )

            yield read


def _record(handle: IO[bytes], offset: int, file: Path) -> TrialResultRecord:
    """The record on the line at ``offset``.

    Raises:
        ConfigError: The line is not a valid trial record.
    """
    handle.seek(offset)
    try:
        return TrialResultRecord.model_validate(loads_bounded(handle.readline()))
    except Exception as exc:
        raise ConfigError(
            f"{file} (byte {offset}): not a trial-result record: {exc}", hint=BAD_LINE_HINT
        ) from None


def index_pairs(
    baseline: Path, treatment: Path, warn: Callable[[str], None] | None = None
) -> PairIndex:
    """Index two runs (run directories or results files) and match their trials by (eval,
    stimulus, trial index).

    Raises:
        ConfigError: A file cannot be read, a line is not a trial record, or one side
            holds two trials with the same key.
    """
    import numpy as np

    def default_warn(text: str) -> None:
        print(f"warning: {text}", file=sys.stderr, flush=True)

    names: dict[tuple[str, str], int] = {}
    sides = [_scan(path, names, warn or default_warn) for path in (baseline, treatment)]
    ordered = sorted(names, key=lambda name: name)
    rank = np.empty(len(ordered), dtype=np.int64)
    for position, name in enumerate(ordered):
        rank[names[name]] = position
    keyed = []
    for label, side in zip(("baseline", "treatment"), sides, strict=True):
        composite = (rank[np.frombuffer(side.stimulus, dtype=np.int64)] << 31) + np.frombuffer(
            side.trial, dtype=np.int64
        )
        order = np.argsort(composite, kind="stable")
        composite, offsets = composite[order], np.frombuffer(side.offset, dtype=np.int64)[order]
        _check_unique(label, side.file, composite, offsets, ordered)
        keyed.append((composite, offsets))
    (base_keys, base_offsets), (treat_keys, treat_offsets) = keyed
    common, in_base, in_treat = np.intersect1d(
        base_keys, treat_keys, assume_unique=True, return_indices=True
    )
    index = PairIndex(
        sides[0].file,
        sides[1].file,
        ordered,
        common,
        base_offsets[in_base],
        treat_offsets[in_treat],
        [],
        [],
    )
    index.only_baseline = [index._decode(int(k)) for k in np.setdiff1d(base_keys, common)]
    index.only_treatment = [index._decode(int(k)) for k in np.setdiff1d(treat_keys, common)]
    return index


def _check_unique(
    side: str, file: Path, keys: Any, offsets: Any, names: list[tuple[str, str]]
) -> None:
    """Raise when two records of one side share a key (sorted ``keys``).

    Raises:
        ConfigError: Naming the key and both trials' models.
    """
    import numpy as np

    repeated = np.flatnonzero(keys[1:] == keys[:-1])
    if not len(repeated):
        return
    at = int(repeated[0])
    composite = int(keys[at])
    eval_name, stimulus = names[composite >> 31]
    with file.open("rb") as handle:
        models = [_record(handle, int(offsets[i]), file).model for i in (at, at + 1)]
    raise ConfigError(
        f"the {side} has two trials for eval {eval_name!r}, stimulus {stimulus!r}, "
        f"trial {composite & (2**31 - 1)} (models {models[0]!r} and {models[1]!r})",
        hint="compare runs of one model each, or split the run by model first",
    )
