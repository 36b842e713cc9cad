"""Shard seals: what a finished shard's results add up to, pinned to the bytes they were
counted from, so ``vally experiment merge`` adds them up instead of reading every record.

When a shard finishes, it reads its own results as the merge would (every line checked
against its manifest, counted into the run summaries' tallies) and writes
``shard-seal.json``: the shard's identity, its selection as places in the plan, the size
and CRC-32 of its manifest, plan snapshot and each variant's ``results.jsonl``, and the
tallies. A merge whose shards are all sealed checks the seals against one another (one
run, one plan, every shard once, a partition of the plan) and each file against its pin
while it copies the bytes, without parsing a record. Anything that does not match (no
seal, a file changed after sealing, a seal from another version) sends the merge down the
path that reads every record, which also names the problem.

A shard is sealed only when that path would pass its lines through unchanged: every line
a trial record ending in a newline, none pointing to offloaded texts (whose paths a merge
rewrites). The CRC detects files changed or truncated by accident, not forgery.

The seal also keeps what the reporters a merge uses (the report and the console) count of
the shard's records (their ``vally_seal_counters``, fed in the same pass each record's
facts, or the record, validated once, to a counter that takes records; see
:class:`CounterFeed`), so the merge hands them each shard's counts instead of the records
to read again.
"""

from __future__ import annotations

import contextlib
import zlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from vally import (
    CONSOLE_REPORTER,
    MANIFEST_FILE,
    REPORT_REPORTER,
    RESULTS_FILE,
    SNAPSHOT_FILE,
    TRACE_REPORTER,
    PlanTallies,
    RecordCounter,
    ReporterChoice,
    RunInfo,
    Session,
    TrialFacts,
    TrialResultRecord,
    VallyError,
    create_reporters,
    loads_bounded,
    loads_json,
    record_depth,
    safe_name,
    utc_now,
    write_json_file,
)
from vally_experiment.seal_state import absorb_plan, plan_state
from vally_experiment.validation import (
    PlanKeys,
    ShardInput,
    TrialIndex,
    share_keys,
    stream_shard_records,
)

SEAL_FILE = "shard-seal.json"
SEAL_SCHEMA_VERSION = 2
"""Version 2 stores the tallies' stimuli by column (:mod:`vally_experiment.seal_state`)
and no failed records in the console's rows; seals of version 1 are read too."""
READ_SCHEMA_VERSIONS = (1, 2)
CHUNK = 1 << 20
"""Bytes read at a time when checking or copying a pinned file."""

_IDENTITY = ("runId", "experiment", "shard", "strategy", "planDigest", "finished")
"""The manifest fields a seal repeats, so a merge need not parse the manifests."""


def merge_reporters(
    session: Session, *, console: bool, otlp_endpoint: str | None, trace: bool = True
) -> list[tuple[str, object]]:
    """The reporters of ``vally experiment merge`` (by registered name): the report, the
    console's comparison (``console``) and the spans (``trace``).

    Raises:
        ConfigError: ``otlp_endpoint`` is invalid, or a reporter cannot be created.
    """
    chosen = [ReporterChoice(REPORT_REPORTER)]
    if console:
        chosen.append(ReporterChoice(CONSOLE_REPORTER, {"style": "lines"}))
    if trace:
        chosen.append(
            ReporterChoice(TRACE_REPORTER, {"endpoint": otlp_endpoint}, "--otlp-endpoint")
        )
    return create_reporters(session, chosen, (), base_dir=Path.cwd())


def merge_run_info(
    snapshot: Mapping[str, Any],
    *,
    run_id: str,
    run_dir: Path,
    planned_trials: int,
    links: Sequence[Mapping[str, Any]] = (),
) -> RunInfo:
    """How a merge describes its run to reporters."""
    return RunInfo(
        run_id=run_id,
        command="experiment.merge",
        run_dir=run_dir,
        planned_trials=planned_trials,
        started_at=utc_now(),
        experiment=str(snapshot.get("experiment")),
        baseline=str(snapshot.get("baseline")),
        variants=tuple(str(v) for v in snapshot.get("variants") or []),
        snapshot=snapshot,
        links=links,
    )


def merge_counters(session: Session, run: RunInfo) -> dict[str, RecordCounter]:
    """What the reporters registered in ``session`` count of a merge's records
    (``vally_seal_counters``), by key; a reporter that fails is left out."""
    return session.emitter.collect("vally_seal_counters", run=run)


