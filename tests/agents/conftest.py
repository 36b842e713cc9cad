"""Fixtures of the agent-CLI tests."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _no_model_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLIs never see a real key, base URL or configuration of the machine."""
    for name in (
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "CODEX_API_KEY",
        "CODEX_HOME",
        "CLAUDE_CONFIG_DIR",
    ):
        monkeypatch.delenv(name, raising=False)
