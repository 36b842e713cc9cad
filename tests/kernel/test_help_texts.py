"""Every option and argument of every ``vally`` command says in ``--help`` what it does and
what to write (``PATH``, ``N``, ``KEY=VALUE``), never a Python type (``<str>``, ``<int range>``)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
import typer.main
from typer.testing import CliRunner

from vally.cli.app import app

TYPE_IN_HELP = re.compile(
    r"<[a-z][\w\[\], |]*>"  # typer's <str>, <list[Path]>, <int range>, <path>
    r"|\blist\[|\b(?:TEXT|INTEGER|FLOAT|BOOLEAN|FILENAME|DIRECTORY)\b"  # click's names
)
"""What a Python or click type name looks like anywhere in a rendered ``--help``."""
PYTHON_TYPE = re.compile(TYPE_IN_HELP.pattern + r"|\b(?:str|int|float|bool|Path)\b")
"""... and, in the part of a help line that names a parameter, a bare Python type."""


def _commands() -> Iterator[tuple[list[str], Any, Any]]:
    """Every command of the tree as (arguments after ``vally``, command, context)."""
    root = typer.main.get_command(app)

    def walk(command: Any, ctx: Any, path: list[str]) -> Iterator[tuple[list[str], Any, Any]]:
        yield path, command, ctx
        for name, sub in getattr(command, "commands", {}).items():
            if not getattr(sub, "hidden", False):
                sub_ctx = sub.context_class(sub, info_name=name, parent=ctx)
                yield from walk(sub, sub_ctx, [*path, name])

    yield from walk(root, root.context_class(root, info_name="vally"), [])


COMMANDS = list(_commands())
EXPECTED = {
    "eval",
    "lint",
    "grade",
    "compare",
    "new",
    "plugins list",
    "schema",
    "experiment run",
    "experiment merge",
}


def test_the_walk_reaches_every_command() -> None:
    found = {" ".join(path) for path, _, _ in COMMANDS}
    assert found >= EXPECTED, EXPECTED - found


def test_the_type_pattern_catches_typer_type_names() -> None:
    for bad in ("path <path>", "--plugin <list[str]>", "--workers <int range>", "x <float>"):
        assert PYTHON_TYPE.search(bad), bad
    for good in ("--param KEY=VALUE", "--workers N", "SHARD_DIR", "--judge-evidence tools|inline"):
        assert not PYTHON_TYPE.search(good), good


@pytest.mark.parametrize(
    ("path", "command", "ctx"), COMMANDS, ids=[" ".join(p) or "vally" for p, _, _ in COMMANDS]
)
def test_every_parameter_has_help_and_a_metavar(path: list[str], command: Any, ctx: Any) -> None:
    problems = []
    for param in command.params:
        if getattr(param, "hidden", False):
            continue
        record = param.get_help_record(ctx)
        names = record[0] if record else param.name
        if not (getattr(param, "help", None) or "").strip():
            problems.append(f"{names}: no help text")
        if PYTHON_TYPE.search(names):
            problems.append(f"{names}: a Python type instead of a metavar")
        takes_value = param.param_type_name == "argument" or not getattr(param, "is_flag", True)
        if takes_value and not param.metavar:
            problems.append(f"{names}: no metavar saying what to write")
    assert not problems, f"vally {' '.join(path)}: " + "; ".join(problems)


@pytest.mark.parametrize("path", [p for p, _, _ in COMMANDS], ids=lambda p: " ".join(p) or "vally")
def test_rendered_help_names_no_python_type(path: list[str]) -> None:
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "200", "NO_COLOR": "1"})
    assert result.exit_code == 0, result.output
    found = TYPE_IN_HELP.findall(result.output)
    assert not found, f"vally {' '.join(path)} --help shows {found}:\n{result.output}"


def test_param_has_the_short_alias_wherever_it_exists() -> None:
    with_param = [
        (" ".join(path), param)
        for path, command, _ in COMMANDS
        for param in command.params
        if "--param" in getattr(param, "opts", [])
    ]
    assert {name for name, _ in with_param} >= {"eval", "experiment run", "lint"}
    assert all("-p" in param.opts for _, param in with_param), [
        name for name, param in with_param if "-p" not in param.opts
    ]
