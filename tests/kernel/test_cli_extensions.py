"""CLI command extensions (entry-point group ``vally.cli``) go through the plugin registry."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest
from kernel_helpers import MakeDist

from vally.errors import PluginConflictError, PluginNotFoundError, PluginValidationError
from vally.plugins.registry import Registry
from vally.plugins.session import Session
from vally.plugins.settings import PluginSettings

GROUP = "vally.cli"

EXTENSIONS = '''
import typer


def register_hello(app):
    """Say hello from an extension."""

    @app.command("hello-{u}")
    def hello() -> None:
        typer.echo("hello from an extension")


def register_raising(app):
    """Start registering, then fail."""

    @app.command("partial-{u}")
    def partial() -> None:
        pass

    raise RuntimeError("half way through")
'''


def vally(
    args: list[str], site: Path, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the CLI in a fresh interpreter that also sees the distributions under ``site``."""
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)
    return subprocess.run(
        [sys.executable, "-c", "from vally.cli.app import main; main()", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "PYTHONPATH": path, "COLUMNS": "200", **(env or {})},
    )


def test_builtin_docker_extension_is_listed_with_its_provenance() -> None:
    (row,) = [r for r in Session(environ={}).list_plugins("cli_command") if r.name == "docker"]
    assert (row.kind, row.status, row.source) == ("cli_command", "ok", "vally 0.1.0")
    assert row.target == "vally_backends.docker.cli:register"
    assert row.description.startswith("Mount ")
    registration = Registry("cli_command").get("docker")
    assert registration.provenance.distribution == "vally"
    assert callable(registration.cls)


def test_blocking_and_the_distribution_filter_apply_to_extensions() -> None:
    assert "docker" in Registry("cli_command").names()
    blocked = Registry("cli_command", PluginSettings.from_env({"VALLY_BLOCK_PLUGINS": "docker"}))
    assert "docker" not in blocked.names()
    with pytest.raises(PluginNotFoundError, match="VALLY_BLOCK_PLUGINS"):
        blocked.get("docker")
    only = PluginSettings.from_env({"VALLY_ONLY_DISTRIBUTIONS": "vally-csv-reporter"})
    assert "docker" not in Registry("cli_command", only).names()


def test_extension_that_is_not_a_function_is_invalid(make_dist: MakeDist, unique: str) -> None:
    make_dist(
        f"notfn-{unique}",
        entry_points={GROUP: {f"notfn-{unique}": f"vally_t_notfn_{unique}:VALUE"}},
        modules={f"vally_t_notfn_{unique}.py": "VALUE = 42\n"},
    )
    with pytest.raises(PluginValidationError) as info:
        Registry("cli_command").get(f"notfn-{unique}")
    assert "not a register(app) function" in str(info.value)
    assert f"notfn-{unique} 1.0" in str(info.value)


def test_two_distributions_claiming_one_command_conflict(make_dist: MakeDist, unique: str) -> None:
    for dist in ("left", "right"):
        make_dist(
            f"{dist}-{unique}",
            entry_points={GROUP: {f"twin-{unique}": f"vally_t_{dist}_{unique}:register"}},
            modules={f"vally_t_{dist}_{unique}.py": "def register(app):\n    pass\n"},
        )
    with pytest.raises(PluginConflictError) as info:
        Registry("cli_command").get(f"twin-{unique}")
    assert f"left-{unique} 1.0" in str(info.value)
    assert f"right-{unique} 1.0" in str(info.value)
    assert f"vally_t_left_{unique}" not in sys.modules  # nothing was imported


def test_broken_extensions_never_break_the_cli(make_dist: MakeDist, unique: str) -> None:
    module = f"vally_t_ext_{unique}"
    site = make_dist(
        f"ext-{unique}",
        entry_points={
            GROUP: {
                f"hello-{unique}": f"{module}:register_hello",
                f"gone-{unique}": f"vally_t_ext_gone_{unique}:register",
                f"raises-{unique}": f"{module}:register_raising",
            }
        },
        modules={f"{module}.py": EXTENSIONS.replace("{u}", unique)},
    )
    helped = vally(["--help"], site)
    assert helped.returncode == 0, helped.stderr
    assert helped.stderr == ""
    commands = {line.split()[0] for line in helped.stdout.splitlines() if line.startswith("  ")}
    assert {f"hello-{unique}", f"gone-{unique}", f"raises-{unique}", "eval", "docker"} <= commands
    assert helped.stdout.count("Unavailable") == 2
    assert f"partial-{unique}" not in helped.stdout  # a failed register(app) is undone

    hello = vally([f"hello-{unique}"], site)
    assert (hello.returncode, hello.stdout) == (0, "hello from an extension\n")

    gone = vally([f"gone-{unique}", "sub", "--flag"], site)
    assert gone.returncode == 1
    assert "error[VALLY_PLUGIN_LOAD]" in gone.stderr
    assert f"CLI command 'gone-{unique}'" in gone.stderr
    assert f"ext-{unique} 1.0" in gone.stderr
    assert f"No module named 'vally_t_ext_gone_{unique}'" in gone.stderr

    raised = vally([f"raises-{unique}", "--help"], site)
    assert raised.returncode == 1
    assert "failed to register: RuntimeError: half way through" in raised.stderr

    blocked = vally(["--help"], site, {"VALLY_BLOCK_PLUGINS": f"hello-{unique}"})
    assert f"hello-{unique}" not in blocked.stdout


def test_plugins_list_shows_extensions_and_warns_about_broken_ones(
    make_dist: MakeDist, unique: str
) -> None:
    site = make_dist(
        f"lst-{unique}",
        entry_points={GROUP: {f"lost-{unique}": f"vally_t_lost_{unique}:register"}},
    )
    listed = vally(["plugins", "list", "--kind", "cli-command", "--format", "json"], site)
    assert listed.returncode == 0, listed.stderr
    rows = {row["name"]: row for row in json.loads(listed.stdout)}
    assert rows["docker"]["status"] == "ok"
    assert rows[f"lost-{unique}"]["status"] == "error"
    assert rows[f"lost-{unique}"]["source"] == f"lst-{unique} 1.0"
    assert f"warning: cli_command plugin 'lost-{unique}' is broken" in listed.stderr
    assert {row["kind"] for row in rows.values()} == {"cli_command"}


def test_help_lists_the_compare_extension_where_the_kernel_command_stood() -> None:
    from vally.cli.app import COMMAND_ORDER, app

    names = [command.name for command in app.registered_commands]
    assert names[: len(COMMAND_ORDER)] == list(COMMAND_ORDER)
    assert names.index("compare") == names.index("grade") + 1
    assert names[len(COMMAND_ORDER) :] == ["ingest", "serve"]  # other extensions follow


def test_a_blocked_compare_extension_leaves_the_other_commands_in_order(tmp_path: Path) -> None:
    listed = vally(["--help"], tmp_path, {"VALLY_BLOCK_PLUGINS": "compare"})
    assert listed.returncode == 0, listed.stderr
    commands = [
        line.split()[0] for line in listed.stdout.split("Commands:")[1].splitlines() if line.strip()
    ]
    assert "compare" not in commands
    assert commands[:7] == ["lint", "schema", "eval", "grade", "new", "init", "export"]
