"""``vally experiment merge``: reconcile the shard folders of one sharded run.

The shards are validated (one run, one plan, finished, partitioning the plan), then the
merged folder gets every variant's ``results.jsonl`` and ``run-summary.jsonl``, the plan
snapshot and ``experiment-manifest.json``, written here. When every shard is sealed
(:mod:`vally_experiment.seal`), the results files are copied and checked against their
seals and the summaries are the sum of the sealed tallies; otherwise every record is read,
checked and counted, its facts (:class:`vally.TrialFacts`) fed to the summaries and to the
reporters' counters (a whole record is validated only for a counter that asks for one).
The report, the spans (linked to each shard's root span) and the console comparison come
from the reporters, through the same run events as a run. Summaries and the report take
the records in plan order, so a merged run summarises and reports as the unsharded run of
the same plan would; each variant's ``results.jsonl`` keeps the shards' order.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from vally import (
    EXPERIMENT_MANIFEST_FILE,
    RESULTS_FILE,
    SNAPSHOT_FILE,
    TRACE_CONTEXT_FILE,
    OutputError,
    PlanTallies,
    RunOutcome,
    RunSummaryRecord,
    Session,
    TrialFacts,
    TrialResultRecord,
    VariantSummaries,
    WrittenRecords,
    absolute_path,
    loads_bounded,
    record_depth,
    safe_name,
    utc_now,
    write_json_file,
)
from vally_experiment.seal import (
    CounterFeed,
    copy_sealed_results,
    merge_counters,
    merge_reporters,
    merge_run_info,
    read_sealed_shards,
    sealed_reporter_states,
    sealed_tallies,
)
from vally_experiment.validation import (
    ShardInput,
    TrialIndex,
    read_run_shards,
    stream_shard_records,
    validate_shards,
)


@dataclass
class MergeRequest:
    """What ``vally experiment merge`` takes.

    Attributes:
        shard_dirs: Every shard folder of the run.
        output_dir: The merged folder (outside every shard folder).
        otlp_endpoint: Export the merge's spans to this collector.
        console: Print the comparison with the baseline.
        trace: Trace the merge (``--trace``). A merge is also traced when
            ``otlp_endpoint`` is given or a shard was traced (has a trace context file).
    """

    shard_dirs: Sequence[str]
    output_dir: str
    otlp_endpoint: str | None = None
    console: bool = True
    trace: bool = False


@dataclass
class MergeResult:
    """The merged run.

    Attributes:
        run_id: The experiment run's id.
        target: The merged folder.
        shards: How many shards were merged.
        records: Every trial record, in the merged files' order, read back from those
            files on each pass (:class:`~vally.WrittenRecords`), never all
            held at once.
        summaries: The merged summaries (every variant).
        warnings: Torn last lines skipped in the shards' results, and failures of
            reporters (report, spans) that did not stop the merge.
        unsuccessful: How many records have each status other than ``success``, in the
            order first met (trials the shards could not run).
    """

    run_id: str
    target: Path
    shards: int
    records: Sequence[TrialResultRecord]
    summaries: list[RunSummaryRecord] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    unsuccessful: dict[str, int] = field(default_factory=dict)


def _check_target(target: Path, shards: Sequence[ShardInput]) -> None:
    resolved = target.resolve()
    for shard in shards:
        folder = shard.path.resolve()
        if resolved == folder or folder in resolved.parents:
            raise OutputError(
                f"merge output {target} is inside shard directory {shard.path}: merging there "
                "would overwrite or mix with that shard's files",
                hint="pass an -o/--output-dir outside every shard directory, e.g. "
                f"{folder.parent / 'merged'}",
            )
    try:
        if target.exists() and not target.is_dir():
            raise OutputError(
                f"merge output {target} is a file", hint="pass another -o/--output-dir"
            )
        target.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"cannot create {target}: {exc.strerror or exc}") from exc


def _trace_links(shards: Sequence[ShardInput]) -> list[dict[str, Any]]:
    """Each shard's root span (from its trace context file), tagged with the shard."""
    links: list[dict[str, Any]] = []
    for shard in shards:
        with contextlib.suppress(OSError, ValueError):
            text = (shard.path / TRACE_CONTEXT_FILE).read_text(encoding="utf-8")
            context = loads_bounded(text, max_depth=record_depth())
            if isinstance(context, dict):
                links.append(
                    {
                        "traceId": context.get("traceId"),
                        "spanId": context.get("spanId"),
                        "vally.shard": f"{shard.index}/{shard.total}",
                    }
                )
    return links


