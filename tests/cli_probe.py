"""A ``vally`` command line run in a fresh interpreter, with a look at the process after it,
for tests of what a command's start-up imports or does."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path


def run_vally_then(
    args: Sequence[str], after: str, *, cwd: Path, before: str = ""
) -> subprocess.CompletedProcess[str]:
    """Run ``vally <args>`` as the console script does (``vally.cli.app.main``) in a fresh
    interpreter, then, however the command ends, the Python lines ``after`` (``sys`` is
    imported; they print what they find to standard error, where the test reads the last
    line). ``before`` runs first, ahead of vally's import."""
    code = (
        before
        + "import sys\nfrom vally.cli.app import main\ntry:\n    main()\nfinally:\n"
        + textwrap.indent(after, "    ")
    )
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=cwd, check=False
    )
