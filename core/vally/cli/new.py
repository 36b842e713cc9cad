"""``vally new KIND NAME``: scaffold a plugin package that installs, lists and tests green.

The package follows the layout of the example plugins under ``plugins/examples/``: a
``pyproject.toml`` declaring the class in the kind's entry-point group, a ``src/`` package
with the class (metadata, strict ``Config``, working methods), a README and a test.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

NAME_PATTERN = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")
"""Plugin names ``vally new`` accepts: kebab-case, starting with a letter."""


@dataclass(frozen=True)
class Scaffold:
    """What ``vally new`` writes for one plugin.

    Attributes:
        kind: The plugin kind (``eval_provider``).
        name: The plugin name users type (``my-check``).
        distribution: The distribution name (``vally-my-check``).
        package: The import package (``vally_my_check``).
        class_name: The plugin class (``MyCheckGrader``).
        root: The folder the package is written to.
    """

    kind: str
    name: str
    distribution: str
    package: str
    class_name: str
    root: Path


def normalize_kind(value: str) -> str:
    """``eval-provider``/``eval_provider``/``eval-providers`` -> ``eval_provider``.

    Raises:
        typer.BadParameter: The kind is not one ``vally new`` scaffolds.
    """
    from vally.tools.scaffold import TEMPLATES

    kind = value.strip().lower().replace("-", "_")
    if kind.endswith("s") and kind[:-1] in TEMPLATES:
        kind = kind[:-1]
    if kind not in TEMPLATES:
        choices = ", ".join(k.replace("_", "-") for k in TEMPLATES)
        raise typer.BadParameter(f"unknown kind {value!r}; expected one of {choices}")
    return kind


def plan_scaffold(kind: str, name: str, output_dir: Path) -> Scaffold:
    """Derive the names and the target folder of a new plugin.

    ``name`` may carry the ``vally-`` prefix; the plugin name is the part after it and the
    distribution always starts with ``vally-``.

    Raises:
        typer.BadParameter: The name is not kebab-case.
    """
    from vally.tools.scaffold import TEMPLATES

    plugin = name[len("vally-") :] if name.startswith("vally-") else name
    if not NAME_PATTERN.fullmatch(plugin):
        raise typer.BadParameter(
            f"plugin name {name!r} is not kebab-case (lower-case letters, digits and single "
            "hyphens, starting with a letter), e.g. 'my-check'"
        )
    distribution = f"vally-{plugin}"
    package = distribution.replace("-", "_")
    suffix = TEMPLATES[kind].suffix
    camel = "".join(part.capitalize() for part in plugin.split("-"))
    if camel.lower().endswith(suffix.lower()):
        camel = camel[: -len(suffix)]
    class_name = camel + suffix
    return Scaffold(kind, plugin, distribution, package, class_name, output_dir / distribution)


def render_files(scaffold: Scaffold) -> dict[str, str]:
    """The files of the new package, as relative path -> text."""
    from vally import __version__
    from vally.plugins.groups import ENTRY_POINT_GROUPS
    from vally.tools.scaffold import PYPROJECT, README, TEMPLATES, render

    template = TEMPLATES[scaffold.kind]
    values = {
        "NAME": scaffold.name,
        "CLASS": scaffold.class_name,
        "PACKAGE": scaffold.package,
        "DIST": scaffold.distribution,
        "GROUP": ENTRY_POINT_GROUPS[scaffold.kind],  # type: ignore[index]
        "KIND": scaffold.kind.replace("_", "-"),
        "TITLE": template.title,
        "VALLY_MIN": ".".join(__version__.split(".")[:2]),
    }
    values["USAGE"] = render(template.usage, values)
    src = f"src/{scaffold.package}"
    return {
        "pyproject.toml": render(PYPROJECT, values),
        "README.md": render(README, values),
        f"{src}/__init__.py": render(template.module, values),
        f"{src}/py.typed": "",
        f"tests/test_{scaffold.package}.py": render(template.test, values),
    }


def write_scaffold(scaffold: Scaffold, *, force: bool = False) -> list[Path]:
    """Write the package; returns the files written.

    Raises:
        ConfigError: The target folder exists and is not empty (and ``force`` is off).
        OutputError: The target (or a folder above it) is a file, or cannot be written.
    """
    from vally.errors import ConfigError, OutputError

    root = scaffold.root
    for folder in (root, *root.parents):
        if folder.exists():
            if not folder.is_dir():
                raise OutputError(
                    f"cannot create the package folder {root}: {folder} is a file",
                    hint="pass another --output-dir, or move the file away",
                )
            break
    if root.exists() and any(root.iterdir()) and not force:
        raise ConfigError(
            f"{root} already exists and is not empty",
            hint="choose another name or --output-dir, or pass --force to overwrite",
        )
    written: list[Path] = []
    for relative, text in render_files(scaffold).items():
        path = root / relative
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise OutputError(
                f"cannot write {path}: {exc.strerror or exc}",
                hint="check that --output-dir is a writable folder",
            ) from exc
        written.append(path)
    return written


def new_command(
    kind: Annotated[
        str,
        typer.Argument(
            help="Plugin kind: grader, executor, backend, reporter, eval-provider, "
            "shard-strategy or llm-provider.",
            show_default=False,
        ),
    ],
    name: Annotated[
        str,
        typer.Argument(help="Plugin name in kebab-case, e.g. my-check.", show_default=False),
    ],
    output_dir: Annotated[
        Path,
        typer.Option("--output-dir", "-o", help="Folder to create the package in."),
    ] = Path("."),
    force: Annotated[
        bool, typer.Option("--force", help="Overwrite files of an existing folder.")
    ] = False,
) -> None:
    """Scaffold a plugin package: pyproject with the entry point, class, README and test."""
    from vally.cli.common import user_errors

    selected = normalize_kind(kind)
    scaffold = plan_scaffold(selected, name, output_dir)
    with user_errors():
        written = write_scaffold(scaffold, force=force)
    label = scaffold.kind.replace("_", " ")
    typer.echo(f"Created {label} plugin {scaffold.name!r} in {scaffold.root}")
    for path in written:
        typer.echo(f"  {path.relative_to(scaffold.root).as_posix()}")
    typer.echo("Next steps:")
    typer.echo(f"  pip install -e {scaffold.root}")
    typer.echo(f"  vally plugins list --kind {scaffold.kind}")
    typer.echo(f"  python -m pytest {scaffold.root / 'tests'}")


def register(app: typer.Typer) -> None:
    """Add ``vally new`` to the application."""
    app.command("new")(new_command)
