"""The README's test command, ``scripts/test.sh``, runs in a hermetic environment (one that
sees no system site-packages) and skips its installs while what they depend on is
unchanged.

Each test runs a copy of the script in a small tree holding only the files it installs
from. ``pip`` and ``ruff`` in the test environments are stand-ins (a module that records its
arguments, and one that stops the script where the checks begin): what is under test is
the script's choice of environment and of when to install, not pip.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STAMP = "vally-test-requirements.sha256"
RUFF_STOPS = 42
"""The exit status of the stand-in ruff: the script got past its installs."""


def _tree(tmp_path: Path) -> Path:
    """The script and the files it installs from, as in the repository."""
    tree = tmp_path / "repo"
    (tree / "scripts").mkdir(parents=True)
    shutil.copy2(ROOT / "scripts" / "test.sh", tree / "scripts" / "test.sh")
    for name in ("pyproject.toml", "setup.py"):
        shutil.copy2(ROOT / name, tree / name)
    for pyproject in sorted((ROOT / "plugins" / "examples").glob("*/pyproject.toml")):
        target = tree / pyproject.relative_to(ROOT)
        target.parent.mkdir(parents=True)
        shutil.copy2(pyproject, target)
    return tree


def _venv(path: Path, *, system_site_packages: bool = False) -> Path:
    """A virtual environment without pip (``--without-pip``: quick)."""
    options = ["--system-site-packages"] if system_site_packages else []
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", *options, str(path)], check=True)
    return path


def _stand_ins(venv: Path, log: Path, *, pip_status: int = 0) -> None:
    """``python -m pip`` appends its arguments to ``log``; ``python -m ruff`` stops the run."""
    probe = [
        str(venv / "bin" / "python"),
        "-c",
        "import sysconfig; print(sysconfig.get_paths()['purelib'])",
    ]
    site = Path(subprocess.run(probe, capture_output=True, text=True, check=True).stdout.strip())
    (site / "pip").mkdir(exist_ok=True)
    (site / "pip" / "__init__.py").write_text("", encoding="utf-8")
    (site / "pip" / "__main__.py").write_text(
        "import sys\n"
        f"with open({str(log)!r}, 'a', encoding='utf-8') as f:\n"
        "    f.write(' '.join(sys.argv[1:]) + '\\n')\n"
        f"sys.exit({pip_status})\n",
        encoding="utf-8",
    )
    (site / "ruff").mkdir(exist_ok=True)
    (site / "ruff" / "__init__.py").write_text("", encoding="utf-8")
    (site / "ruff" / "__main__.py").write_text(
        f"raise SystemExit({RUFF_STOPS})\n", encoding="utf-8"
    )


def _run(tree: Path, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PIP_"))}
    base.pop("VALLY_TEST_VENV", None)
    # No package source at all: a real pip would fail at once, never reach the network.
    base.update(PIP_CONFIG_FILE=os.devnull, PIP_NO_INDEX="1", **env)
    return subprocess.run(
        ["bash", str(tree / "scripts" / "test.sh"), "--co", "-q"],
        cwd=tree,
        env=base,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _installs(log: Path) -> list[str]:
    return log.read_text(encoding="utf-8").splitlines() if log.exists() else []


@pytest.mark.parametrize("active", [False, True], ids=["test-venv", "active-venv"])
def test_an_environment_that_sees_the_system_packages_is_refused(
    tmp_path: Path, active: bool
) -> None:
    tree = _tree(tmp_path)
    venv = _venv(tmp_path / "shared", system_site_packages=True)
    log = tmp_path / "pip.log"
    _stand_ins(venv, log)
    run = _run(tree, **({"VIRTUAL_ENV": str(venv)} if active else {"VALLY_TEST_VENV": str(venv)}))
    assert run.returncode == 1, run.stdout + run.stderr
    assert f"{venv} sees the system's site-packages" in run.stderr
    assert f"include-system-site-packages = true in {venv}/pyvenv.cfg" in run.stderr
    assert f"rm -rf {venv}" in run.stderr
    assert ("the active virtual environment" in run.stderr) is active
    assert _installs(log) == []  # nothing installed into it
    assert not (venv / STAMP).exists()


def test_a_folder_that_is_no_virtual_environment_is_refused(tmp_path: Path) -> None:
    tree = _tree(tmp_path)
    (tmp_path / "stray").mkdir()
    run = _run(tree, VALLY_TEST_VENV=str(tmp_path / "stray"))
    assert run.returncode == 1
    assert f"{tmp_path / 'stray'} is not a virtual environment" in run.stderr
    assert "VALLY_TEST_VENV" in run.stderr


def test_installs_run_once_until_what_they_install_from_changes(tmp_path: Path) -> None:
    tree = _tree(tmp_path)
    venv = _venv(tmp_path / "env")
    log = tmp_path / "pip.log"
    _stand_ins(venv, log)

    first = _run(tree, VALLY_TEST_VENV=str(venv))
    assert first.returncode == RUFF_STOPS, first.stdout + first.stderr
    installs = _installs(log)
    assert installs[0] == "install -q -e .[dev,mcp,copilot,serve]"
    examples = sorted((tree / "plugins" / "examples").glob("*/pyproject.toml"))
    assert installs[1] == "install -q --no-deps " + " ".join(
        f"-e plugins/examples/{p.parent.name}/" for p in examples
    )
    assert len(installs) == 2
    assert (venv / STAMP).read_text(encoding="utf-8").strip()

    again = _run(tree, VALLY_TEST_VENV=str(venv))
    assert again.returncode == RUFF_STOPS
    assert _installs(log) == installs  # reused: nothing installed

    with (tree / examples[0]).open("a", encoding="utf-8") as pyproject:
        pyproject.write("# a changed example plugin\n")
    changed = _run(tree, VALLY_TEST_VENV=str(venv))
    assert changed.returncode == RUFF_STOPS
    assert _installs(log) == installs * 2


def test_a_failed_install_is_not_recorded(tmp_path: Path) -> None:
    tree = _tree(tmp_path)
    venv = _venv(tmp_path / "env")
    log = tmp_path / "pip.log"
    _stand_ins(venv, log, pip_status=1)
    for attempt in (1, 2):
        run = _run(tree, VALLY_TEST_VENV=str(venv))
        assert run.returncode == 1
        assert len(_installs(log)) == attempt  # tried again: nothing was recorded
        assert not (venv / STAMP).exists()


@pytest.mark.slow
def test_the_environment_it_creates_sees_no_system_packages(tmp_path: Path) -> None:
    tree = _tree(tmp_path)
    run = _run(tree)  # no active environment, no VALLY_TEST_VENV: .venv in the tree
    config = (tree / ".venv" / "pyvenv.cfg").read_text(encoding="utf-8")
    assert "include-system-site-packages = false" in config, config
    assert run.returncode != 0  # pip has no package source here
    assert not (tree / ".venv" / STAMP).exists()
    probe = subprocess.run(
        [str(tree / ".venv" / "bin" / "python"), "-c", "import sys; print(*sys.path, sep='\\n')"],
        capture_output=True,
        text=True,
        check=True,
    )
    sites = [p for p in probe.stdout.splitlines() if p.endswith(("site-packages", "dist-packages"))]
    assert sites, probe.stdout
    venv = str((tree / ".venv").resolve())
    assert all(str(Path(p).resolve()).startswith(venv) for p in sites), sites
