"""The wheel of the repository installs into a fresh venv and its CLI finds the built-ins."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def run(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("PYTHONPATH", None)
    return subprocess.run(  # type: ignore[call-overload, no-any-return]
        argv, capture_output=True, text=True, check=False, env=env, timeout=240, **kwargs
    )


def borrow_packages(python: Path) -> None:
    """Let the venv of ``python`` import the packages of the environment running the tests.

    A venv created from inside a venv is based on the base interpreter, so
    ``--system-site-packages`` alone gives it the base's packages, not those of the venv
    the tests run in. A ``.pth`` file appends that venv's site-packages folders after the
    new venv's own (plain paths: the editable install's finder in them is not loaded).
    """
    site = run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
    assert site.returncode == 0, site.stderr
    ours = [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
    (Path(site.stdout.strip()) / "borrowed-test-packages.pth").write_text(
        "".join(f"{p}\n" for p in ours), encoding="utf-8"
    )


def declared_builtins() -> dict[str, set[str]]:
    data = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    groups = data["project"]["entry-points"]
    return {group: set(eps) for group, eps in groups.items()}


def by_key(stdout: str) -> dict[tuple[str, str], dict[str, str]]:
    return {(row["kind"], row["name"]): row for row in json.loads(stdout)}


@pytest.mark.slow
def test_wheel_installs_into_a_fresh_venv_and_lists_builtins(tmp_path: Path) -> None:
    # Build from a copy so that the build leaves nothing in the working tree.
    src = tmp_path / "src"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build")
    folders = (
        "core",
        "plugins/builtin",
        "plugins/serve",
        "plugins/compare",
        "plugins/authoring",
        "plugins/regrade",
        "plugins/experiment",
        "backends",
    )
    for folder in (*folders, "plugins/examples"):
        shutil.copytree(REPO / folder, src / folder, ignore=ignore)
    for file in ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md"):
        shutil.copy2(REPO / file, src / file)
    dist = tmp_path / "dist"
    built = run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(dist)],
        cwd=src,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = dist.glob("vally-*.whl")
    # The dashboard of vally serve is package data of vally_serve.
    with zipfile.ZipFile(wheel) as archive:
        shipped = set(archive.namelist())
    dashboard = REPO / "plugins" / "serve" / "vally_serve" / "dashboard"
    for asset in sorted(p.name for p in dashboard.iterdir() if p.is_file()):
        assert f"vally_serve/dashboard/{asset}" in shipped, f"{asset} is not in the wheel"
    # The comparison package (vally compare, the experiment hooks, the statistics) too.
    for package in ("compare", "experiment"):  # and vally experiment
        root = REPO / "plugins" / package
        for module in sorted(root.rglob("*.py")):
            name = module.relative_to(root).as_posix()
            assert name in shipped, f"{name} is not in the wheel"
        assert f"vally_{package}/py.typed" in shipped

    # Offline, so the venv borrows the dependencies from the environment running the tests;
    # the wheel's own vally must shadow the editable install of the working tree.
    venv = tmp_path / "venv"
    created = run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)])
    assert created.returncode == 0, created.stderr
    python, vally = venv / "bin" / "python", venv / "bin" / "vally"
    borrow_packages(python)
    installed = run(
        [str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)]
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr

    where = run(
        [
            str(python),
            "-c",
            "import vally, vally_builtin, vally_backends, vally_serve, vally_compare;"
            "import importlib.metadata as m;"
            "print(vally.__file__); print(vally_builtin.__file__); print(vally_backends.__file__);"
            "print(vally_serve.__file__); print(vally_compare.__file__);"
            "print(m.distribution('vally').locate_file(''))",
        ],
        cwd=tmp_path,
    )
    assert where.returncode == 0, where.stderr
    for line in where.stdout.splitlines():
        assert Path(line).resolve().is_relative_to(venv.resolve()), where.stdout
    assert str(REPO) not in where.stdout

    version = run([str(vally), "--version"], cwd=tmp_path)
    assert version.returncode == 0, version.stderr
    assert version.stdout.strip() == "vally 0.1.0"

    # Command extensions (the vally.cli group) come with the wheel too.
    docker_help = run([str(vally), "docker", "prune", "--help"], cwd=tmp_path)
    assert docker_help.returncode == 0, docker_help.stderr
    assert "warning" not in docker_help.stderr
    compare_help = run([str(vally), "compare", "--help"], cwd=tmp_path)
    assert compare_help.returncode == 0, compare_help.stderr
    assert "--rules PATH" in compare_help.stdout

    listed = run([str(vally), "plugins", "list", "--format", "json"], cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    wheel_rows = by_key(listed.stdout)
    main = "from vally.cli.app import main; main()"
    editable = run([sys.executable, "-c", main, "plugins", "list", "--format", "json"])
    editable_rows = by_key(editable.stdout) if editable.returncode == 0 else {}

    kinds = {
        "vally.graders": "grader",
        "vally.executors": "executor",
        "vally.reporters": "reporter",
        "vally.eval_providers": "eval_provider",
        "vally.shard_strategies": "shard_strategy",
        "vally.backends": "backend",
        "vally.llm_providers": "llm_provider",
        "vally.cli": "cli_command",
        "vally.hooks": "hook",
    }
    builtins = declared_builtins()
    assert builtins, "pyproject declares no entry points"
    for group, names in builtins.items():
        if group not in kinds:
            continue
        for name in names:
            row = wheel_rows.get((kinds[group], name))
            assert row is not None, f"{group}:{name} not listed by the installed wheel"
            assert row["source"] == "vally 0.1.0"
            # The wheel must ship every module the working tree has: a built-in that loads
            # from the editable install loads from the wheel too.
            if (kinds[group], name) in editable_rows:
                assert row["status"] == editable_rows[(kinds[group], name)]["status"], row

    # vally new renders the example plugins shipped inside the wheel.
    created = run([str(vally), "new", "grader", "my-check", "-o", str(tmp_path / "new")])
    assert created.returncode == 0, created.stdout + created.stderr
    package = tmp_path / "new" / "vally-my-check"
    pyproject = (package / "pyproject.toml").read_text(encoding="utf-8")
    assert 'my-check = "vally_my_check:MyCheckGrader"' in pyproject
    assert (package / "tests" / "test_vally_my_check.py").is_file()
    where_examples = "from vally_authoring.scaffold import examples_root; print(examples_root())"
    examples = run([str(python), "-c", where_examples], cwd=tmp_path)
    assert Path(examples.stdout.strip()).resolve().is_relative_to(venv.resolve()), examples