def _manifest(
    shards: Sequence[ShardInput], links: Sequence[dict[str, Any]], trials: int
) -> dict[str, Any]:
    first = shards[0]
    snapshot = first.snapshot

    def context_of(shard: ShardInput) -> dict[str, Any] | None:
        label = f"{shard.index}/{shard.total}"
        for link in links:
            if link.get("vally.shard") == label:
                return {"traceId": link.get("traceId"), "spanId": link.get("spanId")}
        return None

    return {
        "schemaVersion": 1,
        "runId": str(first.manifest["runId"]),
        "experiment": snapshot.get("experiment"),
        "baseline": snapshot.get("baseline"),
        "variants": [str(v) for v in snapshot.get("variants") or []],
        "planDigest": first.manifest.get("planDigest"),
        "strategy": first.manifest.get("strategy"),
        "shards": [
            {
                "index": s.index,
                "total": s.total,
                "dir": s.path.name,
                "trials": s.trials,
                "otelContext": context_of(s),
            }
            for s in shards
        ],
        "trials": trials,
        "mergedAt": utc_now(),
    }


def _offloaded_from(record: TrialResultRecord, shard_dir: Path, target: Path) -> TrialResultRecord:
    """``record`` with its offloaded texts' paths made relative to the merged folder (the
    texts stay in the shard's trial folders)."""
    if not record.offloaded:
        return record
    entries = [
        entry.model_copy(
            update={"path": Path(os.path.relpath(shard_dir / entry.path, target)).as_posix()}
        )
        for entry in record.offloaded
    ]
    return record.model_copy(update={"offloaded": entries})


def _write_line(
    handle: IO[str], line: str, facts: TrialFacts, shard_dir: Path, target: Path
) -> None:
    """The shard's line, unchanged unless offloaded texts' paths must move (then the whole
    record is validated and written again)."""
    if facts.offloaded:
        record = TrialResultRecord.model_validate_json(line)
        line = _offloaded_from(record, shard_dir, target).to_json_line()
    handle.write(line if line.endswith("\n") else line + "\n")


@contextlib.contextmanager
def _merged_files(
    target: Path, folders: Mapping[str, str], mode: str
) -> Iterator[tuple[dict[str, IO[Any]], dict[str, Path]]]:
    """Open every variant's merged ``results.jsonl`` next to its place (``mode`` ``w`` or
    ``wb``); when the block ends without raising they are closed and renamed into place,
    else removed, so a failed merge leaves the folder as it was."""
    files = {v: target / folder / RESULTS_FILE for v, folder in folders.items()}
    temps = {v: path.with_name(f".{path.name}.merge.tmp") for v, path in files.items()}
    with contextlib.ExitStack() as stack:
        handles: dict[str, IO[Any]] = {}
        for variant, temp in temps.items():
            temp.parent.mkdir(parents=True, exist_ok=True)
            encoding = None if "b" in mode else "utf-8"
            handles[variant] = stack.enter_context(temp.open(mode, encoding=encoding))
            stack.callback(temp.unlink, missing_ok=True)
        yield handles, files
        for handle in handles.values():
            handle.close()
        for variant, temp in temps.items():
            os.replace(temp, files[variant])


