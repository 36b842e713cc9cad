"""Reading shard folders back and the validation ``vally experiment merge`` performs before it
concatenates shard results: shards that are missing or duplicated, disagree on the run
identity or plan, did not finish, or whose selections do not partition the plan exactly are
refused. Also the index of trial keys."""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import repeat
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vally import (
    MANIFEST_FILE,
    SNAPSHOT_FILE,
    ShardValidationError,
    VallyError,
    loads_bounded,
    plan_digest,
    read_fact_lines,
    record_depth,
    require_directory,
)

if TYPE_CHECKING:
    from vally import TrialFacts


@dataclass
class ShardInput:
    """One shard directory as read by merge.

    Attributes:
        path: The shard folder.
        manifest: Its ``shard-manifest.json``.
        snapshot: Its ``plan-snapshot.json`` (one object shared by the shards whose files
            are identical, see :func:`read_run_shards`).
        plan_keys: The snapshot's :class:`PlanKeys`, when read by :func:`read_run_shards`.
        selected_places: The place in the plan of each of the manifest's ``selectedKeys``
            (-1 for a key not planned), when read by :func:`read_run_shards`.
        selected_range: Those places as a range, when they are a slice of the plan at even
            steps (a round-robin shard's), so a check over them is one slice.
        seal: Its ``shard-seal.json``, when read from its seal
            (:func:`vally_experiment.seal.read_sealed_shards`); then ``manifest`` holds
            only the fields the seal repeats, not the trial keys.
    """

    path: Path
    manifest: dict[str, Any]
    snapshot: dict[str, Any]
    plan_keys: PlanKeys | None = None
    selected_places: array[int] | None = None
    selected_range: range | None = None
    seal: dict[str, Any] | None = None

    @property
    def trials(self) -> int:
        """How many trials the shard selected."""
        if self.seal is not None:
            return int(self.seal["trials"])
        return len(self.manifest.get("selectedKeys") or [])

    def span(self, plan: PlanKeys) -> slice | None:
        """The shard's selection as a slice of ``plan`` (see ``selected_range``), or None."""
        if self.selected_range is None or self.plan_keys is not plan:
            return None
        taken = self.selected_range
        return slice(taken.start, taken.stop, taken.step)

    def places(self, plan: PlanKeys) -> Iterator[tuple[Any, int]]:
        """``(key, place in the plan or -1)`` for each of the manifest's ``selectedKeys``."""
        keys = self.manifest.get("selectedKeys") or []
        if self.selected_places is not None and self.plan_keys is plan:
            return zip(keys, self.selected_places, strict=True)
        return ((key, -1 if (at := plan.find(key)) is None else at) for key in keys)

    @cached_property
    def index(self) -> int:
        """The shard's 1-based index."""
        return int(self.manifest["shard"]["index"])

    @cached_property
    def total(self) -> int:
        """The shard count of the run."""
        return int(self.manifest["shard"]["total"])


Known = list[tuple[bytes, dict[str, Any]]]
"""Files read before, each with its text and the object parsed from it (shards carry
copies of one plan snapshot: a copy is compared byte for byte, about 30 times faster than
hashing it, and not parsed again)."""


