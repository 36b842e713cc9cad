"""The negative file graders see links (issue 17, case 2): an agent cannot hide a file's
content, or its existence, behind a symbolic link. Run on the real local backend and the
real docker engine, with the attack as shell scripts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.backends.docker_helpers import busybox_image, docker_api  # noqa: F401
from tests.integrity.conftest import read_records, vally, write_eval

SPEC = """
name: links
defaults:
  executor: {name: command, config: {command: [sh, -c, "{prompt}"]}}
graders:
  - {name: no-config, type: file-not-exists, config: {path: config.py}}
  - {name: no-password, type: file-not-contains, config: {path: config.py, value: hunter2}}
  - {name: no-password-anywhere, type: file-not-matches, config: {path: "**/*.py",
     pattern: "hunter\\\\d"}}
stimuli:
  - name: link-inside
    prompt: >-
      mkdir -p data && echo password=hunter2 > data/secret.txt &&
      ln -s data/secret.txt config.py && echo done
  - name: link-outside
    prompt: ln -s /etc/passwd config.py && echo done
  - name: honest
    prompt: echo 'print(1)' > main.py && echo done
"""


def _run(project: Path, *backend: str) -> dict[str, dict[str, Any]]:
    write_eval(project, SPEC)
    out = project / "out"
    done = vally("eval", "-e", "evals/eval.yaml", "--output-dir", out, *backend, cwd=project)
    records = read_records(done.run_dir(out) / "results.jsonl")
    assert len(records) == 3, done.stderr
    return {r["stimulusName"]: {d["name"]: d for d in r["gradeResult"]["details"]} for r in records}


def _check(graded: dict[str, dict[str, Any]]) -> None:
    inside, outside, honest = graded["link-inside"], graded["link-outside"], graded["honest"]
    assert all(d["passed"] for d in honest.values()), honest
    for name in ("no-config", "no-password", "no-password-anywhere"):
        assert inside[name]["passed"] is False, inside[name]
        assert outside[name]["passed"] is False, outside[name]
    assert "hunter2" in inside["no-password"]["evidence"]
    assert "link outside the workspace" in outside["no-password"]["evidence"]
    assert "link outside the workspace" in outside["no-password-anywhere"]["evidence"]


def test_negative_file_graders_see_links_on_the_local_backend(project: Path) -> None:
    _check(_run(project))


@pytest.mark.docker
def test_negative_file_graders_see_links_in_docker(
    project: Path,
    busybox_image: str,  # noqa: F811
) -> None:
    _check(
        _run(
            project,
            "--backend",
            "docker",
            "--backend-args",
            f"image={busybox_image}",
            "--backend-args",
            "pull=never",
        )
    )