def stream_records(
    shards: Sequence[ShardInput],
    folders: Mapping[str, str],
    target: Path,
    tallies: PlanTallies,
    warn: Callable[[str], None],
    index: TrialIndex | None = None,
    feed: CounterFeed | None = None,
) -> list[Path]:
    """Write every variant's merged ``results.jsonl`` from the shards' lines (passed through
    unchanged unless offloaded paths move) and count each record into ``tallies``, one
    record at a time, validating only the fields the checks and the summaries read. Each
    file is written next to its place and renamed there once every shard was read, so a
    shard failing validation leaves the merged folder as it was.

    Args:
        shards: The validated shards, in shard order.
        folders: Variant name -> its folder name.
        target: The merged folder.
        tallies: Receive every record.
        warn: Receives warnings (torn last lines, skipped).
        index: The run's planned trials (built from the shards when not given).
        feed: Also receives every record's line and facts (the reporters' counters).

    Returns:
        The merged results files, in variant order.

    Raises:
        ShardValidationError: A shard's records do not match its manifest.
        OSError: A merged file cannot be written.
    """
    index = index or TrialIndex(shards[0].snapshot, shards)
    with _merged_files(target, folders, "w") as (handles, files):
        for shard in shards:
            for variant, line, facts, place in stream_shard_records(shard, folders, index, warn):
                _write_line(handles[variant], line, facts, shard.path, target)
                tallies.add_facts(facts, place)
                if feed is not None:
                    feed.add(line, facts)
    return list(files.values())


class _SealBroken(Exception):
    """A sealed shard's results file no longer matches its seal."""


def copy_sealed_records(
    shards: Sequence[ShardInput], folders: Mapping[str, str], target: Path
) -> list[Path] | None:
    """Write every variant's merged ``results.jsonl`` by copying the sealed shards' files,
    each checked against its seal as it is copied; None (and the merged folder as it was)
    when one does not match.

    Raises:
        OSError: A merged file cannot be written.
    """
    try:
        with _merged_files(target, folders, "wb") as (handles, files):
            for shard in shards:
                for variant, handle in handles.items():
                    if not copy_sealed_results(shard, variant, handle):
                        raise _SealBroken
    except _SealBroken:
        return None
    return list(files.values())


def _copy_file(source: Path, path: Path) -> None:
    """Copy ``source`` to ``path`` through a temporary file and a rename."""
    temp = path.with_name(f".{path.name}.merge.tmp")
    try:
        shutil.copyfile(source, temp)
        os.replace(temp, path)
    finally:
        temp.unlink(missing_ok=True)


def read_full_shards(paths: Sequence[Path]) -> list[ShardInput]:
    """Read and validate shard folders in full (manifests, snapshots), in shard order.

    Raises:
        ShardValidationError: A folder is not a shard, or the shards do not make one run.
    """
    shards = read_run_shards(paths)
    validate_shards(shards)
    shards.sort(key=lambda s: s.index)
    return shards


def read_shards(request: MergeRequest) -> list[ShardInput]:
    """Read and validate the shard folders, in shard order: from their seals when every
    shard is sealed and the seals agree, else in full.

    Raises:
        ShardValidationError: A folder is not a shard, or the shards do not make one run.
    """
    cwd = Path.cwd()
    paths = [absolute_path(cwd, d) for d in request.shard_dirs]
    return read_sealed_shards(paths) or read_full_shards(paths)