def shard_counters(
    shard_dir: Path, snapshot: Mapping[str, Any], run_id: str, count: int
) -> dict[str, RecordCounter]:
    """The counters of the merge's reporters (report and console) for a shard's seal, by
    key; a reporter that fails or cannot be created is left out."""
    session = Session(None, Path.cwd())
    try:
        reporters = merge_reporters(session, console=True, otlp_endpoint=None, trace=False)
    except VallyError:
        return {}
    for name, reporter in reporters:
        session.register_observer(reporter, name)
    run = merge_run_info(snapshot, run_id=run_id, run_dir=shard_dir, planned_trials=count)
    return merge_counters(session, run)


class CounterFeed:
    """Feeds each trial to reporters' counters (see ``vally_seal_counters``): its facts to
    each counter that takes them (``add_facts``, :class:`vally.FactCounter`), and its record
    to the others and to those that ask for it, the line validated as a whole record once
    and only then. A counter that raises is dropped, and all of them when a record asked
    for is not valid (its reporter then reads the records itself).

    Args:
        counters: The counters, by key.
    """

    def __init__(self, counters: Mapping[str, RecordCounter]) -> None:
        self.counters = dict(counters)
        self._sort()

    def _sort(self) -> None:
        """Split :attr:`counters` into those fed facts and those fed records."""
        self._by_facts: list[tuple[str, Callable[[TrialFacts], object]]] = []
        self._by_record: list[str] = []
        for key, counter in self.counters.items():
            add_facts = getattr(counter, "add_facts", None)
            if callable(add_facts):
                self._by_facts.append((key, add_facts))
            else:
                self._by_record.append(key)

    def _drop(self, key: str) -> None:
        del self.counters[key]
        self._sort()

    def add(self, line: str, facts: TrialFacts) -> None:
        """Count one trial: its results ``line`` and the ``facts`` read from it."""
        wanting: list[str] = []
        for key, add_facts in self._by_facts:
            try:
                if add_facts(facts) is not False:
                    continue
            except Exception:  # a reporter's fault: leave it out, as the emitter does
                self._drop(key)
                continue
            wanting.append(key)
        wanting += self._by_record
        if wanting:
            self._add_record(line, wanting)

    def _add_record(self, line: str, keys: Sequence[str]) -> None:
        """Feed the record of ``line`` to the counters of ``keys``."""
        try:
            record = TrialResultRecord.model_validate_json(line)
        except ValueError:
            self.counters.clear()
            self._sort()
            return
        for key in keys:
            counter = self.counters.get(key)
            if counter is None:
                continue
            try:
                counter.add(record)
            except Exception:  # a reporter's fault: leave it out, as the emitter does
                self._drop(key)

    def states(self) -> dict[str, Any]:
        """Every remaining counter's state, by key."""
        out: dict[str, Any] = {}
        for key, counter in self.counters.items():
            with contextlib.suppress(Exception):
                out[key] = counter.state()
        return out


def sealed_reporter_states(shards: Sequence[ShardInput]) -> dict[str, list[Any]]:
    """Every shard's reporter data by key (see ``RunOutcome.sealed``), when every shard was
    read from its seal; keys some shard's seal lacks are left out."""
    found = [(shard.seal or {}).get("reporters") for shard in shards]
    per_shard = [states for states in found if isinstance(states, dict)]
    if not per_shard or len(per_shard) != len(shards):
        return {}
    return {
        key: [states[key] for states in per_shard]
        for key in per_shard[0]
        if all(key in states for states in per_shard)
    }


def discard_seal(shard_dir: Path) -> None:
    """Remove a shard's seal (a shard that runs again changes what it sealed)."""
    with contextlib.suppress(FileNotFoundError):
        (shard_dir / SEAL_FILE).unlink()


def _scan(
    path: Path, *, sink: Callable[[memoryview], object] | None = None, lines: bool = False
) -> tuple[dict[str, int], int]:
    """The pin (``{"bytes": size, "crc32": checksum}``) of the file at ``path`` and, with
    ``lines``, how many newlines it holds (else 0), read once through one reused buffer;
    each piece read also goes to ``sink``.

    Raises:
        OSError: The file cannot be read (or ``sink`` raised it).
    """
    buffer = bytearray(CHUNK)
    view = memoryview(buffer)
    size = crc = newlines = 0
    with path.open("rb", buffering=0) as handle:
        while count := handle.readinto(buffer):
            piece = view[:count]
            size += count
            crc = zlib.crc32(piece, crc)
            if lines:
                newlines += buffer.count(b"\n", 0, count)
            if sink is not None:
                sink(piece)
    return {"bytes": size, "crc32": crc}, newlines


def pin(path: Path) -> dict[str, int]:
    """``{"bytes": size, "crc32": checksum}`` of the file at ``path``.

    Raises:
        OSError: The file cannot be read.
    """
    return _scan(path)[0]


