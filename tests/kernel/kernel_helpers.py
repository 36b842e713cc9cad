"""Helpers shared by the plugin-system tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

GRADER_SOURCE = """
from vally import BaseGrader, GraderMetadata

class {cls}(BaseGrader):
    metadata = GraderMetadata(name={name!r}, description={description!r})

    async def grade(self, context):
        return self.result(context, passed=True, evidence="ok")
"""


def grader_source(cls: str, name: str, description: str = "a test grader") -> str:
    """Source of a module defining one valid grader class."""
    return GRADER_SOURCE.format(cls=cls, name=name, description=description)


MakeDist = Callable[..., Path]
