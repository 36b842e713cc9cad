"""A package-folder vally plugin: the ``answer-equals`` grader.

A folder with an ``__init__.py`` is loaded as one package, so it can spread its code over
several modules and use relative imports::

    vally eval -e eval.yaml --grader-plugin ./plugins/examples/package_plugin/answer_checks
"""

from __future__ import annotations

from typing import Any

from vally import BaseGrader, GradeContext, GraderMetadata, GraderResult, StrictConfig

from .normalize import normalize


class AnswerEqualsConfig(StrictConfig):
    """Options of ``answer-equals``.

    Attributes:
        expected: The expected final answer (compared after normalisation).
    """

    expected: str


class AnswerEqualsGrader(BaseGrader[AnswerEqualsConfig]):
    """Passes when the normalised final answer equals the normalised ``expected``."""

    metadata = GraderMetadata(
        name="answer-equals",
        description="The final answer equals the expected one (case, spaces, end dot ignored).",
        reference="reference-based",
    )
    Config = AnswerEqualsConfig

    async def grade(self, context: GradeContext) -> GraderResult:
        """Compare the normalised output and expected answer."""
        got = normalize(context.trajectory.output)
        want = normalize(self.config.expected)
        return self.result(
            context, passed=got == want, evidence=f"answer {got!r}, expected {want!r}"
        )


def register(registrar: Any) -> None:
    """Called by vally when the package is loaded: register the grader."""
    registrar.grader(AnswerEqualsGrader)