def place_ranges(places: Sequence[int]) -> list[list[int]]:
    """Increasing ``places`` as ``[start, stop, step]`` ranges (a round-robin shard's
    selection is one range)."""
    ranges: list[list[int]] = []
    at, count = 0, len(places)
    while at < count:
        start = places[at]
        if at + 1 == count:
            ranges.append([start, start + 1, 1])
            break
        step = places[at + 1] - start
        end = at + 1
        while end + 1 < count and places[end + 1] - places[end] == step:
            end += 1
        ranges.append([start, places[end] + 1, step])
        at = end + 1
    return ranges


def shard_seal(
    shard_dir: Path, manifest: Mapping[str, Any], snapshot: Mapping[str, Any]
) -> dict[str, Any] | None:
    """The seal of a finished shard, read from its files as a merge reads them; None when
    the shard cannot be sealed (not finished, a line a merge would not pass through
    unchanged, a record that does not match the manifest).

    Args:
        shard_dir: The shard folder, with its manifest, plan snapshot and results written.
        manifest: Its manifest (as written).
        snapshot: Its plan snapshot.
    """
    selected = manifest.get("selectedKeys")
    if not manifest.get("finished") or not isinstance(selected, list):
        return None
    if sorted(map(str, manifest.get("completedKeys") or [])) != sorted(map(str, selected)):
        return None
    plan = PlanKeys([str(key) for key in snapshot.get("trials") or []])
    shard = ShardInput(shard_dir, dict(manifest), dict(snapshot), plan)
    share_keys(shard, plan)
    places = shard.selected_places
    if places is None or any(place < 0 for place in places):
        return None
    index = TrialIndex(snapshot, [shard], plan)
    tallies = PlanTallies(snapshot, plan)
    run_id = str(manifest.get("runId"))
    feed = CounterFeed(shard_counters(shard_dir, snapshot, run_id, len(places)))
    folders = {str(v): safe_name(str(v)) for v in snapshot.get("variants") or []}
    counts = dict.fromkeys(folders, 0)
    warnings: list[str] = []
    try:
        for variant, line, facts, place in stream_shard_records(
            shard, folders, index, warnings.append
        ):
            if facts.offloaded:
                return None
            counts[variant] += 1
            tallies.add_facts(facts, place)
            feed.add(line, facts)
        if warnings or index.unread_completed(shard):
            return None
        results: dict[str, dict[str, Any] | None] = {}
        for variant, folder in folders.items():
            path = shard_dir / folder / RESULTS_FILE
            if not path.is_file():
                results[variant] = None
                continue
            pinned, lines = _scan(path, lines=True)
            if lines != counts[variant]:  # a blank line or a record of another type
                return None
            results[variant] = {"file": f"{folder}/{RESULTS_FILE}", **pinned, "records": lines}
        return {
            "schemaVersion": SEAL_SCHEMA_VERSION,
            **{name: manifest.get(name) for name in _IDENTITY},
            "manifest": pin(shard_dir / MANIFEST_FILE),
            "snapshot": pin(shard_dir / SNAPSHOT_FILE),
            "plannedTrials": len(plan),
            "trials": len(places),
            "selected": place_ranges(places),
            "results": results,
            "tallies": plan_state(tallies),
            "reporters": feed.states(),
            "sealedAt": utc_now(),
        }
    except (VallyError, OSError):
        return None


def seal(shard_dir: Path, manifest: Mapping[str, Any], snapshot: Mapping[str, Any]) -> bool:
    """Write ``shard-seal.json`` for a finished shard when it can be sealed (see
    :func:`shard_seal`); returns whether it was.

    Raises:
        OutputError: The seal cannot be written.
    """
    sealed = shard_seal(shard_dir, manifest, snapshot)
    if sealed is None:
        discard_seal(shard_dir)
        return False
    write_json_file(shard_dir / SEAL_FILE, sealed)
    return True


# --------------------------------------------------------------------------- merge


def _read_seal(path: Path) -> dict[str, Any] | None:
    try:  # vally writes seals; orjson refuses nesting over 1,024 levels, json recursing
        data = loads_json((path / SEAL_FILE).read_bytes())
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or data.get("schemaVersion") not in READ_SCHEMA_VERSIONS:
        return None
    return data


def _matches(path: Path, expected: Any) -> bool:
    """The file at ``path`` matches the pin ``expected``."""
    try:
        return bool(path.stat().st_size == expected["bytes"] and _scan(path)[0] == expected)
    except (OSError, KeyError, TypeError):
        return False


