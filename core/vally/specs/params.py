"""Params: ``${NAME}`` and ``${NAME=default}`` anywhere in a YAML file.

A reference may stand anywhere in a scalar (``prompt: "Deploy to ${REGION=westus}"``). A plain
(unquoted) scalar that is exactly one reference takes the YAML type of the value, so
``runs: ${RUNS=3}`` is the int 3, and ``${FLAG=true}`` a bool. A quoted scalar stays a string.
``$${NAME}`` is an escape for a literal ``${NAME}`` (useful in shell ``commands``).

Resolution order, highest first (the first layer that defines a name wins):

1. ``--param NAME=value`` on the command line;
2. eval param files, next to the eval file: ``<name>.params.yaml`` (``eval.params.yaml`` for
   ``eval.yaml``, ``auth.eval.params.yaml`` for ``auth.eval.yaml``), then ``params.yaml`` in the
   same folder, then the spec's own top-level ``params:`` map;
3. ``params:`` in ``.vally.yaml``;
4. the inline ``=default``.

A name found nowhere is a :class:`~vally.errors.ParamError` naming the param, file and line.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from vally.errors import ConfigError, ParamError, SourceLocation
from vally.specs.yamlio import ScalarHook, load_yaml, resolve_scalar_tag

PARAM_PATTERN = re.compile(r"\$(\$?)\{([A-Za-z_][A-Za-z0-9_.-]*)(?:=([^}]*))?\}")
"""``${NAME}``, ``${NAME=default}`` and the escape ``$${NAME}``."""

PARAM_FILE_NAME = "params.yaml"
"""The folder-wide eval param file."""


@dataclass(frozen=True)
class ParamLayer:
    """One source of param values, with a label used in messages."""

    label: str
    values: Mapping[str, str]


@dataclass
class ParamResolver:
    """Resolves params in text against layers ordered highest precedence first.

    Attributes:
        layers: Sources of values, highest precedence first.
        used: Every resolved name and the value it got (for provenance).
    """

    layers: Sequence[ParamLayer] = ()
    used: dict[str, str] = field(default_factory=dict)

    def lookup(self, name: str) -> str | None:
        """The value of ``name`` from the highest layer that defines it."""
        for layer in self.layers:
            if name in layer.values:
                return layer.values[name]
        return None

    def substitute(
        self,
        text: str,
        location: SourceLocation | None = None,
        locate: Callable[[int], SourceLocation] | None = None,
    ) -> str:
        """Replace every reference in ``text``; escapes become literal ``${...}``.

        Args:
            text: The text.
            location: Where ``text`` starts (for errors).
            locate: Maps an offset in ``text`` to a location (block scalars), overriding
                ``location``.

        Raises:
            ParamError: A reference without a value or default.
        """
        if "$" not in text:
            return text

        def replace(match: re.Match[str]) -> str:
            escaped, name, default = match.group(1), match.group(2), match.group(3)
            if escaped:
                return match.group(0)[1:]
            value = self.lookup(name)
            if value is None:
                value = default
            if value is None:
                where = locate(match.start()) if locate is not None else location
                raise unresolved_param(name, where)
            self.used[name] = value
            return value

        return PARAM_PATTERN.sub(replace, text)

    def scalar_hook(self, file: str) -> ScalarHook:
        """A hook for :func:`vally.specs.yamlio.load_yaml` that resolves params in every scalar."""

        def hook(node: yaml.ScalarNode) -> None:
            value = node.value
            if not isinstance(value, str) or "$" not in value:
                return
            mark = node.start_mark
            location = SourceLocation(file, mark.line + 1, mark.column + 1)
            locate = None
            if node.style in ("|", ">"):
                # block scalar: the text starts on the line after the indicator

                def locate(offset: int) -> SourceLocation:
                    return SourceLocation(file, mark.line + 2 + value.count("\n", 0, offset))

            whole = PARAM_PATTERN.fullmatch(value)
            new = self.substitute(value, location, locate)
            if new == value:
                return
            node.value = new
            if not node.style:  # plain scalar (None, or "" from libyaml): re-type it
                if whole is not None and not whole.group(1):
                    node.tag = resolve_scalar_tag(new)
                else:
                    node.tag = "tag:yaml.org,2002:str"

        return hook


def unresolved_param(name: str, location: SourceLocation | None) -> ParamError:
    """The error for a param that no layer defines and that has no inline default."""
    return ParamError(
        f"unresolved param '{name}': no --param, eval param file, spec 'params:' or "
        f".vally.yaml 'params:' defines it and it has no inline default",
        location=location,
        hint=(
            f"pass --param {name}=VALUE, add it to params.yaml next to the eval, or write "
            f"${{{name}=default}}; to keep a literal '${{{name}}}' write '$${{{name}}}'"
        ),
    )


def param_to_str(value: Any) -> str:
    """Render a YAML scalar as a param value (``true``/``false`` for booleans)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    return str(value)


