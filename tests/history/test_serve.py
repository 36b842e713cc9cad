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


def _port(url: str) -> str:
    return url.rstrip("/").rsplit(":", 1)[1]


def test_a_request_for_a_foreign_host_is_refused(synthetic_runs: Path, tmp_path: Path) -> None:
    """DNS rebinding: a page of evil.example whose name now resolves to 127.0.0.1 sends
    its own name in the Host header (sent here to 127.0.0.1 only)."""
    with Served(str(synthetic_runs / "run-a"), cwd=tmp_path) as served:
        refused = httpx.get(served.url + "api/runs", headers={"Host": "evil.example"}, timeout=30)
        assert refused.status_code == 421
        assert "run-a" not in refused.text
        local = f"http://localhost:{_port(served.url)}/api/runs"
        assert httpx.get(local, timeout=30).status_code == 200
        assert served.stop() == INTERRUPTED
    assert "warning" not in served.errors  # loopback: nothing to warn about


def test_beyond_loopback_a_warning_is_printed(synthetic_runs: Path, tmp_path: Path) -> None:
    with Served(str(synthetic_runs / "run-a"), "--host", "0.0.0.0", cwd=tmp_path) as served:
        local = f"http://127.0.0.1:{_port(served.url)}/"
        assert httpx.get(local + "api/runs", timeout=30).status_code == 200
        refused = httpx.get(local + "api/runs", headers={"Host": "evil.example"}, timeout=30)
        assert refused.status_code == 421
        assert served.stop() == INTERRUPTED
    assert "warning: vally serve listens beyond this machine" in served.errors
    assert "--token or VALLY_SERVE_TOKEN" in served.errors


def test_the_access_token_comes_from_the_environment(
    synthetic_runs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = "an-access-token-for-the-test"
    monkeypatch.setenv("VALLY_SERVE_TOKEN", token)
    with Served(str(synthetic_runs / "run-a"), cwd=tmp_path) as served:
        assert httpx.get(served.url + "api/runs", timeout=30).status_code == 401
        assert httpx.get(served.url, timeout=30).status_code == 401
        bearer = {"Authorization": f"Bearer {token}"}
        assert httpx.get(served.url + "api/runs", headers=bearer, timeout=30).status_code == 200
        with httpx.Client(base_url=served.url, timeout=30, follow_redirects=True) as browser:
            assert browser.get("/", params={"token": token}).status_code == 200  # redirected
            assert browser.get("/api/runs").status_code == 200  # the cookie carries it
        assert served.stop() == INTERRUPTED
    assert token not in "".join(served.output) + served.errors  # never printed


def test_a_short_token_is_refused(
    synthetic_runs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VALLY_SERVE_TOKEN", "short")
    run = str(synthetic_runs / "run-a")
    result = vally("serve", run, "--port", "0", cwd=tmp_path, check=False)
    assert result.returncode == 1
    assert "the access token must be 16 to 512 printable ASCII characters" in result.stderr
