"""The checks of one eval file (:func:`lint_eval_file`): its graders and their config, the
executor, constraints, environments, artifacts, stimulus names and scoring weights, each
finding located at its line and column."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from vally import (
    Constraints,
    EnvironmentConfig,
    EvalSpec,
    GraderConfig,
    LoadedEval,
    Positions,
    ProjectConfig,
    SpecSchemaError,
    Stimulus,
    VallyError,
    check_paths,
    did_you_mean,
    find_project,
    format_path,
    load_eval_with_positions,
    needs_llm,
    schema_issues,
    source_root,
)
from vally_authoring.lint.catalogs import GraderCatalog
from vally_authoring.lint.diagnostics import Diagnostic, Severity
from vally_authoring.lint.valid_parts import load_valid_parts


class _Collector:
    def __init__(self, file: str, positions: Positions) -> None:
        self.file = file
        self.positions = positions
        self.items: list[Diagnostic] = []

    def add(
        self,
        code: str,
        severity: Severity,
        path: Sequence[str | int],
        message: str,
        *,
        key: bool = False,
    ) -> None:
        loc = self.positions.location(path, key=key)
        diag = Diagnostic(code, severity, self.file, loc.line, message, loc.column)
        if diag not in self.items:
            self.items.append(diag)


def _check_plugin_config(
    out: _Collector,
    cls: type,
    config: Mapping[str, Any],
    config_path: tuple[str | int, ...],
    raw: Any,
    *,
    code: str,
    label: str,
) -> None:
    model = getattr(cls, "Config", None)
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        return
    extra = model.model_config.get("extra")
    if extra not in ("forbid", "allow"):
        allowed = set(model.model_fields)
        for key in config:
            if str(key) not in allowed:
                message = f"unknown key '{key}' in config of {label}"
                suggestion = did_you_mean(str(key), allowed)
                message += (
                    f"; did you mean '{suggestion}'?"
                    if suggestion
                    else f" (allowed: {', '.join(sorted(allowed)) or 'none'})"
                )
                out.add(code, "error", (*config_path, str(key)), message, key=True)
    try:
        model.model_validate(dict(config))
    except ValidationError as exc:
        data = raw if isinstance(raw, Mapping) else config
        for issue in schema_issues(exc, data, out.positions, model, prefix=config_path):
            text = issue.message
            out.items.append(
                Diagnostic(
                    code, "error", out.file, issue.location.line, f"{label}: {text}",
                    issue.location.column,
                )
            )
    except VallyError as exc:
        out.add(code, "error", config_path, f"{label}: {exc}")


def _check_graders(
    out: _Collector,
    catalog: GraderCatalog,
    graders: Sequence[GraderConfig],
    base: tuple[str | int, ...],
    raw_graders: Any,
) -> list[type | None]:
    known = sorted(set(catalog.known_names()))
    classes: list[type | None] = []
    for index, grader in enumerate(graders):
        path = (*base, "graders", index)
        raw = _raw_at(raw_graders, index, "config")
        if grader.type not in known:
            message = f"unknown grader type '{grader.type}'"
            suggestion = did_you_mean(grader.type, known)
            if suggestion:
                message += f"; did you mean '{suggestion}'?"
            else:
                message += "; load its plugin with --grader-plugin or .vally.yaml plugins.grader"
            out.add("unknown-grader-type", "error", (*path, "type"), message)
            classes.append(None)
            continue
        try:
            cls = catalog.get(grader.type)
        except VallyError as exc:
            out.add(
                "grader-unavailable", "error", (*path, "type"),
                f"grader '{grader.type}' cannot be loaded: {exc.message}",
            )
            classes.append(None)
            continue
        classes.append(cls)
        _check_plugin_config(
            out, cls, grader.config, (*path, "config"), raw,
            code="invalid-grader-config", label=f"grader '{grader.type}'",
        )
    return classes


def _check_executor(
    out: _Collector, catalog: GraderCatalog, spec: EvalSpec, raw: Mapping[str, Any]
) -> None:
    executor = spec.defaults.executor
    if executor is None:
        return
    raw_executor = _raw_at(raw, "defaults", "executor")
    name_path: tuple[str | int, ...] = ("defaults", "executor")
    if isinstance(raw_executor, Mapping):
        name_path = (*name_path, "name")
    known = sorted(set(catalog.known_names()))
    if executor.name not in known:
        message = f"unknown executor '{executor.name}'"
        suggestion = did_you_mean(executor.name, known)
        message += (
            f"; did you mean '{suggestion}'?"
            if suggestion
            else f" (installed: {', '.join(known) or 'none'}); load its plugin with "
            "--executor-plugin or .vally.yaml plugins.executor"
        )
        out.add("unknown-executor", "error", name_path, message)
        return
    try:
        cls = catalog.get(executor.name)
    except VallyError as exc:
        out.add(
            "unknown-executor", "error", name_path,
            f"executor '{executor.name}' cannot be loaded: {exc.message}",
        )
        return
    _check_plugin_config(
        out, cls, executor.config, ("defaults", "executor", "config"),
        _raw_at(raw_executor, "config"),
        code="invalid-executor-config", label=f"executor '{executor.name}'",
    )


def _raw_at(data: Any, *parts: str | int) -> Any:
    current = data
    for part in parts:
        if isinstance(current, list):
            if not (isinstance(part, int) and 0 <= part < len(current)):
                return None
            current = current[part]
        elif isinstance(current, Mapping) and part in current:
            current = current[part]
        else:
            return None
    return current


def _check_constraints(
    out: _Collector, constraints: Constraints | None, base: tuple[str | int, ...]
) -> None:
    if constraints is None:
        return
    path = (*base, "constraints")
    for name in ("max_turns", "max_tokens", "max_tool_calls", "max_duration"):
        value = getattr(constraints, name)
        if value is not None and value < 0:
            out.add(
                "invalid-constraint-value", "error", (*path, name),
                f"{format_path((*path, name))} is negative ({value}); limits must be >= 0",
            )
    for what in ("tools", "skills"):
        expect = getattr(constraints, f"expect_{what}")
        reject = set(getattr(constraints, f"reject_{what}"))
        for index, item in enumerate(expect):
            if item in reject:
                out.add(
                    "invalid-constraint-value", "error", (*path, f"expect_{what}", index),
                    f"'{item}' is in both expect_{what} and reject_{what} of "
                    f"{format_path(path)}; keep it in one",
                )


def _check_environment(
    out: _Collector, env: EnvironmentConfig | str | None, base: tuple[str | int, ...],
    base_dir: Path, key: str, src_root: Path | None = None,
) -> None:
    if not isinstance(env, EnvironmentConfig):
        return
    path = (*base, key)
    for problem in check_paths(env, base_dir, src_root):
        severity: Severity = "error"
        out.add(problem.code, severity, (*path, *problem.path), problem.message)


def _env_key(positions: Positions, base: tuple[str | int, ...]) -> str:
    # The spelling the document used for the environment key at ``base``.
    if (*base, "agent_environment") in positions.table:
        return "agent_environment"
    return "environment"


def _load_for_lint(
    path: Path, project: ProjectConfig | None, cli_params: Mapping[str, str] | None
) -> tuple[tuple[LoadedEval, Positions] | None, list[Diagnostic]]:
    """The loaded spec and its YAML positions, and the ``invalid-spec`` diagnostics of a
    file that does not load. A file with schema errors is still returned without its
    invalid parts (see :mod:`~vally_authoring.lint.valid_parts`), so the other checks
    run on what did validate."""
    try:
        return load_eval_with_positions(path, cli_params=cli_params or {}, project=project), []
    except SpecSchemaError as exc:
        diagnostics = [
            Diagnostic("invalid-spec", "error", issue.location.file, issue.location.line,
                       issue.message, issue.location.column)
            for issue in exc.issues
        ]
        return load_valid_parts(path, cli_params=cli_params or {}, project=project), diagnostics
    except VallyError as exc:
        loc = exc.location
        message = exc.message + (f" ({exc.hint})" if exc.hint else "")
        return None, [
            Diagnostic(
                "invalid-spec", "error", loc.file if loc else str(path),
                loc.line if loc else None, message, loc.column if loc else None,
            )
        ]


def lint_eval_file(
    path: Path,
    catalog: GraderCatalog,
    *,
    project: ProjectConfig | None = None,
    cli_params: Mapping[str, str] | None = None,
    executors: GraderCatalog | None = None,
    project_root: Path | None = None,
) -> list[Diagnostic]:
    """Every diagnostic of one eval file. Load errors become ``invalid-spec`` diagnostics;
    after schema errors the parts of the file that did validate are still checked.

    ``executors`` (optional) enables the ``defaults.executor`` checks. ``project_root``
    (found from the file when not given) bounds ``files[].src``.
    """
    if project_root is None:
        _, project_root = find_project(path.parent)
    found, diagnostics = _load_for_lint(path, project, cli_params)
    if found is None:
        return diagnostics
    loaded, positions = found
    out = _Collector(str(loaded.source), positions)
    out.items.extend(diagnostics)
    _check_loaded(out, loaded, catalog, executors, source_root(path, project_root))
    return sorted(out.items, key=lambda d: (d.line or 0, d.column or 0))


def _check_loaded(
    out: _Collector,
    loaded: LoadedEval,
    catalog: GraderCatalog,
    executors: GraderCatalog | None,
    src_root: Path | None,
) -> None:
    """Every check of a spec that loaded (whole, or without its invalid parts)."""
    spec, raw, positions = loaded.spec, loaded.raw, out.positions
    base_dir = loaded.source.parent
    if executors is not None:
        _check_executor(out, executors, spec, raw)
    root_classes = _check_graders(out, catalog, spec.graders, (), raw.get("graders"))
    _check_constraints(out, spec.constraints, ())
    # A named environment was anchored to .vally.yaml's folder already (absolute paths).
    _check_environment(
        out, spec.environment, (), base_dir, _env_key(positions, ()), src_root
    )
    used_types = {g.type for g in spec.graders}
    seen_names: dict[str, int] = {}
    for index, stimulus in enumerate(spec.stimuli):
        base: tuple[str | int, ...] = ("stimuli", index)
        if stimulus.name in seen_names:
            out.add(
                "duplicate-stimulus-name", "error", (*base, "name"),
                f"stimulus name '{stimulus.name}' is already used by the stimulus on line "
                f"{positions.line(('stimuli', seen_names[stimulus.name], 'name'))}; names "
                "must be unique within a file",
            )
        else:
            seen_names[stimulus.name] = index
        classes = _check_graders(
            out, catalog, stimulus.graders, base, _raw_at(raw, "stimuli", index, "graders")
        )
        used_types.update(g.type for g in stimulus.graders)
        _check_stimulus(out, spec, stimulus, base, [*root_classes, *classes])
        _check_environment(
            out, stimulus.environment, base, base_dir, _env_key(positions, base), src_root
        )
        _check_artifacts(out, stimulus, base)
    _check_weights(out, spec, used_types)


def _check_stimulus(
    out: _Collector,
    spec: EvalSpec,
    stimulus: Stimulus,
    base: tuple[str | int, ...],
    classes: Sequence[type | None],
) -> None:
    """A stimulus's grader types, rubric and constraints."""
    seen_types: dict[str, int] = {g.type: -1 for g in spec.graders}
    for g_index, grader in enumerate(stimulus.graders):
        if grader.type in seen_types:
            first = seen_types[grader.type]
            where = "the eval-level graders" if first < 0 else f"graders[{first}]"
            out.add(
                "duplicate-grader-type-in-stimulus", "warning",
                (*base, "graders", g_index, "type"),
                f"grader type '{grader.type}' appears again in stimulus '{stimulus.name}' "
                f"(also {where}); both share one scoring weight key",
            )
        else:
            seen_types[grader.type] = g_index
    if stimulus.rubric and not any(cls is not None and needs_llm(cls) for cls in classes):
        out.add(
            "rubric-without-llm-judge", "warning", (*base, "rubric"),
            f"stimulus '{stimulus.name}' has a rubric but no LLM judge grader uses it; "
            "add a grader such as '{ type: prompt }'",
            key=True,
        )
    _check_constraints(out, stimulus.constraints, base)


def _check_artifacts(out: _Collector, stimulus: Stimulus, base: tuple[str | int, ...]) -> None:
    """Artifact patterns must stay inside the workspace."""
    for a_index, pattern in enumerate(stimulus.artifacts):
        text = pattern.replace("\\", "/")
        if text.startswith("/") or text == ".." or text.startswith("../") or "/../" in text:
            out.add(
                "path-escape", "error", (*base, "artifacts", a_index),
                f"artifact pattern '{pattern}' leaves the workspace; use a path inside it",
            )


def _check_weights(out: _Collector, spec: EvalSpec, used_types: set[str]) -> None:
    """Every ``scoring.weights`` key must be the type of a grader of the file."""
    for weight_key in spec.scoring.weights:
        if weight_key not in used_types:
            message = f"scoring.weights key '{weight_key}' is not the type of any grader"
            suggestion = did_you_mean(weight_key, used_types)
            if suggestion:
                message += f"; did you mean '{suggestion}'?"
            elif used_types:
                message += f" (grader types used: {', '.join(sorted(used_types))})"
            out.add(
                "invalid-scoring-weight-key", "error", ("scoring", "weights", weight_key),
                message, key=True,
            )

