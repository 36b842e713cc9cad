"""Promotion rules as JUnit XML: one test suite per candidate, one test case per rule.

A rule that fails is a ``<failure>``, an inconclusive one is a ``<failure
type="inconclusive">`` (it holds the candidate as a failure does), and the reason and the
cases that broke the rule are the failure's message and text, so a CI page lists each rule
with why it held the candidate.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vally_compare.graded_run import GradedOutcome


def rules_junit(outcomes: Sequence[GradedOutcome]) -> str:
    """The XML document."""
    root = ET.Element("testsuites", name="vally promotion")
    for outcome in outcomes:
        if outcome.promotion is None:
            continue
        rules = outcome.promotion.rules
        held = [r for r in rules if r.verdict != "pass"]
        suite = ET.SubElement(
            root,
            "testsuite",
            name=f"promotion: {outcome.comparison.candidate.label}",
            tests=str(len(rules)),
            failures=str(len(held)),
            errors="0",
        )
        for rule in rules:
            case = ET.SubElement(
                suite, "testcase", classname=f"promotion.{rule.type}", name=rule.name
            )
            if rule.verdict != "pass":
                failure = ET.SubElement(case, "failure", type=rule.verdict, message=rule.reason)
                failure.text = "\n".join([rule.reason, *rule.cases])
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write_rules_junit(path: Path, outcomes: Sequence[GradedOutcome]) -> None:
    """Write the XML atomically.

    Raises:
        OutputError: The file cannot be written.
    """
    from vally import output_errors, write_text_atomic

    with output_errors(f"--junit {path}", hint="pass a writable --junit path"):
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(path, rules_junit(outcomes))
