"""Loading vally's files: ``.vally.yaml``, eval specs and experiment files.

This is the public loading API the rest of vally uses:

* :func:`find_project` / :func:`load_project`: the project file and its root;
* :func:`load_eval_file`: one eval spec, params resolved, validated, named environment resolved;
* :func:`load_experiment_file`: an experiment file (validation only);
* :func:`discover_eval_files` / :func:`select_suite`: which eval files a run covers;
* :func:`stimulus_tags`, :func:`matches_tag_filter`, :func:`parse_tag_flags`: tag selection;
* environments (:mod:`vally.specs.environments`): the effective environment of one stimulus
  and path confinement used by setup and lint.

Every error is a :class:`~vally.errors.VallyError` that names the file, line and column.
Top-level keys starting with ``x-`` are ignored in every file (a place for YAML anchors).
"""

from __future__ import annotations

import fnmatch
import glob
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

import yaml

from vally.contracts.protocols import LoadedEval
from vally.errors import ConfigError, SchemaError, SourceLocation
from vally.models.project import ProjectConfig
from vally.models.spec import EnvironmentConfig, EvalSpec, Stimulus
from vally.specs.environments import anchor_environment, named_environment
from vally.specs.params import (
    ParamLayer,
    ParamResolver,
    eval_param_files,
    params_from_mapping,
    read_param_file,
)
from vally.specs.schema_errors import SchemaIssue, SpecSchemaError, did_you_mean, validate_model
from vally.specs.yaml_stream import streamed_document
from vally.specs.yamlio import (
    Positions,
    ScalarHook,
    compose,
    construct,
    document_from_node,
    read_text,
    top_level_value,
)

if TYPE_CHECKING:  # an experiment's models are loaded only by experiments
    from vally.models.experiment import ExperimentFile

PROJECT_FILENAMES = (".vally.yaml", ".vally.yml")
"""Names of the project file, searched upward from the working directory."""

DEFAULT_EVAL_FILENAMES = ("eval.yaml", "eval.yml")
"""Eval files whose name falls back to their folder's name."""

SKIPPED_DIRS = frozenset({".git", "node_modules", "__pycache__", ".venv", ".tox"})
"""Folders never searched for eval files."""

_NO_PARAMS: Mapping[str, str] = {}


# --------------------------------------------------------------------------- project


def find_project(
    start: Path, *, params: Mapping[str, str] = _NO_PARAMS
) -> tuple[ProjectConfig, Path | None]:
    """Walk up from ``start`` to the first folder holding ``.vally.yaml``.

    Returns:
        The loaded project and its root folder, or a default :class:`ProjectConfig` and
        ``None`` when no project file exists up to the filesystem root.
    """
    current = start.absolute()
    if current.is_file():
        current = current.parent
    for folder in (current, *current.parents):
        for name in PROJECT_FILENAMES:
            candidate = folder / name
            if candidate.is_file():
                return load_project(candidate, params), folder
    return ProjectConfig(), None


def load_project(path: Path, params: Mapping[str, str] = _NO_PARAMS) -> ProjectConfig:
    """Load a ``.vally.yaml``.

    Params (``${NAME}``) resolve from ``params`` (the CLI), then the file's own ``params:``
    map, then inline defaults. Paths inside ``environments`` (skills, ``files[].src``,
    ``git.source``) are made absolute against the file's folder, so an eval that names an
    environment gets paths relative to the project file that declared them.

    Raises:
        ConfigError: Unreadable file, invalid YAML, unresolved param or schema error.
    """
    path = path.absolute()
    file = str(path)
    root = compose(read_text(path), file)
    own = _inline_params(root, file)
    resolver = ParamResolver([ParamLayer("--param", params), ParamLayer(".vally.yaml params", own)])
    doc = document_from_node(root, path, scalar_hook=resolver.scalar_hook(file))
    data = {} if doc.data is None else doc.data
    _require_mapping(data, doc.positions, "the project file .vally.yaml")
    project = validate_model(ProjectConfig, drop_extension_keys(data), doc.positions)
    if project.environments:
        anchored = {
            name: anchor_environment(env, path.parent) for name, env in project.environments.items()
        }
        project = project.model_copy(update={"environments": anchored})
    return project


# --------------------------------------------------------------------------- eval files


