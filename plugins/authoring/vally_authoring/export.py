"""``vally export``: write an eval spec in another tool's format through an exporter plugin.

The spec is loaded as ``vally eval`` loads it (params, ``.vally.yaml``, ``--eval-plugin``),
the exporter is resolved from any specifier form (entry-point name, distribution,
``module:Attr``, file path) and configured from ``-- key=value`` arguments, then asked to
write under the output folder. Nothing is written when the spec, the exporter or its config
is invalid.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from vally import ConfigError, parse_key_values

DEFAULT_EXPORT_DIR = "vally-export"
"""Where ``vally export`` writes when no ``--output-dir`` is given."""


@dataclass
class ExportRequest:
    """Everything ``vally export`` needs.

    Attributes:
        eval_spec: The eval file to export.
        exporter: The exporter's specifier (``harbor``, ``./my_exporter.py``, ...).
        output_dir: The folder to write into (created when missing).
        exporter_args: ``key=value`` items that configure the exporter (repeats: a list).
        params: ``--param`` values for the spec.
        eval_plugin: An eval provider specifier (``--eval-plugin``) to read the spec with.
    """

    eval_spec: str
    exporter: str
    output_dir: str = DEFAULT_EXPORT_DIR
    exporter_args: Sequence[str] = ()
    params: Mapping[str, str] = field(default_factory=dict)
    eval_plugin: str | None = None


@dataclass(frozen=True)
class ExportResult:
    """What an export wrote.

    Attributes:
        exporter: The exporter's registered name.
        output_dir: The folder written into.
        written: Every file or folder the exporter reported, in its order.
    """

    exporter: str
    output_dir: Path
    written: list[Path]


def export(request: ExportRequest, *, cwd: Path | None = None) -> ExportResult:
    """Load the spec, create the exporter and export every loaded spec.

    Raises:
        ConfigError: The spec is missing or invalid, an argument is malformed, the exporter's
            config is rejected or the exporter cannot express the spec.
        PluginError: The exporter is not installed or fails to load.
    """
    from vally import Session, find_project, load_evals

    base = (cwd or Path.cwd()).absolute()
    spec_path = base / request.eval_spec
    if not spec_path.exists():
        raise ConfigError(
            f"eval spec not found: {request.eval_spec}",
            hint="pass the eval file to export with --eval-spec PATH",
        )
    config = parse_key_values(request.exporter_args, flag="vally export --", collect_repeats=True)
    project, project_root = find_project(spec_path, params=request.params)
    session = Session(project, project_root)
    name = session.resolve_single("exporter", request.exporter, base_dir=base)
    exporter = session.create("exporter", name, config, where="vally export -- key=value")
    loaded = load_evals(
        session,
        project,
        [spec_path],
        request.params,
        provider_spec=request.eval_plugin,
        base=base,
    )
    output_dir = base / request.output_dir
    output_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for item in loaded:
        written.extend(exporter.export(item, output_dir))
    return ExportResult(exporter=name, output_dir=output_dir, written=written)
