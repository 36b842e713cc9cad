"""Every module the code, the tests, the benchmarks and the scripts import comes from a
distribution that ``pyproject.toml`` declares, or that one of those requires: in the
dependencies or an extra the test command (``scripts/test.sh``) installs, or, for the few
optional ones, in an extra whose tests skip without it.

An undeclared import passes wherever the environment happens to have the package (a
Python with many preinstalled, or a virtual environment that sees the system's) and fails
on a new machine; this test finds it in any environment, by reading the imports.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ["core", "plugins", "backends", "runners", "tests", "bench", "scripts", "examples"]
SKIPPED_PARTS = {".venv", "build", "dist", "__pycache__", "fixtures"}
OPTIONAL = {"ray": "ray"}
"""Modules not in the test environment, each with the extra that declares it: the tests
that need it skip without it (unless ``VALLY_REQUIRE_RAY=1``, as in CI)."""
BY_NAME = ("import_module", "importorskip", "find_spec")
"""Calls whose first argument, a literal, names a module imported at run time."""


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_name(requirement: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    assert match is not None, requirement
    return _normalized(match.group(1))


def _pyproject() -> dict[str, object]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def _test_extras() -> list[str]:
    """The extras ``scripts/test.sh`` installs (its ``EXTRAS=`` line)."""
    script = (ROOT / "scripts" / "test.sh").read_text(encoding="utf-8")
    match = re.search(r'^EXTRAS="([a-z0-9,-]+)"$', script, flags=re.M)
    assert match is not None, "scripts/test.sh has no EXTRAS= line"
    return match.group(1).split(",")


def _declared(extras: list[str]) -> set[str]:
    """The distributions the dependencies and ``extras`` name."""
    return {_requirement_name(r) for r in _requirements(extras)}


def _requirements(extras: list[str]) -> list[str]:
    project = _pyproject()["project"]
    assert isinstance(project, dict)
    requirements = list(project["dependencies"])
    for extra in extras:
        requirements += project["optional-dependencies"][extra]
    return requirements


def _installed_by(extras: list[str]) -> set[str]:
    """The distributions the dependencies and ``extras`` name, and everything those
    require in turn (their requirement markers evaluated, with the extras asked for), as
    this environment's packaging metadata says."""
    wanted = [Requirement(r) for r in _requirements(extras)]
    seen: set[str] = set()
    while wanted:
        requirement = wanted.pop()
        name = _normalized(requirement.name)
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        key = f"{name}[{','.join(sorted(requirement.extras))}]"
        if key in seen:
            continue
        seen.add(key)
        try:
            requires = importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        for text in requires:
            nested = Requirement(text)
            asked = ["", *sorted(requirement.extras)]
            if nested.marker is None or any(nested.marker.evaluate({"extra": e}) for e in asked):
                nested.marker = None
                wanted.append(nested)
    return {key.split("[")[0] for key in seen}


def _sources() -> Iterator[Path]:
    for folder in SCANNED:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if not SKIPPED_PARTS.intersection(path.relative_to(ROOT).parts):
                yield path


def _local_names(paths: list[Path]) -> set[str]:
    """Modules and packages of the repository itself (source roots, test helpers)."""
    names = {p.stem for p in paths}
    names |= {p.parent.name for p in paths if p.name == "__init__.py"}
    return names


def _imports(path: Path) -> Iterator[tuple[str, int]]:
    """Each top-level module ``path`` imports, with its line."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name.split(".")[0], node.lineno
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module.split(".")[0], node.lineno
        elif isinstance(node, ast.Call) and node.args:
            called = node.func.attr if isinstance(node.func, ast.Attribute) else None
            first = node.args[0]
            if (
                called in BY_NAME
                and isinstance(first, ast.Constant)
                and isinstance(first.value, str)
            ):
                yield first.value.split(".")[0], node.lineno


def _undeclared() -> list[str]:
    paths = list(_sources())
    local = _local_names(paths)
    declared = _installed_by(_test_extras())
    providers = importlib.metadata.packages_distributions()
    found = []
    for path in paths:
        for module, line in _imports(path):
            if module in sys.stdlib_module_names or module in local or module in OPTIONAL:
                continue
            distributions = {_normalized(d) for d in providers.get(module, [])}
            if not distributions & declared:
                where = f"{path.relative_to(ROOT)}:{line}"
                shown = ", ".join(sorted(distributions)) or "not installed"
                found.append(f"{where} imports {module} ({shown})")
    return found


def test_every_imported_module_is_declared() -> None:
    undeclared = _undeclared()
    assert not undeclared, (
        "modules imported but declared by neither the dependencies nor the extras "
        f"scripts/test.sh installs ({', '.join(_test_extras())}); add each one's "
        "distribution to pyproject.toml:\n  " + "\n  ".join(undeclared)
    )


def test_the_optional_modules_are_declared_by_their_extra() -> None:
    for module, extra in OPTIONAL.items():
        assert module in _declared([extra]), f"{module}: not in the {extra} extra"
        assert extra not in _test_extras(), f"{module} is installed by scripts/test.sh"