def load_eval_file(
    path: Path,
    *,
    cli_params: Mapping[str, str] = _NO_PARAMS,
    project: ProjectConfig | None = None,
) -> LoadedEval:
    """Load, param-resolve and validate one eval spec.

    * Params resolve as :mod:`vally.specs.params` describes (``--param`` > eval param files and the
      spec's ``params:`` > ``.vally.yaml`` params > inline default).
    * A spec without ``name`` is named after its folder (``evals/auth/eval.yaml`` -> ``auth``),
      or after the file when it is not called ``eval.yaml``/``eval.yml``
      (``auth.eval.yaml`` -> ``auth``, ``smoke.yaml`` -> ``smoke``).
    * ``environment: <name>`` is replaced by that environment of ``.vally.yaml``, so
      ``spec.environment`` is an :class:`EnvironmentConfig` or ``None`` afterwards.
    * ``raw`` is the resolved document with the newer spellings (``defaults``,
      ``environment``), the default name and the named environment filled in.

    Args:
        path: The eval file.
        cli_params: ``--param`` values (highest precedence).
        project: The project; found by walking up from the eval file when ``None``.

    Raises:
        ConfigError: Any problem, with ``file:line:column``.
    """
    loaded, _ = load_eval_with_positions(path, cli_params=cli_params, project=project)
    return loaded


def load_eval_with_positions(
    path: Path,
    *,
    cli_params: Mapping[str, str] = _NO_PARAMS,
    project: ProjectConfig | None = None,
) -> tuple[LoadedEval, Positions]:
    """:func:`load_eval_file`, also returning node positions (for lint diagnostics)."""
    path, project, data, positions = read_eval_data(path, cli_params=cli_params, project=project)
    spec = validate_model(EvalSpec, data, positions)
    return finish_eval(path, spec, data, positions, project), positions


def read_eval_data(
    path: Path,
    *,
    cli_params: Mapping[str, str] = _NO_PARAMS,
    project: ProjectConfig | None = None,
) -> tuple[Path, ProjectConfig, dict[str, Any], Positions]:
    """An eval file read up to (not including) schema validation: its normalized path, the
    project, the document with params resolved and ``x-`` keys dropped, and its positions.

    Raises:
        ConfigError: The file cannot be read or parsed, a param does not resolve, the
            document is empty or not a mapping, or one field is spelled both ways.
    """
    path = Path(os.path.normpath(path.absolute()))
    if project is None:
        project, _ = find_project(path.parent, params=cli_params)
    file = str(path)
    text = read_text(path)
    params = project.params

    def hook_for(root: yaml.Node | None) -> ScalarHook:
        layers = [ParamLayer("--param", cli_params)]
        for param_file in eval_param_files(path):
            layers.append(ParamLayer(f"param file {param_file.name}", read_param_file(param_file)))
        layers.append(ParamLayer("spec params", _inline_params(root, file)))
        layers.append(ParamLayer(".vally.yaml params", params))
        return ParamResolver(layers).scalar_hook(file)

    # the stimuli composed one at a time; the usual way when that cannot be (and for errors)
    doc = streamed_document(text, path, hook_for)
    if doc is None:
        root = compose(text, file)
        doc = document_from_node(root, path, scalar_hook=hook_for(root))
    positions = doc.positions
    if doc.data is None:
        raise SchemaError(
            "the eval file is empty; an eval spec needs at least 'stimuli'",
            location=SourceLocation(file, 1, 1),
        )
    _require_mapping(doc.data, positions, "an eval spec")
    data: dict[str, Any] = drop_extension_keys(doc.data)
    _check_spellings(data, positions)
    if data.get("name") is None:
        data["name"] = default_eval_name(path)
    return path, project, data, positions


def finish_eval(
    path: Path,
    spec: EvalSpec,
    data: Mapping[str, Any],
    positions: Positions,
    project: ProjectConfig,
) -> LoadedEval:
    """The loaded eval of a validated ``spec``: a named environment resolved from
    ``.vally.yaml``, and the raw document with today's spellings.

    Raises:
        ConfigError: The spec names an environment ``.vally.yaml`` does not define.
    """
    if isinstance(spec.environment, str):
        env_key = "environment" if "environment" in data else "agent_environment"
        env = named_environment(spec.environment, project, location=positions.location((env_key,)))
        spec = spec.model_copy(update={"environment": env})
    return LoadedEval(spec=spec, source=path, raw=_normalized_raw(data, spec))


def drop_extension_keys(data: Mapping[str, Any]) -> dict[str, Any]:
    """The document without top-level ``x-...`` keys: a place for YAML anchors
    (``x-common: &common ...``) that vally ignores, as docker-compose does."""
    return {k: v for k, v in data.items() if not (isinstance(k, str) and k.startswith("x-"))}


