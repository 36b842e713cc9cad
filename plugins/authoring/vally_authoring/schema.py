"""The JSON Schema of vally's files, for editors: ``eval`` (eval.yaml), ``experiment``,
``project`` (.vally.yaml) and ``promotion`` (promotion rules).

Built from the pydantic models, then completed for editing:

- every property has a description (see :func:`vally_authoring.field_notes.field_description`);
- a ``${NAME}`` param is accepted wherever the loader accepts one in place of a value that
  is not free text (numbers, booleans, durations, choices);
- a grader's ``config`` is checked against the ``Config`` of the grader its ``type`` names,
  an executor's against the executor its ``name`` names, and ``plugin_config`` of
  .vally.yaml against each named reporter, eval provider or shard strategy, for every
  plugin the project's session can load (``if``/``then`` on the name; other names keep a
  free ``config``). Typos in config keys are then flagged by the editor, and their keys
  completed.
"""

from __future__ import annotations

import typing
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from vally_authoring.field_notes import field_description

SCHEMA_KINDS = ("eval", "experiment", "project", "promotion")
"""The file kinds ``vally schema`` describes."""

SCHEMA_FILES = {kind: f"{kind}.schema.json" for kind in SCHEMA_KINDS}
"""The file each kind is written to by ``vally schema --write``."""

PARAM_REFERENCE = {
    "type": "string",
    "pattern": r"^\$\{[A-Za-z_][A-Za-z0-9_.-]*(=[^}]*)?\}$",
    "description": "A ${NAME} or ${NAME=default} param, replaced when the file is read.",
}
"""A whole-value param reference (the loader gives it the YAML type of its value)."""

SHORTHANDS = (("EvalConfig", "executor"), ("ProjectDefaults", "backend"))
"""Fields the loader also accepts as a plain name (``executor: mock``), which the models'
own schema does not show (their validators expand the name)."""

_TITLES = {
    "eval": "vally eval spec (eval.yaml)",
    "experiment": "vally experiment file",
    "project": "vally project file (.vally.yaml)",
    "promotion": "vally promotion rules (vally compare --rules)",
}


def _root_model(kind: str) -> type[BaseModel]:
    from vally import EvalSpec, ExperimentFile, ProjectConfig, PromotionRules

    models: dict[str, type[BaseModel]] = {
        "eval": EvalSpec,
        "experiment": ExperimentFile,
        "project": ProjectConfig,
        "promotion": PromotionRules,
    }
    return models[kind]


@dataclass
class PluginConfigs:
    """The ``Config`` models of the plugins a session can load, by kind and name."""

    by_kind: dict[str, dict[str, type[BaseModel]]] = field(default_factory=dict)

    @classmethod
    def from_project(cls, start: Path) -> PluginConfigs:
        """The plugins of the project found from ``start`` (entry points and the project
        file's ``plugins:``); a plugin that fails to load is left out."""
        from vally import Session, VallyError, find_project

        try:
            project, root = find_project(start)
            session = Session(project, root)
        except VallyError:
            return cls()
        found = cls()
        for kind in ("grader", "executor", "reporter", "eval_provider", "shard_strategy"):
            models: dict[str, type[BaseModel]] = {}
            for name in sorted(session.known_names(kind)):
                try:
                    config = getattr(session.plugin_class(kind, name), "Config", None)
                    if isinstance(config, type) and issubclass(config, BaseModel):
                        config.model_json_schema()  # one that cannot be described is left out
                        models[name] = config
                except Exception:  # a broken plugin must not break the schema
                    continue
            found.by_kind[kind] = models
        return found


def json_schema(kind: str, plugins: PluginConfigs | None = None) -> dict[str, Any]:
    """The JSON Schema of one file kind: ``eval``, ``experiment`` or ``project``, with the
    config schemas of ``plugins`` (none when not given)."""
    root = _root_model(kind)
    schema = root.model_json_schema()
    defs: dict[str, Any] = schema.setdefault("$defs", {})
    models = _models_by_name(root)
    _describe(schema, root)
    for name, body in defs.items():
        if name in models:
            _describe(body, models[name])
    plugins = plugins or PluginConfigs()
    _select_configs(defs, "GraderConfig", "type", "grader", plugins)
    _select_configs(defs, "ExecutorRef", "name", "executor", plugins)
    if kind == "project":
        _plugin_config_section(schema, plugins)
    for model_name, key in SHORTHANDS:
        prop = defs.get(model_name, {}).get("properties", {}).get(key)
        if prop is not None and "anyOf" in prop:
            prop["anyOf"].insert(1, {"type": "string", "description": "A plugin name."})
    _accept_params(schema)
    for body in defs.values():
        _accept_params(body)
    if not defs:
        del schema["$defs"]
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = _TITLES[kind]
    return schema


# ------------------------------------------------------------------ descriptions


def _nested(tp: Any) -> Iterator[type[BaseModel]]:
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        yield tp
        return
    for arg in typing.get_args(tp):
        yield from _nested(arg)


