"""The generated reference pages under docs/reference/ match the code."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_generated_pages_are_current() -> None:
    result = subprocess.run(
        [sys.executable, "scripts/gen_docs.py", "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, (
        "stale generated docs; run 'python3 scripts/gen_docs.py':\n" + result.stdout
    )


def test_check_reports_a_stale_page(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import gen_docs
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    pages = gen_docs.pages()
    hooks = ROOT / "docs" / "reference" / "hooks.md"
    assert "## vally_trial_end" in pages[hooks]
    cli = pages[ROOT / "docs" / "reference" / "cli.md"]
    for command in ("eval", "new", "experiment run", "plugins list"):
        assert f"## vally {command}\n" in cli
    assert "`--grader-plugin SPEC`" in cli
    spec = pages[ROOT / "docs" / "reference" / "eval-spec.md"]
    assert "| `stimuli` | list[[Stimulus](#stimulus)] | required |" in spec
    # point the generator at a copy and make one page stale
    reference = tmp_path / "docs" / "reference"
    reference.mkdir(parents=True)
    for path, text in pages.items():
        (reference / path.name).write_text(text)
    (reference / "hooks.md").write_text("outdated\n")
    original_root, original_ref = gen_docs.ROOT, gen_docs.REFERENCE
    gen_docs.ROOT, gen_docs.REFERENCE = tmp_path, reference
    try:
        assert gen_docs.main(["--check"]) == 1
        assert gen_docs.main([]) == 0
        assert gen_docs.main(["--check"]) == 0
    finally:
        gen_docs.ROOT, gen_docs.REFERENCE = original_root, original_ref
    assert (reference / "hooks.md").read_text() == pages[hooks]
