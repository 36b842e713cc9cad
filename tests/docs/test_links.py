"""Relative links of the docs, the README and the example READMEs point at existing files,
and docs/index.md links every page under docs/."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted(
    [ROOT / "README.md", *ROOT.glob("docs/**/*.md"), *ROOT.glob("plugins/examples/*/README.md")]
)
LINK = re.compile(r"\]\(([^)\s]+)\)")


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(ROOT).as_posix() for p in PAGES])
def test_relative_links_resolve(page: Path) -> None:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.DOTALL)
    broken = []
    for target in LINK.findall(text):
        if re.match(r"^[a-z]+:", target) or target.startswith("#"):
            continue
        path = (page.parent / target.split("#", 1)[0]).resolve()
        if not path.exists():
            broken.append(target)
    assert not broken, f"{page.relative_to(ROOT)}: broken links {broken}"


def test_index_links_every_page() -> None:
    index = (ROOT / "docs" / "index.md").read_text()
    linked = {(ROOT / "docs" / t.split("#")[0]).resolve() for t in LINK.findall(index)}
    pages = {p.resolve() for p in (ROOT / "docs").glob("**/*.md")} - {
        (ROOT / "docs" / "index.md").resolve()
    }
    missing = sorted(p.relative_to(ROOT / "docs").as_posix() for p in pages - linked)
    assert not missing, f"docs/index.md does not link: {missing}"
