"""``vally serve`` in its three modes, as a real process on a real port, and its errors."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.history.conftest import vally
from tests.history.serving import Served

INTERRUPTED = 130  # Ctrl-C stops the server; vally exits 130 as for every interrupt


def runs_of(url: str) -> list[str]:
    body = httpx.get(url + "api/runs", params={"limit": 500}, timeout=30).json()
    return sorted(r["id"] for r in body["runs"])


def test_a_folder_is_served_from_memory(synthetic_runs: Path, tmp_path: Path) -> None:
    with Served(str(synthetic_runs / "run-a"), cwd=tmp_path) as served:
        assert served.url.startswith("http://127.0.0.1:"), served.output
        assert (served.runs, served.outcomes) == (1, 24)
        assert runs_of(served.url) == ["run-a"]
        assert httpx.get(served.url, timeout=30).text.startswith("<!doctype html>")
        assert served.stop() == INTERRUPTED
    assert list(tmp_path.iterdir()) == []  # nothing persisted


def test_a_store_is_served_and_a_folder_ingested_into_it(
    synthetic_runs: Path, tmp_path: Path
) -> None:
    store = str(tmp_path / "history.db")
    vally("ingest", str(synthetic_runs / "run-a"), "--store", store, cwd=tmp_path)
    with Served("--store", store, cwd=tmp_path) as served:
        assert runs_of(served.url) == ["run-a"]
        assert served.stop() == INTERRUPTED
    # historical mode: the folder is ingested into the store, then everything is served
    with Served(str(synthetic_runs / "run-b"), "--store", store, cwd=tmp_path) as served:
        assert "Ingested 24 new outcomes (0 already stored)" in "".join(served.output)
        assert runs_of(served.url) == ["run-a", "run-b"]
        assert served.stop() == INTERRUPTED
    with Served("--store", store, cwd=tmp_path) as served:  # kept across sessions
        assert runs_of(served.url) == ["run-a", "run-b"]
        served.stop()


def test_a_postgresql_store_is_served(
    synthetic_runs: Path, tmp_path: Path, postgres_url: str
) -> None:
    with Served(str(synthetic_runs / "exp-1"), "--store", postgres_url, cwd=tmp_path) as served:
        assert runs_of(served.url) == ["exp-1"]
        body = httpx.get(served.url + "api/runs/exp-1/experiment", timeout=30).json()
        assert body["baseline"] == "baseline"
        assert served.stop() == INTERRUPTED


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "vally serve needs a results folder, a --store, or both"),
        (("--store", "absent.db"), "no history store at absent.db"),
        (("empty",), "no vally run found in empty"),
        (("missing",), "no such file or folder: missing"),
        (("--store", "postgresql://nobody@127.0.0.1:1/none"), "cannot open the history store"),
    ],
)
def test_errors_exit_1_with_a_message(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    (tmp_path / "empty").mkdir()
    result = vally("serve", *args, "--port", "0", cwd=tmp_path, check=False)
    assert result.returncode == 1, result.stdout + result.stderr
    assert message in result.stderr


def test_a_taken_port_is_an_error(synthetic_runs: Path, tmp_path: Path) -> None:
    with Served(str(synthetic_runs / "run-a"), cwd=tmp_path) as served:
        port = served.url.rstrip("/").rsplit(":", 1)[1]
        result = vally(
            "serve", str(synthetic_runs / "run-a"), "--port", port, cwd=tmp_path, check=False
        )
        assert result.returncode == 1
        assert f"cannot listen on 127.0.0.1:{port}" in result.stderr
        served.stop()
    bad = vally(
        "serve", str(synthetic_runs / "run-a"), "--port", "70000", cwd=tmp_path, check=False
    )
    assert bad.returncode == 1 and "--port 70000 is not a TCP port" in bad.stderr
