"""The package ``vally_compare`` keeps its shape: short modules, a lazy top-level API, and the
names that left the kernel in 0.2 gone from ``vally``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import vally
import vally_compare

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "plugins" / "compare" / "vally_compare"
MODULE_LINES = 600
MOVED = (
    "Estimate",
    "metric_delta",
    "mcnemar_from_pairs",
    "stimulus_pass_rates",
    "pass_rate_deltas",
    "mean_rate",
    "RunTally",
    "compare_tallies",
    "comparison_json",
)


def test_no_module_is_longer_than_600_lines() -> None:
    long = {
        str(p.relative_to(PACKAGE)): n
        for p in sorted(PACKAGE.rglob("*.py"))
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MODULE_LINES
    }
    assert not long, f"vally_compare modules over {MODULE_LINES} lines: {long}"


@pytest.mark.parametrize("name", MOVED)
def test_moved_names_come_from_vally_compare_only(name: str) -> None:
    assert name in vally_compare.__all__
    assert getattr(vally_compare, name) is not None
    assert name not in vally.__all__
    with pytest.raises(AttributeError):
        getattr(vally, name)


def test_importing_the_package_imports_no_module_of_it() -> None:
    code = (
        "import sys, vally_compare; "
        "print(sorted(m for m in sys.modules if m.startswith('vally_compare.')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]"
