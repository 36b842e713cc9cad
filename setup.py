"""Build hook: ship the example plugins inside the authoring package.

``vally new`` generates plugin packages from the example distributions under
``plugins/examples/``, which lie outside every source root; the wheel gets a copy of them
as ``vally_authoring/plugin_examples/``. Everything else is configured in ``pyproject.toml``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

EXAMPLES = Path(__file__).resolve().parent / "plugins" / "examples"
TARGET = ("vally_authoring", "plugin_examples")
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build", "dist")


class BuildPyWithExamples(build_py):
    """``build_py`` that also copies each example distribution into the package."""

    def run(self) -> None:
        """Build the packages, then copy the examples next to ``vally_authoring.scaffold``."""
        super().run()
        examples = sorted(p for p in EXAMPLES.glob("*/pyproject.toml"))
        if not examples:
            raise RuntimeError(f"no example plugins in {EXAMPLES}; vally new needs them")
        target = Path(self.build_lib, *TARGET)
        for pyproject in examples:
            shutil.copytree(
                pyproject.parent, target / pyproject.parent.name, ignore=IGNORED, dirs_exist_ok=True
            )


setup(cmdclass={"build_py": BuildPyWithExamples})