def _models_by_name(root: type[BaseModel]) -> dict[str, type[BaseModel]]:
    """Every model reachable from ``root``'s fields, by class name (the ``$defs`` keys)."""
    found: dict[str, type[BaseModel]] = {}
    stack = [root]
    while stack:
        model = stack.pop()
        if model.__name__ in found:
            continue
        found[model.__name__] = model
        for info in model.model_fields.values():
            stack.extend(_nested(info.annotation))
    return found


def _describe(body: dict[str, Any], model: type[BaseModel]) -> None:
    """Give each property of ``body`` (the schema of ``model``) its field's description."""
    properties = body.get("properties", {})
    for name, info in model.model_fields.items():
        prop = properties.get(info.alias or name)
        if prop is None or prop.get("description"):
            continue
        text = field_description(model, name)
        if text:
            prop["description"] = text


# ------------------------------------------------------------------ params


def _is_free_text(schema: dict[str, Any]) -> bool:
    if schema.get("type") == "string" and not ({"pattern", "enum", "format"} & set(schema)):
        return True
    return any(_is_free_text(s) for s in schema.get("anyOf", []) if isinstance(s, dict))


def _is_structure(schema: dict[str, Any]) -> bool:
    if "$ref" in schema or schema.get("type") in ("object", "array"):
        return True
    branches = [s for s in schema.get("anyOf", []) if isinstance(s, dict)]
    typed = [s for s in branches if s.get("type") != "null"]
    return bool(typed) and all(_is_structure(s) for s in typed)


def _accept_params(body: dict[str, Any]) -> None:
    """Let each property that is a scalar but not free text also be a ``${NAME}`` param."""
    for name, prop in list(body.get("properties", {}).items()):
        if not isinstance(prop, dict) or _is_free_text(prop) or _is_structure(prop):
            continue
        meta = {k: prop.pop(k) for k in ("description", "title", "default") if k in prop}
        body["properties"][name] = {**meta, "anyOf": [prop, PARAM_REFERENCE]}


# ------------------------------------------------------------------ plugin configs


def _add_config_defs(defs: dict[str, Any], prefix: str, model: type[BaseModel]) -> str:
    """Put ``model``'s schema (and its nested models) into ``defs`` under ``prefix``;
    return the reference to it."""
    sub = model.model_json_schema(ref_template="#/$defs/" + prefix + ".{model}")
    nested = sub.pop("$defs", {})
    models = _models_by_name(model)
    for name, body in nested.items():
        if name in models:
            _describe(body, models[name])
        defs[f"{prefix}.{name}"] = body
    _describe(sub, model)
    defs[prefix] = sub
    return f"#/$defs/{prefix}"


def _select_configs(
    defs: dict[str, Any], model_name: str, key: str, kind: str, plugins: PluginConfigs
) -> None:
    """In ``defs[model_name]``, check ``config`` against the plugin ``key`` names."""
    body = defs.get(model_name)
    configs = plugins.by_kind.get(kind, {})
    if body is None or not configs:
        return
    rules = []
    for name, model in configs.items():
        ref = _add_config_defs(defs, f"{kind}.{name}", model)
        rules.append(
            {
                "if": {"properties": {key: {"const": name}}, "required": [key]},
                "then": {"properties": {"config": {"$ref": ref}}},
            }
        )
    body["allOf"] = rules
    prop = body["properties"][key]
    prop["examples"] = sorted(configs)
    prop["description"] = (
        prop.get("description") or f"The {kind}'s name."
    ) + f" Installed: {', '.join(sorted(configs))}."


def _plugin_config_section(schema: dict[str, Any], plugins: PluginConfigs) -> None:
    """Describe ``plugin_config`` of .vally.yaml by kind and plugin name."""
    from vally import CONFIGURABLE_KINDS

    prop = schema.get("properties", {}).get("plugin_config")
    if prop is None:
        return
    defs = schema.setdefault("$defs", {})
    kinds: dict[str, Any] = {}
    for kind in CONFIGURABLE_KINDS:
        names = {
            name: {"$ref": _add_config_defs(defs, f"{kind}.{name}", model)}
            for name, model in plugins.by_kind.get(kind, {}).items()
        }
        kinds[kind] = {"type": "object", "properties": names}
    described = {k: v for k, v in prop.items() if k in ("description", "title", "default")}
    schema["properties"]["plugin_config"] = {
        **described,
        "type": "object",
        "properties": kinds,
        "additionalProperties": False,
    }


def write_schemas(folder: Path, plugins: PluginConfigs) -> list[Path]:
    """Write every kind's schema into ``folder`` (see :data:`SCHEMA_FILES`); return the
    paths written.

    Raises:
        OutputError: The folder or a file cannot be written.
    """
    import json

    from vally import OutputError

    written: list[Path] = []
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for kind, name in SCHEMA_FILES.items():
            path = folder / name
            tmp = path.with_name(name + ".tmp")
            tmp.write_text(json.dumps(json_schema(kind, plugins), indent=2) + "\n", "utf-8")
            tmp.replace(path)
            written.append(path)
    except OSError as exc:
        raise OutputError(f"cannot write the schemas to {folder}: {exc.strerror or exc}") from None
    return written