def _read_json(path: Path, what: str, known: Known | None = None) -> dict[str, Any]:
    """The JSON object in ``path``; with ``known``, a file identical to one read before is
    not parsed again and the object read then is returned."""
    if not path.is_file():
        raise ShardValidationError(
            f"{path.parent} has no {path.name}: it is not a shard directory, or the shard "
            f"never started",
            hint="pass the <output-dir>/<run-id>/shard-<i>-of-<n> folders written by "
            "'vally experiment run --shard'",
        )
    try:
        raw = path.read_bytes()
        for text, parsed in known or ():
            if text == raw:
                return parsed
        data = loads_bounded(raw.decode("utf-8"), max_depth=record_depth())
    except (OSError, ValueError) as exc:
        raise ShardValidationError(f"cannot read the {what} {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise ShardValidationError(f"the {what} {path} is not a JSON object")
    if known is not None:
        known.append((raw, data))
    return data


def read_shard(path: Path, snapshots: Known | None = None) -> ShardInput:
    """Read one shard directory's manifest and plan snapshot; with ``snapshots`` (the
    snapshot files read before, see :data:`Known`), a snapshot file identical to one read
    before is not parsed again.

    Raises:
        ShardValidationError: The directory, manifest or snapshot is missing or unreadable.
    """
    require_directory(
        path,
        "shard directory",
        hint="pass the <output-dir>/<run-id>/shard-<i>-of-<n> folders written by "
        "'vally experiment run --shard'",
        error=ShardValidationError,
    )
    inner = sorted(p.name for p in path.glob("shard-*-of-*") if (p / MANIFEST_FILE).is_file())
    if inner and not (path / MANIFEST_FILE).exists():
        raise ShardValidationError(
            f"{path} is a run folder holding shard directories, not a shard directory",
            hint="pass each shard directory explicitly: "
            + " ".join(str(path / name) for name in inner),
        )
    manifest = _read_json(path / MANIFEST_FILE, "shard manifest")
    snapshot = _read_json(path / SNAPSHOT_FILE, "plan snapshot", snapshots)
    shard = manifest.get("shard")
    if not isinstance(shard, dict) or "index" not in shard or "total" not in shard:
        raise ShardValidationError(f"the shard manifest {path / MANIFEST_FILE} has no shard")
    return ShardInput(path, manifest, snapshot)


def read_run_shards(paths: Iterable[Path]) -> list[ShardInput]:
    """Read the shard folders of one run (see :func:`read_shard`), holding the plan once:
    shards whose ``plan-snapshot.json`` files are byte for byte the same share one parsed
    snapshot, and the trial keys of every manifest are replaced by the snapshot's own
    strings, so memory grows with the plan once, not once per shard.

    Raises:
        ShardValidationError: A folder, manifest or snapshot is missing or unreadable.
    """
    snapshots: Known = []
    plans: dict[int, PlanKeys] = {}  # id of a parsed snapshot -> its keys
    shards: list[ShardInput] = []
    for path in paths:
        shard = read_shard(path, snapshots)
        keys = plans.get(id(shard.snapshot))
        if keys is None:
            trials = shard.snapshot.get("trials")
            keys = PlanKeys([str(k) for k in trials] if isinstance(trials, list) else [])
            plans[id(shard.snapshot)] = keys
        shard.plan_keys = keys
        share_keys(shard, keys)
        shards.append(shard)
    return shards


def share_keys(shard: ShardInput, plan: PlanKeys) -> None:
    """Replace the manifest's trial keys by the plan's own strings and note the place of
    each selected one (one lookup per key, made once for every later check)."""
    manifest = shard.manifest
    selected, completed = manifest.get("selectedKeys"), manifest.get("completedKeys")
    if isinstance(selected, list):
        sliced = _slice_of(plan, selected)
        shared: list[Any]
        if sliced is not None:
            shared, shard.selected_range = sliced
            places = array("q", shard.selected_range)
        else:
            places, trials = plan.places_of(selected), plan.trials
            if -1 in places:  # a key not planned (or not text) is kept as it is
                pairs = zip(selected, places, strict=True)
                shared = [key if at < 0 else trials[at] for key, at in pairs]
            else:
                shared = list(map(trials.__getitem__, places))
        same = completed == selected  # usually: then both lists are one
        manifest["selectedKeys"], shard.selected_places = shared, places
        if same:
            manifest["completedKeys"] = shared
            return
    if isinstance(completed, list):
        manifest["completedKeys"] = [
            plan.canonical(k) if isinstance(k, str) else k for k in completed
        ]


def _slice_of(plan: PlanKeys, keys: list[Any]) -> tuple[list[str], range] | None:
    """``keys`` as a slice of the plan at even steps (a round-robin shard's selection):
    the plan's own strings and their places, found with two lookups and one comparison
    in C instead of a lookup per key; None when they are not such a slice."""
    if not keys:
        return None
    first = plan.find(keys[0])
    second = plan.find(keys[1]) if len(keys) > 1 else None
    if first is None or (len(keys) > 1 and (second is None or second <= first)):
        return None
    step = 1 if second is None else second - first
    places = range(first, first + step * len(keys), step)
    shared = list(plan.trials[first : places.stop : step])
    return (shared, places) if shared == keys else None


def validate_shards(shards: Sequence[ShardInput]) -> None:
    """Check that ``shards`` are every shard of one run, finished, partitioning the plan.

    Raises:
        ShardValidationError: With a message naming the problem and the shard(s).
    """
    if not shards:
        raise ShardValidationError("no shard directories given")
    _check_same_run(shards)
    by_index = _check_complete(shards)
    _check_partition(shards[0], by_index)


def _check_same_run(shards: Sequence[ShardInput]) -> None:
    """Distinct folders of one run, shard count, strategy and plan."""
    first = shards[0]
    seen_paths: dict[Path, int] = {}
    for shard in shards:
        resolved = shard.path.resolve()
        if resolved in seen_paths:
            raise ShardValidationError(f"shard directory {shard.path} is given twice")
        seen_paths[resolved] = shard.index
    for field, label in (("runId", "run id"), ("experiment", "experiment")):
        for shard in shards[1:]:
            if shard.manifest.get(field) != first.manifest.get(field):
                raise ShardValidationError(
                    f"shards belong to different runs: {first.path} has {label} "
                    f"{first.manifest.get(field)!r}, "
                    f"{shard.path} has {shard.manifest.get(field)!r}",
                    hint="merge only the shard directories of one --run-id",
                )
    total = first.total
    for shard in shards[1:]:
        if shard.total != total:
            raise ShardValidationError(
                f"shards disagree on the shard count: {first.path} is of {total}, "
                f"{shard.path} is of {shard.total}"
            )
        if shard.manifest.get("strategy") != first.manifest.get("strategy"):
            raise ShardValidationError(
                f"shards used different strategies: {first.manifest.get('strategy')!r} "
                f"({first.path}) and {shard.manifest.get('strategy')!r} ({shard.path})"
            )
    digests: dict[int, str] = {}  # shards sharing one snapshot object digest it once
    for shard in (first, *shards):
        if id(shard.snapshot) not in digests:
            digests[id(shard.snapshot)] = plan_digest(shard.snapshot)
    digest = digests[id(first.snapshot)]
    for shard in shards:
        if digests[id(shard.snapshot)] != digest or shard.manifest.get("planDigest") != digest:
            raise ShardValidationError(
                f"the plan snapshot of {shard.path} differs from that of {first.path}",
                hint="every shard must run the same experiment file, evals, params and "
                "flags; re-run the odd shard with the same inputs",
            )


def _check_complete(shards: Sequence[ShardInput]) -> dict[int, ShardInput]:
    """Every shard index present once, and every shard finished; returns them by index."""
    total = shards[0].total
    by_index: dict[int, ShardInput] = {}
    for shard in shards:
        if shard.index in by_index:
            raise ShardValidationError(
                f"shard {shard.index}/{total} is given twice: {by_index[shard.index].path} "
                f"and {shard.path}"
            )
        by_index[shard.index] = shard
    missing = [i for i in range(1, total + 1) if i not in by_index]
    if missing:
        raise ShardValidationError(
            "missing shard(s): " + ", ".join(f"{i}/{total}" for i in missing),
            hint="pass every shard directory of the run; re-run a lost shard with the "
            "same --run-id and --shard",
        )
    for index in sorted(by_index):
        shard = by_index[index]
        selected = shard.manifest.get("selectedKeys") or []
        completed = shard.manifest.get("completedKeys") or []
        same = completed is selected or sorted(completed) == sorted(selected)  # see share_keys
        if not shard.manifest.get("finished") or not same:
            raise ShardValidationError(
                f"shard {index}/{total} ({shard.path}) did not finish: "
                f"{len(completed)} of {len(selected)} selected trial(s) completed",
                hint="re-run that shard with the same --run-id and --shard",
            )
    return by_index


def _check_partition(first: ShardInput, by_index: Mapping[int, ShardInput]) -> None:
    """The shards' selected trials partition the planned ones (checked in 3 bytes per
    planned trial besides the plan's keys)."""
    total = first.total
    planned = first.plan_keys
    if planned is None:
        planned = PlanKeys([str(k) for k in first.snapshot.get("trials") or []])
    owner = array("H", bytes(2 * len(planned)))
    unknown: dict[str, int] = {}  # keys not in the plan -> the shard that ran them
    for index in sorted(by_index):
        span = by_index[index].span(planned)
        if span is not None and owner[span].count(0) == len(owner[span]):
            owner[span] = array("H", [index]) * len(owner[span])  # no overlap: all at once
            continue
        for key, place in by_index[index].places(planned):
            if place < 0:
                ran = unknown.setdefault(key, index)
            else:
                ran = owner[place] or index
                owner[place] = ran
            if ran != index:
                raise ShardValidationError(
                    f"shards {ran}/{total} and {index}/{total} both ran trial {key}: "
                    "their slices overlap"
                )
    if unknown:
        raise ShardValidationError(
            f"shards ran trial(s) that are not in the plan, e.g. {min(map(str, unknown))}"
        )
    if 0 in owner:  # a planned trial no shard ran
        uncovered = [planned.trials[place] for place, ran in enumerate(owner) if not ran]
        raise ShardValidationError(
            f"the shards do not cover the plan: {len(uncovered)} planned trial(s) were run "
            f"by no shard, e.g. {uncovered[0]}"
        )


class PlanKeys(Mapping[str, int]):
    """The planned trial keys of a run, in plan order, as a read-only map from key to its
    place in the plan. The keys are the snapshot's own strings (the map adds about 70
    bytes per key, no string), and :meth:`canonical` lets other lists of the same keys
    (the manifests') share them instead of holding copies.

    Args:
        keys: The planned keys, in plan order (the snapshot's ``trials``).
    """

    def __init__(self, keys: Sequence[str]) -> None:
        self.trials = keys
        """The planned keys, in plan order."""
        self.places = {key: place for place, key in enumerate(keys)}

    def find(self, key: object) -> int | None:
        """``key``'s place in the plan, or None when it is not planned."""
        return self.places.get(key) if isinstance(key, str) else None

    def places_of(self, keys: Sequence[Any]) -> array[int]:
        """The place in the plan of each of ``keys`` (-1 for a key not planned), looked up
        in one pass of C."""
        try:
            return array("q", map(self.places.get, keys, repeat(-1)))
        except TypeError:  # a key that cannot be hashed (a list, say): one at a time
            return array("q", [-1 if (at := self.find(key)) is None else at for key in keys])

    def __getitem__(self, key: str) -> int:
        place = self.find(key)
        if place is None:
            raise KeyError(key)
        return place

    def __len__(self) -> int:
        return len(self.places)

    def __iter__(self) -> Iterator[str]:
        return iter(self.places)

    def canonical(self, key: str) -> str:
        """The plan's own string equal to ``key`` (so a copy read elsewhere can be
        dropped), or ``key`` itself when it is not planned."""
        place = self.find(key)
        return key if place is None else self.trials[place]


class TrialIndex:
    """Every planned trial of a sharded run: its place in the plan, the shard that selected
    it and whether its record was read. Takes three bytes per planned trial besides the
    plan's keys (see :class:`PlanKeys`), so checking a merge's records costs no memory per
    record.

    Args:
        snapshot: The plan snapshot (its ``trials``, in plan order).
        shards: The run's shards (each one's ``selectedKeys``).
        position: The snapshot's :class:`PlanKeys`, when already built.
    """

    def __init__(
        self,
        snapshot: Mapping[str, Any],
        shards: Sequence[ShardInput],
        position: PlanKeys | None = None,
    ) -> None:
        self.position = position or PlanKeys(list(map(str, snapshot.get("trials") or [])))
        self.owner = array("H", bytes(2 * len(self.position)))
        self.read = bytearray(len(self.position))
        for shard in shards:
            number = shard.index
            span = shard.span(self.position)
            if span is not None:
                self.owner[span] = array("H", [number]) * len(self.owner[span])
                continue
            for _key, place in shard.places(self.position):
                if place >= 0:
                    self.owner[place] = number

    def take(self, shard: ShardInput, path: Path, key: str) -> int:
        """Mark ``key`` read and return its place in the plan, or fail: not selected by
        ``shard``, or read before.

        Raises:
            ShardValidationError: ``path`` holds a trial the shard did not select, or holds
                one trial twice.
        """
        place = self.position.places.get(key)
        if place is None or self.owner[place] != shard.index:
            raise ShardValidationError(
                f"{path} holds trial {key}, which shard {shard.index}/{shard.total} did not select"
            )
        if self.read[place]:
            raise ShardValidationError(
                f"{path} holds trial {key} more than once: shard {shard.index}/{shard.total} "
                "is not one clean run",
                hint="each trial must have exactly one record; re-run that shard into "
                "a fresh output directory with the same --run-id and --shard",
            )
        self.read[place] = 1
        return place

    def unread_completed(self, shard: ShardInput) -> list[str]:
        """Those of ``shard``'s completed keys whose record was not read (its selection
        checked as one slice when it is one and every selected trial completed)."""
        manifest = shard.manifest
        completed: list[str] = manifest.get("completedKeys") or []
        span = shard.span(self.position)
        if span is None or completed is not manifest.get("selectedKeys"):
            return self.unread(completed)
        return [] if 0 not in self.read[span] else self.unread(completed)

    def unread(self, keys: Iterable[str]) -> list[str]:
        """Those of ``keys`` whose record was not read."""
        out: list[str] = []
        for key in keys:
            place = self.position.find(str(key))
            if place is None or not self.read[place]:
                out.append(str(key))
        return out


def stream_shard_records(
    shard: ShardInput,
    variant_dirs: Mapping[str, str],
    index: TrialIndex,
    warn: Callable[[str], None] | None = None,
) -> Iterator[tuple[str, str, TrialFacts, int]]:
    """``(variant, line text, facts, place in the plan)`` for every record of one shard,
    variant by variant in file order, one at a time (memory does not grow with the
    records). Only the fields the facts come from are validated (see
    :class:`vally.TrialFacts`); the line is passed on as written.

    Args:
        shard: The shard.
        variant_dirs: Variant name -> its folder name.
        index: The run's planned trials; records are marked read in it.
        warn: Receives warnings (a torn last line, skipped).

    Raises:
        ShardValidationError: A results file is unreadable or has a bad line (with its
            ``file:line`` and the field), holds a trial the shard did not select, or holds
            one trial twice; or the shard completed a trial that no results file holds
            (checked once every record was read).
    """
    for variant, folder in variant_dirs.items():
        path = shard.path / folder / "results.jsonl"
        if not path.is_file():
            continue
        try:
            for _number, line, facts in read_fact_lines(path, warn):
                yield variant, line, facts, index.take(shard, path, facts.key_id)
        except ShardValidationError:
            raise
        except VallyError as exc:
            raise ShardValidationError(f"cannot read {path}: {exc.message}") from exc
    lost = index.unread_completed(shard)
    if lost:
        raise ShardValidationError(
            f"shard {shard.index}/{shard.total} ({shard.path}) completed {len(lost)} trial(s) "
            f"that its results files do not hold, e.g. {lost[0]}",
            hint="a results.jsonl of that shard was removed or truncated; restore it, or "
            "re-run that shard with the same --run-id and --shard",
        )