def params_from_mapping(
    data: Any, *, file: str, where: str = "params", location: SourceLocation | None = None
) -> dict[str, str]:
    """Validate a ``NAME: scalar`` map and stringify its values.

    Raises:
        ConfigError: Not a mapping, or a value that is a list or mapping.
    """
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ConfigError(
            f"{where} must be a mapping of NAME: value, got {type(data).__name__}",
            location=location or SourceLocation(file),
        )
    out: dict[str, str] = {}
    for key, value in data.items():
        if isinstance(value, Mapping | list):
            raise ConfigError(
                f"{where}: param '{key}' must be a scalar (string, number or boolean)",
                location=location or SourceLocation(file),
            )
        out[str(key)] = param_to_str(value)
    return out


def read_param_file(path: Path) -> dict[str, str]:
    """Read an eval param file: a YAML (or JSON) mapping of ``NAME: value``.

    Params inside a param file are not resolved.

    Raises:
        ConfigError: The file is not a ``NAME: scalar`` map; for a file that looks like an
            eval spec (it has ``stimuli``), the message says that the name is reserved.
    """
    doc = load_yaml(path)
    if isinstance(doc.data, Mapping) and "stimuli" in doc.data:
        raise ConfigError(
            f"{path.name} is read as a param file (NAME: value pairs for the evals in its "
            "folder), but it looks like an eval spec: it has 'stimuli'",
            location=SourceLocation(str(path)),
            hint=f"rename it (e.g. {path.stem}.eval.yaml); the names params.yaml, params.yml "
            "and <eval>.params.yaml are reserved for param files",
        )
    return params_from_mapping(doc.data, file=str(path), where=f"param file {path.name}")


def eval_param_files(eval_path: Path) -> list[Path]:
    """The param files that apply to ``eval_path``, highest precedence first (existing only)."""
    name = eval_path.name
    for suffix in (".yaml", ".yml"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    candidates = [
        eval_path.parent / f"{name}.params.yaml",
        eval_path.parent / f"{name}.params.yml",
        eval_path.parent / PARAM_FILE_NAME,
        eval_path.parent / "params.yml",
    ]
    return [path for path in candidates if path.is_file() and path != eval_path]


def parse_key_values(
    items: Sequence[str], *, flag: str, collect_repeats: bool = False
) -> dict[str, str | list[str]]:
    """Parse repeated ``KEY=value`` flags.

    Args:
        items: The raw flag values.
        flag: The flag's name, for error messages.
        collect_repeats: When true, a repeated key becomes a list; otherwise the last wins.

    Raises:
        ConfigError: An item has no ``=`` or an empty key.
    """
    result: dict[str, str | list[str]] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"{flag} expects KEY=value, got {item!r}")
        if collect_repeats and key in result:
            previous = result[key]
            result[key] = [*previous, value] if isinstance(previous, list) else [previous, value]
        else:
            result[key] = value
    return result


def parse_params(items: Sequence[str]) -> dict[str, str]:
    """``--param KEY=VALUE`` flags as a dict (the last value of a repeated key wins).

    Raises:
        ConfigError: An item has no ``=`` or an empty key.
    """
    return {k: str(v) for k, v in parse_key_values(items, flag="--param").items()}
