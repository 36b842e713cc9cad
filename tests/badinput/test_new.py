"""Bad input to ``vally new``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.badinput.conftest import vally


@pytest.mark.parametrize("output_dir", ["afile", "afile/sub"])
def test_output_dir_that_is_or_is_under_a_file(project: Path, output_dir: str) -> None:
    result = vally("new", "grader", "my-check", "-o", output_dir, cwd=project)
    assert result.returncode == 1
    assert "afile is a file" in result.stderr
    assert "--output-dir" in result.stderr


def test_package_folder_name_taken_by_a_file(project: Path) -> None:
    (project / "vally-my-check").write_text("mine\n")
    result = vally("new", "grader", "my-check", cwd=project)
    assert result.returncode == 1
    assert "vally-my-check is a file" in result.stderr
    assert (project / "vally-my-check").read_text() == "mine\n"


@pytest.mark.parametrize(("kind", "name"), [("nope", "my-check"), ("grader", "My Check")])
def test_invalid_kind_or_name_is_a_usage_error(project: Path, kind: str, name: str) -> None:
    result = vally("new", kind, name, cwd=project)
    assert result.returncode == 2
