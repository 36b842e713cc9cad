"""What a run keeps of its trial records: counts while it runs, and the records themselves
read back from the results files it wrote when asked for them afterwards.

A run writes each record to its results file(s) as the trial ends, so it need not hold
them: :class:`RecordLog` counts records by status and, when the run writes its records to
known files, hands out a :class:`WrittenRecords` sequence at the end that reads those
files again on every pass. Memory then stays flat in the number of trials. A run that
writes no results file (no run folder, or no results writer) keeps its records in memory,
as it is the only place they exist.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import overload

from vally.engine.records.run_folder import iter_records
from vally.models.records import TrialResultRecord


class WrittenRecords(Sequence[TrialResultRecord]):
    """The trial records of results files, read again on every pass (memory does not grow
    with the number of records).

    Iteration yields the files' records in file order; indexing reads up to that record,
    so prefer one loop over the sequence to many lookups. Its length is the number of
    records the run wrote, known without reading the files.

    Args:
        files: The results files, in order (a missing file holds no records).
        count: How many records they hold.
    """

    def __init__(self, files: Iterable[Path], count: int) -> None:
        self.files = list(files)
        self.total = count

    def __len__(self) -> int:
        return self.total

    def __iter__(self) -> Iterator[TrialResultRecord]:
        for file in self.files:
            if file.is_file():
                yield from iter_records(file)

    @overload
    def __getitem__(self, index: int) -> TrialResultRecord: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[TrialResultRecord]: ...

    def __getitem__(self, index: int | slice) -> TrialResultRecord | Sequence[TrialResultRecord]:
        if isinstance(index, slice):
            return list(self)[index]
        position = index + self.total if index < 0 else index
        if not 0 <= position < self.total:
            raise IndexError(index)
        try:
            return next(itertools.islice(iter(self), position, None))
        except StopIteration:
            raise IndexError(index) from None

    def __repr__(self) -> str:
        return f"WrittenRecords({len(self)} records in {[str(f) for f in self.files]})"


class ReusedRecords(WrittenRecords):
    """The records a resumed run keeps: the first ``kept[i]`` records of ``files[i]``, read
    again on every pass (the run appends its new records after them, which are not part of
    this sequence).

    Args:
        files: The results files, in order (a missing file holds no records).
        kept: How many records each file keeps, in the same order.
    """

    def __init__(self, files: Sequence[Path], kept: Sequence[int]) -> None:
        super().__init__(files, sum(kept))
        self.kept = list(kept)

    def __iter__(self) -> Iterator[TrialResultRecord]:
        for file, count in zip(self.files, self.kept, strict=True):
            if count and file.is_file():
                yield from itertools.islice(iter_records(file), count)

    def __repr__(self) -> str:
        return f"ReusedRecords({len(self)} records in {[str(f) for f in self.files]})"


class RecordLog:
    """What the run engine keeps of the records that went by: their number and statuses,
    and the records themselves only when no results file holds them.

    Args:
        files: The results files the run's records are written to, in order; None when the
            run writes none (the records are then kept in memory).
    """

    def __init__(self, files: Sequence[Path] | None = None) -> None:
        self.files = None if files is None else list(files)
        self.count = 0
        self.statuses: Counter[str] = Counter()
        self._kept: list[TrialResultRecord] = []

    def add(self, record: TrialResultRecord) -> None:
        """Count one finished trial's record (kept only when no file holds it)."""
        self.count += 1
        self.statuses[record.status] += 1
        if self.files is None:
            self._kept.append(record)

    def records(self) -> Sequence[TrialResultRecord]:
        """Every record counted so far: read back from the results files, or the kept list."""
        if self.files is None:
            return list(self._kept)
        return WrittenRecords(self.files, self.count)
