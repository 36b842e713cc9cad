"""``vally new``: every kind scaffolds a package that installs, lists as ok and tests green."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from vally.plugins.groups import ENTRY_POINT_GROUPS
from vally_authoring.scaffold import (
    EXAMPLES,
    SUFFIXES,
    Identity,
    example_files,
    example_identity,
    examples_root,
    plan_scaffold,
    render_files,
)

from .conftest import EXAMPLES as EXAMPLES_DIR, run_vally

KINDS = [
    "grader",
    "executor",
    "backend",
    "reporter",
    "eval-provider",
    "shard-strategy",
    "llm-provider",
    "exporter",
]


def _pip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.slow
def test_every_kind_scaffolds_installs_lists_and_passes_its_tests(tmp_path: Path) -> None:
    tag = "t" + uuid.uuid4().hex[:8]
    names = {kind: f"{tag}-{kind}" for kind in KINDS}
    for kind, name in names.items():
        result = run_vally(["new", kind, name, "--output-dir", str(tmp_path)])
        assert f"plugin '{name}'" in result.stdout
    roots = {kind: tmp_path / f"vally-{name}" for kind, name in names.items()}
    for root in roots.values():
        assert (root / "pyproject.toml").is_file() and (root / "README.md").is_file()
    # the entry point is declared in the kind's group, pointing at the generated class
    for kind, root in roots.items():
        pyproject = (root / "pyproject.toml").read_text()
        group = ENTRY_POINT_GROUPS[kind.replace("-", "_")]  # type: ignore[index]
        package = root.name.replace("-", "_")
        assert f'[project.entry-points."{group}"]\n{names[kind]} = "{package}:' in pyproject
    distributions = [root.name for root in roots.values()]
    try:
        editable = [arg for root in roots.values() for arg in ("-e", str(root))]
        installed = _pip("install", "--no-deps", "--no-build-isolation", *editable)
        assert installed.returncode == 0, installed.stderr[-3000:]
        for kind, name in names.items():
            rows = json.loads(
                run_vally(["plugins", "list", "--kind", kind, "--format", "json"]).stdout
            )
            listed = [r for r in rows if r["name"] == name]
            assert len(listed) == 1, (name, rows)
            assert listed[0]["kind"] == kind.replace("-", "_")
            assert listed[0]["status"] == "ok", listed[0]
            assert listed[0]["source"] == f"vally-{name} 0.1.0"
        tests = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
             *(str(root / "tests") for root in roots.values())],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert tests.returncode == 0, tests.stdout[-4000:] + tests.stderr[-2000:]
        assert " passed" in tests.stdout and "failed" not in tests.stdout
    finally:
        _pip("uninstall", "-y", *distributions)


def test_bad_kind_and_name_are_usage_errors(tmp_path: Path) -> None:
    result = run_vally(["new", "widget", "x", "-o", str(tmp_path)], check=False)
    assert result.returncode == 2
    assert "unknown kind 'widget'" in result.stdout + result.stderr
    result = run_vally(["new", "grader", "Bad_Name", "-o", str(tmp_path)], check=False)
    assert result.returncode == 2
    assert "not kebab-case" in result.stdout + result.stderr


def test_existing_folder_is_not_overwritten(tmp_path: Path) -> None:
    run_vally(["new", "grader", "my-check", "-o", str(tmp_path)])
    init = tmp_path / "vally-my-check" / "src" / "vally_my_check" / "__init__.py"
    assert "class MyCheckGrader(BaseGrader[MyCheckConfig])" in init.read_text()
    init.write_text("# mine\n")
    result = run_vally(["new", "grader", "my-check", "-o", str(tmp_path)], check=False)
    assert result.returncode == 1
    assert "already exists" in result.stderr
    assert init.read_text() == "# mine\n"
    run_vally(["new", "grader", "vally-my-check", "-o", str(tmp_path), "--force"])
    assert "class MyCheckGrader" in init.read_text()


def test_in_a_checkout_the_templates_are_the_example_plugins() -> None:
    assert examples_root() == EXAMPLES_DIR
    assert set(EXAMPLES) == set(SUFFIXES) == {k.replace("-", "_") for k in KINDS}
    for kind, folder in EXAMPLES.items():
        example = example_identity(kind, EXAMPLES_DIR / folder)
        assert example.distribution == folder
        assert example.class_name == example.stem + SUFFIXES[kind]


def _back(line: str, new: Identity, old: Identity) -> str:
    """``line`` with the new package's names mapped back to the example's."""
    for after, before in (
        (new.distribution, old.distribution),
        (new.package.upper(), old.package.upper()),
        (new.package, old.package),
        (new.stem, old.stem),
        (new.name, old.name),
    ):
        line = line.replace(after, before)
    return line


@pytest.mark.parametrize("kind", sorted(EXAMPLES))
def test_a_package_is_its_example_with_only_the_names_replaced(
    kind: str, tmp_path: Path
) -> None:
    scaffold = plan_scaffold(kind, "zz-top", tmp_path)
    new = scaffold.identity
    folder = EXAMPLES_DIR / EXAMPLES[kind]
    old = example_identity(kind, folder)
    source = example_files(folder)
    rendered = render_files(scaffold)
    assert list(rendered) == [path.replace(old.package, new.package) for path in source]
    for (path, text), generated in zip(source.items(), rendered.values(), strict=True):
        lines, new_lines = text.splitlines(), generated.splitlines()
        assert len(new_lines) == len(lines), path
        for line, new_line in zip(lines, new_lines, strict=True):
            assert _back(new_line, new, old) == line, (path, new_line)
        assert old.distribution not in generated and old.package not in generated, path
        assert f'name="{old.name}"' not in generated, path
    group = ENTRY_POINT_GROUPS[kind]  # type: ignore[index]
    entry = f'[project.entry-points."{group}"]\nzz-top = "vally_zz_top:ZzTop{SUFFIXES[kind]}"'
    assert entry in rendered["pyproject.toml"]
    assert 'name="zz-top"' in rendered["src/vally_zz_top/__init__.py"]
    assert f"class ZzTop{SUFFIXES[kind]}" in rendered["src/vally_zz_top/__init__.py"]
