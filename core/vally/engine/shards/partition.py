"""Sharded experiment runs: shard selection, the plan snapshot, shard manifests and the plan
order of records. Sealing, validating and merging shards are the package
``vally_experiment``'s.

Every shard plans the whole run and executes only its slice. The **plan snapshot**
(``plan-snapshot.json``) describes the planned run without anything machine-specific (eval
files relative to the experiment file, no timestamps); its SHA-256 is the **plan digest**.
The **shard manifest** (``shard-manifest.json``) holds the run and shard identity, the
digest, the strategy, the selected trial keys and those completed; ``finished`` is true only
once the shard's results and summaries are written.

Merge refuses shards that are missing or duplicated, disagree on the run identity or plan,
did not finish, or whose selections do not partition the plan exactly.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vally.errors import ConfigError, VallyError

if TYPE_CHECKING:
    from vally.contracts.protocols import TrialKey
    from vally.engine.planning.identity import EvalIdentity
    from vally.engine.planning.plan import Plan
    from vally.engine.planning.variants import ResolvedExperiment
    from vally.models.records import TrialResultRecord

SNAPSHOT_FILE = "plan-snapshot.json"
MANIFEST_FILE = "shard-manifest.json"
EXPERIMENT_MANIFEST_FILE = "experiment-manifest.json"
SCHEMA_VERSION = 1

_SHARD = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


class ShardValidationError(VallyError):
    """Shard outputs that cannot be merged (missing, duplicated, mismatched, unfinished)."""

    code = "VALLY_SHARD_VALIDATION"


@dataclass(frozen=True)
class ShardSpec:
    """One shard of a run: ``index`` (1-based) of ``total``."""

    index: int
    total: int

    @property
    def label(self) -> str:
        """``i/n`` as typed on the command line."""
        return f"{self.index}/{self.total}"

    @property
    def dir_name(self) -> str:
        """``shard-<i>-of-<n>`` with both numbers zero-padded to the same width."""
        width = len(str(self.total))
        return f"shard-{self.index:0{width}d}-of-{self.total:0{width}d}"


def parse_shard(value: str) -> ShardSpec:
    """Parse ``--shard i/n``.

    Raises:
        ConfigError: Not of the form ``i/n`` with ``1 <= i <= n``.
    """
    match = _SHARD.match(value)
    if not match:
        raise ConfigError(
            f"--shard {value!r} is not of the form i/n", hint="write e.g. --shard 1/4"
        )
    index, total = int(match.group(1)), int(match.group(2))
    if total < 1 or not 1 <= index <= total:
        raise ConfigError(
            f"--shard {value}: the index must be between 1 and the total",
            hint="shards are numbered 1..n, e.g. --shard 1/4 ... --shard 4/4",
        )
    return ShardSpec(index, total)


def key_id(key: TrialKey) -> str:
    """A trial key as one string: ``variant/eval/stimulus/model/trial``."""
    return key.as_id()


def record_key_id(record: TrialResultRecord) -> str:
    """The key id of a trial record (the same string :func:`key_id` gives its planned key)."""
    from vally.engine.records.run_folder import model_label

    return "/".join(
        [
            record.variant or "",
            record.eval_name,
            record.stimulus_name,
            model_label(record.model),
            str(record.trial_index),
        ]
    )


def select_keys(
    select: Callable[[Sequence[TrialKey], int, int], Sequence[TrialKey]],
    keys: Sequence[TrialKey],
    shard: ShardSpec,
    *,
    strategy: str = "",
) -> list[TrialKey]:
    """One shard's slice of the plan's keys, checked and returned in plan order.

    Args:
        select: The strategy's ``select(keys, index, total)``.
        keys: Every planned key, in plan order.
        shard: Which shard.
        strategy: The strategy's name, for messages.

    Raises:
        ConfigError: The strategy raised, or returned keys that are not in the plan or
            returned one twice.
    """
    try:
        chosen = list(select(list(keys), shard.index, shard.total))
    except VallyError:
        raise
    except Exception as exc:
        raise ConfigError(
            f"shard strategy {strategy!r} failed for shard {shard.label}: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    planned = set(keys)
    unknown = [k for k in chosen if k not in planned]
    if unknown:
        raise ConfigError(
            f"shard strategy {strategy!r} selected {len(unknown)} key(s) that are not in the "
            f"plan, e.g. {key_id(unknown[0])}",
            hint="a strategy must return a subset of the keys it is given",
        )
    if len(set(chosen)) != len(chosen):
        raise ConfigError(f"shard strategy {strategy!r} selected a key twice")
    wanted = set(chosen)
    return [k for k in keys if k in wanted]


def packed_snapshot(snapshot: Mapping[str, Any]) -> Mapping[str, Any]:
    """``snapshot`` as a run holds it: a read-only mapping equal to it whose trial keys and
    each eval's stimuli are packed (:class:`vally.specs.packed.PackedDocument`: about 10
    bytes a trial instead of about 385); :func:`vally.specs.packed.plain` gives the plain
    dictionary back, to write or hash."""
    from vally.specs.packed import PackedDocument

    evals = [PackedDocument(item) for item in snapshot.get("evals") or []]
    return PackedDocument({**snapshot, "evals": evals})


def _relative(path: Path, base: Path) -> str:
    try:
        return Path(os.path.relpath(path, base)).as_posix()
    except ValueError:  # another drive (Windows): keep the file name only
        return path.name


def plan_snapshot(
    resolved: ResolvedExperiment,
    plan: Plan,
    experiment_file: Path,
    identities: Mapping[tuple[str, str], EvalIdentity] | None = None,
) -> dict[str, Any]:
    """The machine-independent description of a planned experiment run.

    Eval files are relative to the experiment file's folder; there are no timestamps and
    no absolute paths, so every shard of a run produces the identical snapshot. Each eval
    keeps what it measures (``suiteHash``, ``graders``, ``target``: see
    :mod:`vally.engine.planning.identity`), from ``identities`` when given, else computed without
    a plugin session, for the summaries built from the snapshot.
    """
    from vally.engine.planning.identity import eval_identity, snapshot_fields

    base = experiment_file.parent
    hashes = {(e.variant, e.loaded.source): (e.eval_hash, e.config_hash) for e in resolved.evals}
    known = identities or {}
    evals = []
    for planned in plan.evals:
        eval_hash, config_hash = hashes.get((planned.variant, planned.loaded.source), (None, None))
        by_name = {s.name: s for s in planned.loaded.spec.stimuli}
        root = [g.type for g in planned.loaded.spec.graders]
        identity = known.get((planned.variant, planned.name)) or eval_identity(planned)
        evals.append(
            {
                "variant": planned.variant,
                "name": planned.name,
                "file": _relative(planned.loaded.source, base),
                "evalHash": eval_hash,
                "configHash": config_hash,
                "runs": planned.runs,
                "models": list(planned.models),
                "threshold": planned.threshold,
                "stimuli": [
                    {
                        "name": name,
                        "graders": root + [g.type for g in by_name[name].graders]
                        if name in by_name
                        else root,
                    }
                    for name in planned.stimuli
                ],
                **snapshot_fields(identity),
            }
        )
    return {
        "schemaVersion": SCHEMA_VERSION,
        "experiment": resolved.name,
        "experimentFile": experiment_file.name,
        "baseline": resolved.baseline,
        "variants": list(resolved.variants),
        "vary": list(resolved.vary),
        "evals": evals,
        "trials": [key_id(k) for k in plan.keys],
    }


def canonical_json(data: Any) -> str:
    """``data`` as canonical JSON (sorted keys, no spaces)."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def plan_digest(snapshot: Mapping[str, Any]) -> str:
    """``sha256:<hex>`` of the canonical snapshot."""
    return "sha256:" + hashlib.sha256(canonical_json(snapshot).encode("utf-8")).hexdigest()