def _pinned_bytes(path: Path, expected: Any) -> bytes | None:
    """The bytes of ``path`` when they match the pin ``expected``, else None."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if expected != {"bytes": len(data), "crc32": zlib.crc32(data)}:
        return None
    return data


def _partition(seals: Sequence[Mapping[str, Any]], planned: int) -> bool:
    """The seals' selections cover every planned trial exactly once."""
    taken = bytearray(planned)
    for item in seals:
        counted = 0
        for start, stop, step in item["selected"]:
            if not (0 <= start < stop <= planned and step >= 1):
                return False
            spot = slice(start, stop, step)
            segment = taken[spot]
            if segment.count(0) != len(segment):
                return False
            taken[spot] = b"\x01" * len(segment)
            counted += len(segment)
        if counted != item["trials"]:
            return False
    return taken.count(0) == 0


def read_sealed_shards(paths: Sequence[Path]) -> list[ShardInput] | None:
    """The shards of one run read from their seals, in shard order, when every shard is
    sealed, its manifest unchanged since, and the seals make one finished run whose
    selections partition the plan; else None (read the shards in full with
    :func:`vally_experiment.validation.read_run_shards`, which names what is wrong). The results
    files are checked against their pins later, while they are copied
    (:func:`copy_sealed_results`).
    """
    found: list[tuple[Path, dict[str, Any]]] = []
    for path in paths:
        seal_data = _read_seal(path)
        if seal_data is None or not _matches(path / MANIFEST_FILE, seal_data.get("manifest")):
            return None
        found.append((path, seal_data))
    if not found:
        return None
    try:
        return _sealed_run(found)
    except (KeyError, TypeError, ValueError):
        return None


def _sealed_run(found: Sequence[tuple[Path, dict[str, Any]]]) -> list[ShardInput] | None:
    first = found[0][1]
    same = ("runId", "experiment", "strategy", "planDigest", "snapshot", "plannedTrials")
    total = int(first["shard"]["total"])
    indexes: set[int] = set()
    resolved: set[Path] = set()
    for path, item in found:
        if any(item[name] != first[name] for name in same) or item["finished"] is not True:
            return None
        index = int(item["shard"]["index"])
        if int(item["shard"]["total"]) != total or index in indexes or not 1 <= index <= total:
            return None
        indexes.add(index)
        resolved.add(path.resolve())
    if len(indexes) != total or len(resolved) != len(found):
        return None
    if not _partition([item for _, item in found], int(first["plannedTrials"])):
        return None
    raw = _pinned_bytes(found[0][0] / SNAPSHOT_FILE, first["snapshot"])
    others = (path / SNAPSHOT_FILE for path, _ in found[1:])
    if raw is None or not all(_matches(path, first["snapshot"]) for path in others):
        return None
    snapshot = loads_bounded(raw.decode("utf-8"), max_depth=record_depth())
    if not isinstance(snapshot, dict) or len(snapshot.get("trials") or []) != int(
        first["plannedTrials"]
    ):
        return None
    shards = [
        ShardInput(path, {name: item[name] for name in _IDENTITY}, snapshot, seal=item)
        for path, item in found
    ]
    shards.sort(key=lambda shard: shard.index)
    return shards


def sealed_tallies(shards: Sequence[ShardInput], tallies: PlanTallies) -> None:
    """Add every sealed shard's tallies to ``tallies``, in shard order.

    Raises:
        KeyError, TypeError, ValueError: A seal's tallies are not of this plan.
    """
    for shard in shards:
        assert shard.seal is not None
        absorb_plan(tallies, shard.seal["tallies"])


class _WriteFailed(Exception):
    """Writing a copied piece failed (its ``OSError`` is the cause)."""


def copy_sealed_results(shard: ShardInput, variant: str, out: IO[bytes]) -> bool:
    """Append a sealed shard's ``results.jsonl`` of ``variant`` to ``out``, checking its
    bytes against the seal's pin as they go; False when they do not match or cannot be
    read (the caller discards ``out``), or the seal has no such variant.

    Raises:
        OSError: Writing to ``out`` failed.
    """
    assert shard.seal is not None
    results = shard.seal["results"]
    if variant not in results:
        return False
    expected = results[variant]
    path = shard.path / safe_name(variant) / RESULTS_FILE
    if expected is None:
        return not path.exists()

    def write(piece: memoryview) -> None:
        try:
            out.write(piece)
        except OSError as exc:
            raise _WriteFailed from exc

    try:
        pinned, _lines = _scan(path, sink=write)
    except _WriteFailed as failed:
        assert isinstance(failed.__cause__, OSError)
        raise failed.__cause__ from None
    except OSError:
        return False
    return bool(pinned == {"bytes": expected["bytes"], "crc32": expected["crc32"]})
