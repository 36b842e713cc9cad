"""``vally eval --stimulus`` selects stimuli by name; the files people read (report, junit,
manifests) get the permissions any other file gets."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

from .conftest import VALLY, run_vally, write_spec

SPEC = """
name: {name}
defaults:
  executor: {{name: mock, config: {{output: "ok {{prompt}}"}}}}
stimuli:
  - {{name: auth-login, prompt: a, tags: {{priority: p0}}}}
  - {{name: auth-logout, prompt: b, tags: {{priority: p1}}}}
  - {{name: db-read, prompt: c, tags: {{priority: p0}}}}
  - {{name: Auth-admin, prompt: d, tags: {{priority: p0}}}}
"""


def _pairs(run: object) -> list[tuple[str, str]]:
    return sorted((r["evalName"], r["stimulusName"]) for r in run.records())  # type: ignore[attr-defined]


def test_stimulus_glob_selects_by_name_case_sensitively(project: Path) -> None:
    spec = write_spec(project, SPEC.format(name="svc"))
    run = run_vally(["-e", str(spec), "--stimulus", "auth-*"], project)
    assert run.code == 0, run.stderr
    assert _pairs(run) == [("svc", "auth-login"), ("svc", "auth-logout")]


def test_stimulus_is_repeatable_and_combines_with_tags(project: Path) -> None:
    write_spec(project / "evals" / "one", SPEC.format(name="one"))
    write_spec(project / "evals" / "two", SPEC.format(name="two"))
    run = run_vally(
        ["--stimulus", "auth-*", "--stimulus", "db-read", "--tag", "priority=p0"], project
    )
    assert run.code == 0, run.stderr
    assert _pairs(run) == [
        ("one", "auth-login"),
        ("one", "db-read"),
        ("two", "auth-login"),
        ("two", "db-read"),
    ]


def test_stimulus_matching_nothing_lists_the_names(project: Path) -> None:
    spec = write_spec(project, SPEC.format(name="svc"))
    run = run_vally(["-e", str(spec), "--stimulus", "login"], project)
    assert run.code == 1
    assert "--stimulus 'login' matches no stimulus" in run.stderr
    assert "auth-login, auth-logout, db-read, Auth-admin" in run.stderr
    assert not (project / "out").exists() or not any((project / "out").iterdir())


def test_written_files_get_the_umask_mode_not_0600(project: Path) -> None:
    spec = write_spec(project, SPEC.format(name="svc"))
    out = project / "out"
    proc = subprocess.run(
        [*VALLY, "eval", "-e", str(spec), "--junit", "--output-dir", str(out)],
        cwd=project,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_COLOR": "1"},
        preexec_fn=lambda: os.umask(0o027),
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    (run_dir,) = [p for p in out.iterdir() if p.is_dir()]
    written = [run_dir / "report.md", run_dir / "junit.xml", *run_dir.glob("*.json")]
    assert len(written) >= 3, sorted(p.name for p in run_dir.iterdir())
    for path in written:
        assert stat.S_IMODE(path.stat().st_mode) == 0o640, (path.name, oct(path.stat().st_mode))
    assert not list(run_dir.glob(".*.tmp"))