def _check_spellings(data: Mapping[str, Any], positions: Positions) -> None:
    """Both spellings of one field in one place is an error located at the older one."""
    places: list[tuple[tuple[str | int, ...], Any]] = [((), data)]
    stimuli = data.get("stimuli")
    if isinstance(stimuli, list):
        places += [(("stimuli", i), s) for i, s in enumerate(stimuli)]
    for path, node in places:
        if not isinstance(node, Mapping):
            continue
        pairs = [("agent_environment", "environment")]
        if not path:
            pairs.append(("config", "defaults"))
        for old, new in pairs:
            if old in node and new in node:
                raise SpecSchemaError(
                    [
                        SchemaIssue(
                            positions.location((*path, old), key=True),
                            ".".join(str(p) for p in (*path, old)),
                            f"'{old}' and '{new}' are two names for one field; keep only '{new}'",
                        )
                    ]
                )


def default_eval_name(path: Path) -> str:
    """The name of a spec that has none: its folder for ``eval.yaml``, else the file stem
    without ``.yaml``/``.yml`` and a trailing ``.eval``."""
    if path.name in DEFAULT_EVAL_FILENAMES:
        return path.absolute().parent.name or "eval"
    name = path.name
    for suffix in (".yaml", ".yml", ".json"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    if name.endswith(".eval") and len(name) > len(".eval"):
        name = name[: -len(".eval")]
    return name


def _normalized_raw(data: Mapping[str, Any], spec: EvalSpec) -> dict[str, Any]:
    raw = dict(data)  # the loader's own data, used by nobody else: renamed in place
    _rename(raw, "config", "defaults")
    _rename(raw, "agent_environment", "environment")
    if isinstance(raw.get("environment"), str) and isinstance(spec.environment, EnvironmentConfig):
        raw["environment"] = spec.environment.model_dump(mode="json", exclude_defaults=True)
    for stimulus in raw.get("stimuli") or []:
        if isinstance(stimulus, dict):
            _rename(stimulus, "agent_environment", "environment")
    return raw


def _rename(data: dict[str, Any], old: str, new: str) -> None:
    if old in data and new not in data:
        data[new] = data.pop(old)


def _inline_params(root: Any, file: str) -> dict[str, str]:
    node = top_level_value(root, "params")
    if node is None:
        return {}
    mark = node.start_mark
    return params_from_mapping(
        construct(node, file),
        file=file,
        where="params",
        location=SourceLocation(file, mark.line + 1, mark.column + 1),
    )


def _require_mapping(data: Any, positions: Positions, what: str) -> None:
    if not isinstance(data, Mapping):
        raise SpecSchemaError(
            [
                SchemaIssue(
                    positions.location(()),
                    "(document)",
                    f"{what} must be a YAML mapping (key: value), got {type(data).__name__}",
                )
            ]
        )


# --------------------------------------------------------------------------- experiments


def load_experiment_file(
    path: Path,
    *,
    cli_params: Mapping[str, str] = _NO_PARAMS,
    project: ProjectConfig | None = None,
) -> ExperimentFile:
    """Load and validate an experiment file (params: ``--param``, then ``.vally.yaml``
    params when ``project`` is given, then inline defaults).

    Raises:
        ConfigError: Any problem, with ``file:line:column``.
    """
    from vally.models.experiment import ExperimentFile

    path = path.absolute()
    layers = [ParamLayer("--param", cli_params)]
    if project is not None:
        layers.append(ParamLayer(".vally.yaml params", project.params))
    resolver = ParamResolver(layers)
    file = str(path)
    doc = document_from_node(
        compose(read_text(path), file), path, scalar_hook=resolver.scalar_hook(file)
    )
    if doc.data is None:
        raise SchemaError(
            "the experiment file is empty; it needs 'name', 'evals', 'baseline' and "
            "'variants' or 'matrix'",
            location=SourceLocation(file, 1, 1),
        )
    _require_mapping(doc.data, doc.positions, "an experiment file")
    return validate_model(ExperimentFile, drop_extension_keys(doc.data), doc.positions)


# --------------------------------------------------------------------------- discovery


def _has_glob(pattern: str) -> bool:
    return any(ch in pattern for ch in "*?[")


def _name_matches(rel: PurePosixPath, patterns: Sequence[str]) -> bool:
    name = rel.name
    if name == "params.yaml" or name.endswith((".params.yaml", ".params.yml")):
        return False
    for pattern in patterns:
        if "/" in pattern:
            if rel.match(pattern):
                return True
        elif fnmatch.fnmatchcase(name, pattern):
            return True
    return False


def _walk_eval_files(folder: Path, patterns: Sequence[str]) -> list[Path]:
    found: list[Path] = []
    for current, dirs, files in os.walk(folder, followlinks=False):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS)
        for name in files:
            full = Path(current) / name
            rel = PurePosixPath(full.relative_to(folder).as_posix())
            if _name_matches(rel, patterns):
                found.append(full)
    return found


