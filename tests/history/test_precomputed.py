"""An experiment's comparison is computed at ingest and read by the endpoint: no scipy
import and no sign-flip tests on the request path, while the run's sums stay as they were
when it was computed; once they change, the endpoint computes it again."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import select, update

from tests.history.serving import LOCAL
from tests.history.synth import RunSpec, write_run

pytest.importorskip("starlette")
from starlette.testclient import TestClient

from vally_serve import schema
from vally_serve.api import create_app
from vally_serve.ingest import ingest
from vally_serve.store import open_store

SPEC = RunSpec(
    run_id="exp-pre",
    seed=5,
    stimuli=6,
    models=("gpt-a",),
    trials=3,
    variants=("baseline", "tuned"),
    baseline="baseline",
    experiment="pre",
    pass_bias={"baseline": 0.4, "tuned": 0.9},
)

NO_SCIPY = """
import json, sys
from starlette.testclient import TestClient
from vally_serve.api import create_app
from vally_serve.store import open_store
store = open_store(sys.argv[1], create=False)
client = TestClient(create_app(store), base_url="http://127.0.0.1")
body = client.get("/api/runs/exp-pre/experiment").json()
print(json.dumps({"scipy": "scipy" in sys.modules, "variants": len(body["variants"])}))
"""


def test_the_ingest_keeps_the_comparison_and_the_endpoint_reads_it(
    store_target: str, tmp_path: Path
) -> None:
    run = write_run(tmp_path / "exp", SPEC)
    store = open_store(store_target)
    try:
        ingest(store, [run / "baseline", run / "tuned"])
        client = TestClient(create_app(store), base_url=LOCAL)
        first = client.get("/api/runs/exp-pre/experiment").json()
        with store.read() as connection:
            stamp, kept = connection.execute(
                select(schema.analyses.c.stamp, schema.analyses.c.body).where(
                    schema.analyses.c.run_id == "exp-pre"
                )
            ).one()
        assert json.loads(kept) == {"baseline": "baseline", "variants": first["variants"]}
        tuned = first["variants"][1]
        assert tuned["name"] == "tuned" and tuned["deltas"]["passRate"]["delta"] > 0

        marked = json.loads(kept)
        marked["variants"][1]["deltas"]["passRate"]["delta"] = 123.0
        with store.engine.begin() as connection:
            connection.execute(update(schema.analyses).values(body=json.dumps(marked)))
        read = client.get("/api/runs/exp-pre/experiment").json()
        assert read["variants"][1]["deltas"]["passRate"]["delta"] == 123.0  # read, not computed

        more = RunSpec(**{**SPEC.__dict__, "stimuli": 7, "seed": 9})
        extra = write_run(tmp_path / "more", more)
        ingest(store, [extra / "tuned"])  # the run's sums change
        with store.engine.begin() as connection:  # as if that ingest had kept no answer
            connection.execute(update(schema.analyses).values(stamp=stamp, body=json.dumps(marked)))
        fresh = client.get("/api/runs/exp-pre/experiment").json()
        assert fresh["variants"][1]["deltas"]["passRate"]["delta"] != 123.0
        assert fresh["variants"][1]["trials"] > tuned["trials"]
    finally:
        store.close()


def test_the_endpoint_does_not_import_scipy(tmp_path: Path) -> None:
    run = write_run(tmp_path / "exp", SPEC)
    target = str(tmp_path / "h.db")
    store = open_store(target)
    ingest(store, [run])
    store.close()
    result = subprocess.run(
        [sys.executable, "-c", NO_SCIPY, target],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"scipy": False, "variants": 2}