def merge_records(
    shards: Sequence[ShardInput],
    summarizer: VariantSummaries,
    target: Path,
    warn: Callable[[str], None],
    feed: CounterFeed | None = None,
) -> tuple[list[ShardInput], list[Path], PlanTallies]:
    """Write the merged results files and count them: from the seals when every shard is
    sealed and its files still match, else by reading every record (the shards then read
    in full; each record also goes to ``feed``). Returns the shards as finally read, the
    files and the tallies.

    Raises:
        ShardValidationError: A shard's records do not match its manifest.
        OSError: A merged file cannot be written.
    """
    snapshot = shards[0].snapshot
    folders = {str(v): safe_name(str(v)) for v in snapshot.get("variants") or []}
    if all(shard.seal is not None for shard in shards):
        tallies = summarizer.tallies()
        try:
            sealed_tallies(shards, tallies)
        except (KeyError, TypeError, ValueError):
            files = None
        else:
            files = copy_sealed_records(shards, folders, target)
        if files is not None:
            _copy_file(shards[0].path / SNAPSHOT_FILE, target / SNAPSHOT_FILE)
            return list(shards), files, tallies
        warn(
            "a shard's seal does not match its files (changed after the shard finished?); "
            "every record was read and checked instead"
        )
        shards = read_full_shards([shard.path for shard in shards])
        snapshot = shards[0].snapshot
    index = TrialIndex(snapshot, shards, shards[0].plan_keys)
    tallies = summarizer.tallies(index.position)
    files = stream_records(shards, folders, target, tallies, warn, index, feed)
    write_json_file(target / SNAPSHOT_FILE, snapshot)
    return list(shards), files, tallies


def merge(request: MergeRequest, shards: Sequence[ShardInput]) -> MergeResult:
    """Write the merged folder from validated shards (see :func:`read_shards`).

    Raises:
        OutputError: The merged folder or a required file cannot be written.
        ConfigError: ``--otlp-endpoint`` is invalid.
    """
    session = Session(None, Path.cwd())
    traced = request.trace or request.otlp_endpoint is not None
    traced = traced or any((shard.path / TRACE_CONTEXT_FILE).is_file() for shard in shards)
    reporters = merge_reporters(
        session, console=request.console, otlp_endpoint=request.otlp_endpoint, trace=traced
    )
    for name, reporter in reporters:
        session.register_observer(reporter, name)
    target = absolute_path(Path.cwd(), request.output_dir)
    _check_target(target, shards)
    first = shards[0]
    snapshot = first.snapshot
    run_id = str(first.manifest["runId"])
    summarizer = VariantSummaries(snapshot, run_id=run_id, run_dir=target)
    read_warnings: list[str] = []
    feed = None
    if not all(shard.seal is not None for shard in shards):  # the reporters count as it reads
        counting = merge_run_info(snapshot, run_id=run_id, run_dir=target, planned_trials=0)
        feed = CounterFeed(merge_counters(session, counting))
    try:
        shards, files, tallies = merge_records(
            shards, summarizer, target, read_warnings.append, feed
        )
    except OSError as exc:
        raise OutputError(
            f"cannot write the merged output in {target}: {exc.strerror or exc}"
        ) from exc
    snapshot = shards[0].snapshot
    records = WrittenRecords(files, tallies.count)
    links = _trace_links(shards)
    run = merge_run_info(
        snapshot, run_id=run_id, run_dir=target, planned_trials=len(records), links=links
    )
    session.emitter.emit("vally_run_start", run=run)
    summaries = summarizer.finish(tallies)
    try:
        summarizer.write(summaries)
        write_json_file(target / EXPERIMENT_MANIFEST_FILE, _manifest(shards, links, len(records)))
    except OSError as exc:
        error = OutputError(f"cannot write the merged output in {target}: {exc.strerror or exc}")
        outcome = RunOutcome(records, summaries, cancelled=True, error=error.render())
        with contextlib.suppress(Exception):
            session.emitter.emit("vally_run_end", run=run, outcome=outcome)
        raise error from exc
    sealed = sealed_reporter_states(shards)
    if feed is not None:
        sealed = {key: [state] for key, state in feed.states().items()}
    outcome = RunOutcome(records, summaries, sealed=sealed)
    session.emitter.emit("vally_run_end", run=run, outcome=outcome)
    warnings = read_warnings + [
        f"reporter {f.observer!r} failed in {f.hook}: {type(f.error).__name__}: {f.error}"
        for f in session.emitter.failures
        if not f.critical
    ]
    return MergeResult(
        run_id, target, len(shards), records, summaries, warnings, dict(tallies.unsuccessful)
    )
