"""Finding the Copilot CLI and SDK for the tests (``scripts/install-copilot.sh`` installs
both; CI exports ``COPILOT_CLI_PATH``)."""

from __future__ import annotations

import importlib.util
import os
import shutil

from tests.agents.netns import require_or_skip


def copilot_cli() -> str:
    """The CLI's path; skips (or fails under ``VALLY_REQUIRE_AGENT_CLIS=1``) without it or
    without the SDK."""
    if importlib.util.find_spec("copilot") is None:
        require_or_skip(
            "the GitHub Copilot SDK is not installed (pip install 'vally[copilot]' or "
            "bash scripts/install-copilot.sh)"
        )
    path = os.environ.get("COPILOT_CLI_PATH") or shutil.which("copilot")
    if not path or not os.path.exists(path):
        require_or_skip(
            "the GitHub Copilot CLI is not installed (bash scripts/install-copilot.sh, then "
            "export COPILOT_CLI_PATH)"
        )
    assert path is not None
    return path
