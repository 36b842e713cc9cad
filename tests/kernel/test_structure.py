"""The kernel keeps its shape: layers and public-API contracts hold, mypy --strict passes over
the packages from their source roots, CLI modules stay thin and functions short."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
KERNEL = ROOT / "core" / "vally"
CLI_MODULE_LINES = 300
FUNCTION_LINES = 80
MODULE_LINES = 600


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_import_contracts_hold() -> None:
    # Through this interpreter, so the contracts see the vally it imports (a bare
    # lint-imports on PATH may belong to another environment).
    command = "import sys; from importlinter.cli import lint_imports_command as c; c()"
    result = _run([sys.executable, "-c", command])
    assert result.returncode == 0, result.stdout + result.stderr
    for contract in (
        "The kernel is layered: each layer imports only the layers below it KEPT",
        "Built-ins and backends import only the public vally API KEPT",
        "The kernel never imports the built-ins or the backends KEPT",
        "The engine is layered: a run, hooks, options, shards, trials, planning, records KEPT",
        "vally_compare imports no other built-in package KEPT",
        "The other packages do not import vally_compare KEPT",
    ):
        assert contract in result.stdout


def test_layers_contract_names_every_kernel_package() -> None:
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    layers = next(c for c in contracts if c["type"] == "layers")["layers"]
    named = {part.strip() for layer in layers for part in layer.split("|")}
    packages = {f"vally.{p.name}" for p in KERNEL.iterdir() if (p / "__init__.py").is_file()}
    assert packages <= named, f"subpackages outside the layers contract: {packages - named}"


@pytest.mark.slow
def test_mypy_strict_over_the_packages_without_path_tricks() -> None:
    assert not (ROOT / "build" / "mypy").exists() or not any((ROOT / "build" / "mypy").iterdir())
    result = _run(
        [
            sys.executable,
            "-m",
            "mypy",
            *("-p", "vally", "-p", "vally_builtin", "-p", "vally_compare", "-p", "vally_backends"),
        ]
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Success" in result.stdout


def test_cli_modules_only_parse_and_print() -> None:
    long = {
        p.name: n
        for p in (KERNEL / "cli").glob("*.py")
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > CLI_MODULE_LINES
    }
    assert not long, f"CLI modules over {CLI_MODULE_LINES} lines: {long}"


def test_no_kernel_function_is_longer_than_80_lines() -> None:
    long: list[str] = []
    for path in sorted(KERNEL.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > FUNCTION_LINES:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({lines})")
    assert not long, "kernel functions over 80 lines:\n" + "\n".join(long)


def test_no_kernel_module_is_longer_than_600_lines() -> None:
    long = {
        str(p.relative_to(ROOT)): n
        for p in sorted(KERNEL.rglob("*.py"))
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MODULE_LINES
    }
    assert not long, f"kernel modules over {MODULE_LINES} lines: {long}"


def test_every_engine_subpackage_says_what_it_holds() -> None:
    import vally.engine

    engine = KERNEL / "engine"
    subpackages = sorted(p for p in engine.iterdir() if (p / "__init__.py").is_file())
    assert {p.name for p in subpackages} >= {"planning", "records", "shards", "trials"}
    for package in subpackages:
        tree = ast.parse((package / "__init__.py").read_text(encoding="utf-8"))
        doc = ast.get_docstring(tree)
        assert doc, f"engine/{package.name}/__init__.py has no docstring"
        assert f"vally.engine.{package.name}" in (vally.engine.__doc__ or ""), package.name


def test_the_kernel_matches_no_message_text_to_decide() -> None:
    """Decisions rest on typed errors, not on the words of a message."""
    offenders = []
    for path in sorted(KERNEL.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if ".message" in text and " in exc.message" in text:
            offenders.append(str(path.relative_to(ROOT)))
    assert not offenders, offenders