def shard_manifest(
    *,
    run_id: str,
    experiment: str,
    shard: ShardSpec,
    strategy: str,
    digest: str,
    selected: Sequence[str],
    completed: Sequence[str],
    finished: bool,
    started_at: str,
    completed_at: str | None,
) -> dict[str, Any]:
    """The contents of ``shard-manifest.json``."""
    return {
        "schemaVersion": SCHEMA_VERSION,
        "runId": run_id,
        "experiment": experiment,
        "shard": {"index": shard.index, "total": shard.total, "label": shard.label},
        "strategy": strategy,
        "planDigest": digest,
        "selectedKeys": list(selected),
        "completedKeys": list(completed),
        "finished": finished,
        "startedAt": started_at,
        "completedAt": completed_at,
    }


def write_json_file(path: Path, data: Any) -> None:
    """Write a required JSON file atomically.

    Raises:
        OutputError: The file cannot be written.
    """
    from vally.engine.records.run_folder import output_errors, write_json

    with output_errors(
        str(path), hint="check free disk space and permissions of the output directory"
    ):
        write_json(path, data)


# --------------------------------------------------------------------------- merge


def order_records(
    records: Iterable[TrialResultRecord], planned: Sequence[str]
) -> list[TrialResultRecord]:
    """``records`` in plan order (records of unknown keys last, stably)."""
    position = {key: i for i, key in enumerate(planned)}
    return sorted(records, key=lambda r: position.get(record_key_id(r), len(position)))
