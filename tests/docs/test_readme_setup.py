"""The README's set-up and quickstart commands work verbatim on a stock Debian or Ubuntu
machine: run with the distribution's own ``python3`` (externally managed, so ``pip
install`` outside a virtual environment is refused) in a fresh copy of the repository.

Slow (it installs vally's dependencies from PyPI into a new virtual environment). Skipped
when the machine has no Debian-packaged ``python3`` with ``venv``, unless
``VALLY_REQUIRE_SYSTEM_PYTHON=1`` (CI), which turns the skip into a failure.

CI (``.ci/run``) runs the same commands, read from the README by ``scripts/readme-block.sh``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SYSTEM_PYTHON = Path("/usr/bin/python3")


def _unavailable(reason: str) -> None:
    if os.environ.get("VALLY_REQUIRE_SYSTEM_PYTHON") == "1":
        pytest.fail(f"VALLY_REQUIRE_SYSTEM_PYTHON=1 but {reason}")
    pytest.skip(reason)


def _externally_managed() -> bool:
    probe = subprocess.run(
        [str(SYSTEM_PYTHON), "-c", "import sysconfig; print(sysconfig.get_paths()['stdlib'])"],
        capture_output=True,
        text=True,
        check=False,
    )
    return probe.returncode == 0 and (Path(probe.stdout.strip()) / "EXTERNALLY-MANAGED").exists()


def quickstart_block(readme: str) -> str:
    """The first ```bash block after the README's "Quickstart" heading."""
    section = readme[readme.index("## Quickstart") :]
    match = re.search(r"^```bash\n(.*?)^```", section, flags=re.DOTALL | re.MULTILINE)
    assert match is not None, "the Quickstart section has no bash block"
    return match.group(1)


def fresh_clone(target: Path) -> Path:
    """The repository's files as a clone has them (tracked and new, nothing ignored)."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"],
        cwd=ROOT,
        capture_output=True,
        check=False,
    )
    if listed.returncode != 0:
        _unavailable("the repository is not a git checkout")
    for name in filter(None, listed.stdout.decode().split("\0")):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


@pytest.mark.slow
def test_readme_set_up_runs_verbatim_with_the_system_python(tmp_path: Path) -> None:
    if not SYSTEM_PYTHON.exists() or not _externally_managed():
        _unavailable(f"{SYSTEM_PYTHON} is not an externally managed distribution Python")
    if subprocess.run([str(SYSTEM_PYTHON), "-c", "import venv, ensurepip"]).returncode:
        _unavailable("the system python3 has no venv module (apt-get install python3-venv)")
    clone = fresh_clone(tmp_path / "vally")
    script = quickstart_block((clone / "README.md").read_text(encoding="utf-8"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHON"))}
    env.update(PATH="/usr/local/bin:/usr/bin:/bin", NO_COLOR="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    env.pop("PIP_REQUIRE_VIRTUALENV", None)
    result = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", script],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert re.search(
        r"^9 trials: 9 passed, 0 failed, 0 errored in .* verdict: PASS$", result.stdout, flags=re.M
    ), result.stdout[-2000:]
    venv_python = clone / ".venv" / "bin" / "python"
    assert (clone / ".venv" / "bin" / "vally").exists()
    assert os.path.realpath(venv_python).startswith(os.path.realpath(SYSTEM_PYTHON.parent))
    # The system Python itself was left alone.
    untouched = subprocess.run([str(SYSTEM_PYTHON), "-c", "import vally"], capture_output=True)
    assert untouched.returncode != 0


def _readme_block(heading: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(ROOT / "scripts" / "readme-block.sh"), heading],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_ci_runs_the_readme_commands_word_for_word() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    quickstart = _readme_block("Quickstart")
    assert quickstart.returncode == 0, quickstart.stderr
    assert quickstart.stdout == quickstart_block(readme)
    tests = _readme_block("Run the tests")
    assert (tests.returncode, tests.stdout) == (0, "bash scripts/test.sh\n")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "bash scripts/readme-block.sh Quickstart" in ci
    assert "bash scripts/readme-block.sh 'Run the tests'" in ci


def test_a_missing_readme_block_is_an_error_naming_the_heading() -> None:
    missing = _readme_block("What it does")  # a heading with no bash block under it
    assert missing.returncode == 1
    assert "README.md has no ```bash block under a '## What it does' heading" in missing.stderr
    assert missing.stdout == ""
