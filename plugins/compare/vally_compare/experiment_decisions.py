"""Deciding an experiment's variants by its promotion rules, with no model.

After ``vally experiment run`` (or ``merge``) of an experiment file with a ``promotion:``
section, every variant is compared with the baseline from the graded records
(:mod:`vally_compare.graded`, broken down by eval so rules can be scoped to one) and
judged by the rules. The run folder then holds ``comparison.jsonl`` (one
``graded-comparison`` record per variant) and ``promotion.xml`` (JUnit, a test case per
rule), and ``report.md`` gets a *Promotion* section.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from vally import PromotionRules
from vally_compare.graded_records import comparison_json
from vally_compare.graded_run import GradedOutcome, apply_rules, compare_paths, rule_dimensions
from vally_compare.graded_text import comparison_lines, interval_text, promotion_lines

COMPARISON_FILE = "comparison.jsonl"
JUNIT_FILE = "promotion.xml"
REPORT_FILE = "report.md"


def _variant_folders(run_dir: Path, baseline: str) -> tuple[Path, dict[str, Path]]:
    from vally_compare.sources import experiment_sources

    base, folders = experiment_sources(run_dir, baseline)
    return folders[base], {name: path for name, path in folders.items() if name != base}


def decide_variants(
    run_dir: Path, baseline: str, rules: PromotionRules
) -> list[tuple[str, GradedOutcome]]:
    """Each variant's graded comparison with the baseline and the rules' verdicts.

    Raises:
        ConfigError: A folder cannot be read or a rule names what the runs lack.
        SuiteMismatchError: A variant changed the suite itself.
    """
    base_path, variants = _variant_folders(run_dir, baseline)
    outcomes = []
    for name, path in variants.items():
        comparison = compare_paths(
            base_path,
            path,
            labels=(baseline, name),
            by=["eval", *(d for d in rule_dimensions(rules) if d != "eval")],
            confidence_level=rules.confidence_level or 0.95,
            method=rules.interval or "cases",
        )
        outcomes.append((name, apply_rules(comparison, rules)))
    return outcomes


def report_section(outcomes: list[tuple[str, GradedOutcome]]) -> str:
    """The *Promotion* section of ``report.md``."""
    lines = ["", "## Promotion", ""]
    for name, outcome in outcomes:
        promotion = outcome.promotion
        assert promotion is not None
        comparison = outcome.comparison
        lines.append(f"### {name}: {promotion.verdict.upper()}")
        lines.append("")
        lines.append("| rule | verdict | why |")
        lines.append("|---|---|---|")
        for rule in promotion.rules:
            reason = rule.reason.replace("|", "\\|")
            lines.append(f"| {rule.name} | {rule.verdict} | {reason} |")
        lines.append("")
        level = f"{comparison.confidence_level:.0%}"
        lines.append(f"| grader | baseline | {name} | delta | {level} CI | paired |")
        lines.append("|---|---|---|---|---|---|")
        for g in comparison.graders:
            lines.append(
                f"| {g.name} | {_cell(g.baseline_mean)} | {_cell(g.candidate_mean)} | "
                f"{_cell(g.delta, signed=True)} | {interval_text(g.interval)} | {g.paired} |"
            )
        lines.append("")
        flips = [f"{c.id} ({c.flip})" for c in comparison.flips]
        lines.append(f"- Improved: {', '.join(comparison.improved) or 'none'}")
        lines.append(f"- Regressed: {', '.join(comparison.regressed) or 'none'}")
        lines.append(f"- Flips: {', '.join(flips) or 'none'}")
        lines.append(
            f"- Failed cases: baseline {comparison.failed['baseline']}, "
            f"{name} {comparison.failed['candidate']}"
        )
        lines.append("")
    return "\n".join(lines)


def _cell(value: float | None, *, signed: bool = False) -> str:
    if value is None:
        return "—"
    return f"{value:+.3f}" if signed else f"{value:.3f}"


def decide_experiment(
    run_dir: Path, baseline: str, rules: PromotionRules, *, echo: Callable[[str], None]
) -> int:
    """Decide, print, write the files (see the module docstring); 0 when every variant is
    promoted, else 1.

    Raises:
        VallyError: The variants cannot be read or compared, or a file cannot be written.
    """
    from vally import output_errors, write_text_atomic
    from vally_compare.junit import write_rules_junit

    outcomes = decide_variants(run_dir, baseline, rules)
    for _name, outcome in outcomes:
        for line in comparison_lines(outcome.comparison):
            echo(line)
        echo("")
        assert outcome.promotion is not None
        echo(f"Variant {outcome.comparison.candidate.label}:")
        for line in promotion_lines(outcome.promotion, "experiment promotion rules"):
            echo(line)
        echo("")
    records = "".join(
        json.dumps(comparison_json(o.comparison, o.promotion, "experiment"), ensure_ascii=False)
        + "\n"
        for _n, o in outcomes
    )
    with output_errors(f"{run_dir / COMPARISON_FILE}", hint="check the run folder is writable"):
        write_text_atomic(run_dir / COMPARISON_FILE, records)
        report = run_dir / REPORT_FILE
        if report.is_file():
            text = report.read_text(encoding="utf-8")
            write_text_atomic(report, text.rstrip("\n") + "\n" + report_section(outcomes))
    write_rules_junit(run_dir / JUNIT_FILE, [o for _n, o in outcomes])
    held = [name for name, o in outcomes if o.promotion is not None and o.promotion.exit_code]
    return 1 if held else 0
