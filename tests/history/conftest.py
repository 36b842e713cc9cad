"""Fixtures of the history tests: real run folders made by ``vally eval`` and ``vally
experiment run``, synthetic ones, and stores on SQLite and on a real PostgreSQL server.

PostgreSQL is found through ``VALLY_TEST_POSTGRES_URL`` (``scripts/install-viewer-services.sh``
starts one; ``.ci/run`` exports the URL). Without it the PostgreSQL tests skip, unless
``VALLY_REQUIRE_SERVE_SERVICES=1`` (CI): then they fail. The same variable turns a missing
``chromium``/``chromedriver`` of the browser tests into a failure.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.history.synth import RunSpec, write_run

ROOT = Path(__file__).resolve().parents[2]
pytest.importorskip("sqlalchemy", reason="needs the serve extra: pip install 'vally[serve]'")


def services_required() -> bool:
    """True when missing PostgreSQL or Chromium must fail the tests (CI)."""
    return os.environ.get("VALLY_REQUIRE_SERVE_SERVICES", "") not in ("", "0")


def skip_or_fail(reason: str) -> None:
    """Skip, or fail under ``VALLY_REQUIRE_SERVE_SERVICES=1``."""
    if services_required():
        pytest.fail(f"VALLY_REQUIRE_SERVE_SERVICES=1 but {reason}", pytrace=False)
    pytest.skip(reason)


def vally(*args: str, cwd: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run the ``vally`` CLI in a subprocess."""
    result = subprocess.run(
        [sys.executable, "-m", "vally", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "NO_COLOR": "1"},
        check=False,
    )
    if check:
        assert result.returncode == 0, result.stdout + result.stderr
    return result


@pytest.fixture(scope="session")
def real_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An output folder with one real eval run (quickstart) and one real experiment run
    (examples/experiment), made by the CLI."""
    work = tmp_path_factory.mktemp("real-runs")
    shutil.copytree(ROOT / "examples", work / "examples")
    vally("eval", "-e", "examples/quickstart/eval.yaml", "--output-dir", "out", cwd=work)
    vally(
        "experiment", "run", "examples/experiment/experiment.yaml", "--output-dir", "out", cwd=work
    )
    return work / "out"


@pytest.fixture(scope="session")
def synthetic_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two eval runs (the second newer) and one experiment with three variants."""
    root = tmp_path_factory.mktemp("synthetic")
    write_run(root / "run-a", RunSpec(run_id="run-a", seed=1, started="2026-01-10T09:00:00.000Z"))
    write_run(
        root / "run-b",
        RunSpec(
            run_id="run-b", seed=2, started="2026-01-12T09:00:00.000Z", pass_bias={"gpt-a": 0.9}
        ),
    )
    write_run(
        root / "exp-1",
        RunSpec(
            run_id="exp-1",
            seed=3,
            stimuli=8,
            models=("gpt-a",),
            trials=4,
            variants=("baseline", "better", "worse"),
            baseline="baseline",
            experiment="styles",
            started="2026-01-14T09:00:00.000Z",
            pass_bias={"baseline": 0.5, "better": 0.95, "worse": 0.1},
        ),
    )
    return root


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A fresh, empty database on the test PostgreSQL server, dropped afterwards."""
    yield from postgres_database()


def postgres_database() -> Iterator[str]:
    """Create a database on the test server, yield its URL, drop it."""
    base = os.environ.get("VALLY_TEST_POSTGRES_URL")
    if not base:
        skip_or_fail("VALLY_TEST_POSTGRES_URL is not set (scripts/install-viewer-services.sh)")
    psycopg = pytest.importorskip("psycopg")
    name = f"vally_t_{uuid.uuid4().hex[:12]}"
    server, _, _db = base.rpartition("/")
    try:
        admin = psycopg.connect(base, autocommit=True)
    except psycopg.OperationalError as exc:
        skip_or_fail(f"PostgreSQL at {base} does not answer: {exc}")
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    yield f"{server}/{name}"
    with psycopg.connect(base, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", "postgresql"])
def store_target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A store target on each backend: a SQLite file, then a PostgreSQL database."""
    if request.param == "sqlite":
        return str(tmp_path / "history.db")
    return str(request.getfixturevalue("postgres_url"))
