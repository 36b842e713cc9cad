"""Fixtures of the grader tests: a real ``local`` sandbox over a temporary workspace."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from vally_backends.local import LocalSandbox


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "workspace"
    root.mkdir()
    return root


@pytest.fixture
def spec_dir(tmp_path: Path) -> Path:
    root = tmp_path / "spec"
    root.mkdir()
    return root


@pytest.fixture
def sandbox(workspace: Path) -> Iterator[LocalSandbox]:
    """A real local sandbox (subprocesses in the workspace), kept so tests can inspect it."""
    box = LocalSandbox(
        workspace, base_env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")}, keep=True
    )
    yield box
    asyncio.run(box.close())
