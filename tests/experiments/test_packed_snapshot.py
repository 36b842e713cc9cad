"""An experiment holds its plan snapshot packed during the run: equal to the snapshot, read
back as fresh copies, written and hashed as the plain dictionary, and a small part of its
size."""

from __future__ import annotations

import json
from typing import Any

from tests.traced import traced_held
from vally.engine.shards.partition import canonical_json, packed_snapshot, plan_digest
from vally.specs.packed import plain


def _snapshot(stimuli: int, variants: tuple[str, ...] = ("base", "other")) -> dict[str, Any]:
    evals = [
        {
            "variant": variant,
            "name": "ev",
            "file": "eval.yaml",
            "evalHash": "abc",
            "configHash": None,
            "runs": 1,
            "models": ["m"],
            "threshold": 0.5,
            "stimuli": [{"name": f"s{i}", "graders": ["output-contains"]} for i in range(stimuli)],
        }
        for variant in variants
    ]
    return {
        "schemaVersion": 1,
        "experiment": "x",
        "experimentFile": "experiment.yaml",
        "baseline": variants[0],
        "variants": list(variants),
        "vary": [],
        "evals": evals,
        "trials": [f"{v}/ev/s{i}/m/0" for v in variants for i in range(stimuli)],
    }


def test_a_packed_snapshot_reads_writes_and_hashes_as_the_snapshot() -> None:
    snapshot = _snapshot(100)
    packed = packed_snapshot(snapshot)
    assert packed == snapshot
    assert packed["trials"] == snapshot["trials"] and packed["trials"] is not snapshot["trials"]
    [first, _] = packed["evals"]
    assert first["variant"] == "base" and first["stimuli"] == snapshot["evals"][0]["stimuli"]
    back = plain(packed)
    assert type(back) is dict and all(type(item) is dict for item in back["evals"])
    assert json.dumps(back) == json.dumps(snapshot)
    assert canonical_json(back) == canonical_json(snapshot)
    assert plan_digest(back) == plan_digest(snapshot)


def test_a_packed_snapshot_holds_a_small_part_of_the_snapshot() -> None:
    stimuli = 5_000
    _, plain_size = traced_held(lambda: _snapshot(stimuli))
    _, packed_size = traced_held(lambda: packed_snapshot(_snapshot(stimuli)))
    # about 385 bytes a trial as dictionaries, lists and text; about 10 packed
    assert packed_size * 10 < plain_size