def _expand(root: Path, entry: str) -> list[Path]:
    """Folders or files named by one ``paths.evals``/suite entry (a path or a glob)."""
    entry = entry.rstrip("/") or "."
    target = Path(entry) if Path(entry).is_absolute() else root / entry
    if _has_glob(entry):
        if Path(entry).is_absolute():
            return [Path(p) for p in sorted(glob.glob(entry, recursive=True))]
        # root_dir keeps glob characters in the root's own path literal
        return [root / p for p in sorted(glob.glob(entry, root_dir=root, recursive=True))]
    return [target] if target.exists() else []


def _files_for(root: Path, entries: Iterable[str], patterns: Sequence[str]) -> list[Path]:
    found: set[Path] = set()
    for entry in entries:
        for target in _expand(root, entry):
            if target.is_dir():
                found.update(_walk_eval_files(target, patterns))
            elif target.is_file():
                found.add(target)
    return sorted(Path(os.path.normpath(p.absolute())) for p in found)


def eval_files_in(
    root: Path, entries: Iterable[str], patterns: Sequence[str] = DEFAULT_EVAL_FILENAMES
) -> list[Path]:
    """Eval files named by ``entries`` (files, folders or globs relative to ``root``): files
    are taken as they are, folders are searched for names matching ``patterns``."""
    return _files_for(root, entries, patterns)


def discover_eval_files(project: ProjectConfig, root: Path) -> list[Path]:
    """Every eval file under ``paths.evals`` (folders or globs, relative to ``root``) whose
    name matches ``paths.evalFilenames`` (globs; a pattern with ``/`` matches the path below
    the evals folder). Files named directly are taken whatever their name. Sorted, absolute;
    ``.git``, ``node_modules`` and param files are skipped; missing folders give nothing."""
    return _files_for(root, project.paths.evals, project.paths.evalFilenames)


def select_suite(
    project: ProjectConfig, root: Path, suite_name: str
) -> tuple[list[Path], dict[str, list[str]] | None]:
    """The eval files and tag filter of suite ``suite_name``.

    ``evals`` globs/folders (relative to ``root``) narrow the files; without them every
    discovered eval file is used. The filter is ``None`` when the suite has none.

    Raises:
        ConfigError: Unknown suite (the message lists the defined ones), or a suite whose
            ``evals`` match no file.
    """
    suite = project.suites.get(suite_name)
    if suite is None:
        known = sorted(project.suites)
        if not known:
            raise ConfigError(
                f"unknown suite '{suite_name}': .vally.yaml defines no suites",
                hint="add one under 'suites:' in .vally.yaml",
            )
        suggestion = did_you_mean(suite_name, known)
        raise ConfigError(
            f"unknown suite '{suite_name}'; defined suites: {', '.join(known)}",
            hint=f"did you mean '{suggestion}'?" if suggestion else None,
        )
    if suite.evals is not None:
        files = _files_for(root, suite.evals, project.paths.evalFilenames)
        if not files:
            raise ConfigError(
                f"suite '{suite_name}' matches no eval files "
                f"(evals: {', '.join(suite.evals)}, relative to {root})"
            )
    else:
        files = discover_eval_files(project, root)
    tag_filter = None if suite.filter is None else {k: list(v) for k, v in suite.filter.items()}
    return files, tag_filter


# --------------------------------------------------------------------------- tags


def stimulus_tags(spec: EvalSpec, stimulus: Stimulus) -> dict[str, str]:
    """The stimulus's effective tags: the eval's tags overridden key by key by its own."""
    return {**spec.tags, **stimulus.tags}


def matches_tag_filter(tags: Mapping[str, str], tag_filter: Mapping[str, Sequence[str]]) -> bool:
    """AND across keys, OR within a key's values; an empty filter matches everything."""
    return all(tags.get(key) in set(values) for key, values in tag_filter.items())


def parse_tag_flags(items: Sequence[str]) -> dict[str, list[str]]:
    """Parse ``--tag`` flags: ``["area=auth,db", "p=p0"]`` -> ``{"area": ["auth", "db"],
    "p": ["p0"]}``. A repeated key adds values.

    Raises:
        ConfigError: An item without ``=``, an empty key or no value.
    """
    out: dict[str, list[str]] = {}
    for item in items:
        key, sep, values = item.partition("=")
        key = key.strip()
        parts = [v.strip() for v in values.split(",") if v.strip()]
        if not sep or not key or not parts:
            raise ConfigError(
                f"--tag expects KEY=VALUE[,VALUE...], got {item!r}",
                hint="for example --tag priority=p0,p1 --tag area=auth",
            )
        bucket = out.setdefault(key, [])
        bucket.extend(p for p in parts if p not in bucket)
    return out
