"""examples/quickstart/README.md says what the run really prints and writes: one line per
trial, a block per stimulus with ``-v``, and the hashed folder layout."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.docs.test_examples_run import _copy_docs_tree

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "examples" / "quickstart" / "README.md"


def _eval(tree: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vally", "eval", "-e", "examples/quickstart/eval.yaml", *extra],
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def test_the_quickstart_prints_and_writes_what_its_readme_says(tmp_path: Path) -> None:
    text = README.read_text(encoding="utf-8")
    assert "one line per trial (`✔ quickstart/create-file #0: score 1.00`" in text
    assert "quickstart-<hash>/<stimulus>-<hash>/default-<hash>/trial-<n>/" in text
    tree = _copy_docs_tree(tmp_path)
    run = _eval(tree)
    assert run.returncode == 0, run.stdout + run.stderr
    lines = re.findall(r"^  ✔ quickstart/[a-z-]+ #\d: score 1\.00$", run.stdout, flags=re.M)
    assert len(lines) == 9
    assert "✔ quickstart/create-file #0: score 1.00" in run.stdout
    assert "tokens cost unknown" in run.stdout + run.stderr
    [folder] = list((tree / "vally-results").iterdir())
    for name in ("results.jsonl", "run-summary.jsonl", "report.md"):
        assert (folder / name).is_file(), name
    assert not (folder / "otel-spans.jsonl").exists()  # spans only with --trace
    trials = list(folder.glob("quickstart-*/*/default-*/trial-*/metadata.json"))
    assert len(trials) == 9
    hashed = re.compile(r"^[a-z-]+-[0-9a-f]{8}$")
    for metadata in trials:
        model, stimulus, eval_folder = metadata.parents[1], metadata.parents[2], metadata.parents[3]
        assert all(hashed.match(p.name) for p in (model, stimulus, eval_folder))
    assert (folder / "quickstart-ed4f0b24" / "create-file-6b2a2825").is_dir()
    verbose = _eval(tree, "-v")
    assert verbose.returncode == 0
    # a block per stimulus, each with every trial's graders
    blocks = re.findall(r"^━━━ ([a-z-]+) ━━━$", verbose.stdout, flags=re.M)
    assert sorted(blocks) == ["add-numbers", "create-file", "nested-file"]
    assert verbose.stdout.count("  Graders (") == 9
