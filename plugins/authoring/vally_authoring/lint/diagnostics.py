"""What ``vally lint`` finds: one :class:`Diagnostic` per finding, and the
:class:`LintResult` of a run (its tally, exit code and JSON form)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class Diagnostic:
    """One lint finding.

    Attributes:
        code: Stable kebab-case code (see the module docstring).
        severity: ``error`` or ``warning``.
        file: The file it is about.
        line: 1-based line (``None`` when unknown).
        message: What is wrong and, where possible, what to do.
        column: 1-based column (``None`` when unknown).
    """

    code: str
    severity: Severity
    file: str
    line: int | None
    message: str
    column: int | None = None

    def render(self) -> str:
        """``file:line:column: severity[code]: message``."""
        where = self.file
        if self.line is not None:
            where += f":{self.line}"
            if self.column is not None:
                where += f":{self.column}"
        return f"{where}: {self.severity}[{self.code}]: {self.message}"

    def as_dict(self) -> dict[str, Any]:
        """The JSON form."""
        return asdict(self)


@dataclass
class LintResult:
    """Every diagnostic of one lint run, plus what was checked."""

    diagnostics: list[Diagnostic] = field(default_factory=list)
    eval_files: list[Path] = field(default_factory=list)
    skills: list[Path] = field(default_factory=list)

    @property
    def errors(self) -> int:
        """Number of error diagnostics."""
        return sum(1 for d in self.diagnostics if d.severity == "error")

    @property
    def warnings(self) -> int:
        """Number of warning diagnostics."""
        return sum(1 for d in self.diagnostics if d.severity == "warning")

    def exit_code(self, *, strict: bool = False) -> int:
        """0 when clean (warnings allowed unless ``strict``), else 1."""
        if self.errors or (strict and self.warnings):
            return 1
        return 0

    def to_json(self) -> str:
        """``{"diagnostics": [...], "errors": n, "warnings": n}``."""
        return json.dumps(
            {
                "diagnostics": [d.as_dict() for d in self.diagnostics],
                "errors": self.errors,
                "warnings": self.warnings,
            },
            indent=2,
        )
