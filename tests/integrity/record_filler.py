"""Records with every field set, built by walking the pydantic models, and with every
optional field unset; and the check that a record sets every field of every model it holds.

:func:`filled` walks a model's fields and gives each a valid value of its type, recursively
(a model, a list of one, a map of one, a non-default choice of a ``Literal``), with
:data:`OVERRIDES` for the fields whose values are constrained beyond their type. A field
added to a record model later is filled without changing this module, and
:func:`unset_fields` names any field the filler left empty, so a test over these records
cannot silently cover less than the models hold.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable, Iterator
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ByteSize

from vally.models.durations import Duration
from vally.models.records import SCHEMA_VERSION
from vally.models.spec import McpServerConfig
from vally.models.trajectory import TrajectoryEvent

Override = Callable[[], Any]

TIMESTAMP = "2026-03-04T05:06:07.089Z"
TIMES = {
    "timestamp": TIMESTAMP,
    "started_at": TIMESTAMP,
    "completed_at": "2026-03-04T05:06:09.089Z",
}
"""Times by field name (ISO 8601 UTC, as vally writes them), in every model."""

OVERRIDES: dict[tuple[str, str], Override] = {
    # the schema this vally writes (readers refuse versions they do not know)
    ("TrialResultRecord", "schema_version"): lambda: SCHEMA_VERSION,
    ("RunSummaryRecord", "schema_version"): lambda: SCHEMA_VERSION,
    # every event type, each with every field set
    ("Trajectory", "events"): lambda: [filled(t) for t in _event_types()],
    # a stimulus has a prompt or turns, never both: the full one has turns
    ("Stimulus", "prompt"): lambda: None,
    # an MCP server is stdio (command, args, env, cwd) or http (url, headers): one of each
    ("EnvironmentConfig", "mcpServers"): lambda: {
        "local": filled_with(McpServerConfig, type="stdio", url=None, headers={}),
        "remote": filled_with(
            McpServerConfig,
            type="http",
            url="http://127.0.0.1:9/mcp",
            command=None,
            args=[],
            env={},
            cwd=None,
        ),
    },
    # scores lie in [0, 1]; a pointer, a path and a digest have their forms
    ("GraderResult", "score"): lambda: 0.75,
    ("GradeResult", "score"): lambda: 0.75,
    ("GradeResult", "threshold"): lambda: 0.5,
    ("OffloadedText", "pointer"): lambda: "/trajectory/output",
    ("OffloadedText", "path"): lambda: "trials/offloaded/output.txt",
    ("OffloadedText", "sha256"): lambda: "0" * 64,
    ("ExperimentBlock", "shard"): lambda: "1/2",
    # a trial that ran (the other statuses are passed over by graders)
    ("TrialResultRecord", "status"): lambda: "success",
    ("FileEntry", "src"): lambda: "fixtures/input.txt",
    ("FileEntry", "dest"): lambda: "input.txt",
}
"""Values of the fields whose type allows values their validators or readers refuse."""

_FILLING: list[type[BaseModel]] = []
"""The models being filled, outermost first (to stop at the second level of a recursion)."""
_ALTERNATE: list[bool] = [False]
"""Whether the filling in progress takes the alternative choices (see :func:`filled`)."""


def _event_types() -> list[type[BaseModel]]:
    union = get_args(TrajectoryEvent)[0]
    return list(get_args(union))


def _unwrap(annotation: Any) -> Any:
    while get_origin(annotation) is Annotated:
        if annotation == Duration:
            return annotation
        annotation = get_args(annotation)[0]
    return annotation


def _is_union(annotation: Any) -> bool:
    return get_origin(annotation) in (Union, types.UnionType)


def _value(annotation: Any, owner: str, name: str, default: Any) -> Any:
    """A valid, set value of ``annotation`` (a JSON-like value the model validates)."""
    annotation = _unwrap(annotation)
    if annotation == Duration:
        return "30s"
    if annotation is ByteSize:
        return 1024
    if _is_union(annotation):
        choices = [a for a in get_args(annotation) if a is not type(None)]
        choice = choices[-1] if _ALTERNATE[-1] else choices[0]
        return _value(choice, owner, name, default)
    origin = get_origin(annotation)
    if origin is Literal:
        values = get_args(annotation)
        others = [v for v in values if v != default]
        if not others:
            return values[0]
        return others[0] if _ALTERNATE[-1] else others[-1]
    if origin is list:
        (item,) = get_args(annotation) or (Any,)
        if _unwrap(item) in _FILLING[:-1]:  # a recursive model (grader details): one level
            return []
        return [_value(item, owner, name, None)]
    if origin is dict:
        _key, item = get_args(annotation) or (str, Any)
        return {f"{name}-key": _value(item, owner, name, None)}
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return filled(annotation)
    if annotation is bool:
        return not default if isinstance(default, bool) else True
    if annotation is int:
        return 7
    if annotation is float:
        return 0.25
    if annotation is str:
        return f"{owner}.{name}"
    if annotation is Any or annotation is object:
        return {"anyKey": [1, "two", None]}
    raise TypeError(f"the filler has no value for {owner}.{name}: {annotation!r}")


def filled(model: type[BaseModel], *, alternate: bool | None = None) -> dict[str, Any]:
    """Every field of ``model`` set (as a dict of field names to JSON-like values).

    Args:
        model: The model.
        alternate: Take the last type of each union and the first other choice of each
            ``Literal`` instead of the first and the last (default: as the enclosing call).
    """
    _FILLING.append(model)
    _ALTERNATE.append(_ALTERNATE[-1] if alternate is None else alternate)
    try:
        return _filled(model)
    finally:
        _FILLING.pop()
        _ALTERNATE.pop()


def _filled(model: type[BaseModel]) -> dict[str, Any]:
    hints = typing.get_type_hints(model, include_extras=True)
    data: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        override = OVERRIDES.get((model.__name__, name))
        if override is not None:
            data[name] = override()
            continue
        if name in TIMES:
            data[name] = TIMES[name]
            continue
        default = None if info.is_required() else info.get_default(call_default_factory=True)
        data[name] = _value(hints[name], model.__name__, name, default)
    return data


def filled_with(model: type[BaseModel], **values: Any) -> dict[str, Any]:
    """Every field of ``model`` set, then ``values`` over them."""
    return {**filled(model), **values}


def _is_set(value: Any) -> bool:
    return value is not None and value != [] and value != {} and value != ""


def walk(model: BaseModel) -> Iterator[BaseModel]:
    """``model`` and every model it holds, at any depth."""
    yield model
    for name in type(model).model_fields:
        yield from _walk_value(getattr(model, name))


def _walk_value(value: Any) -> Iterator[BaseModel]:
    if isinstance(value, BaseModel):
        yield from walk(value)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _walk_value(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _walk_value(item)


def reachable_models(model: type[BaseModel]) -> set[type[BaseModel]]:
    """Every model class ``model``'s fields can hold, at any depth (``model`` included)."""
    found: set[type[BaseModel]] = set()

    def visit(annotation: Any) -> None:
        annotation = _unwrap(annotation)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            if annotation in found:
                return
            found.add(annotation)
            for hint in typing.get_type_hints(annotation, include_extras=True).values():
                visit(hint)
            return
        for arg in get_args(annotation):
            visit(arg)

    visit(model)
    return found


def unset_fields(*records: BaseModel) -> set[str]:
    """``Model.field`` of every field of every model the records' types can hold that no
    instance in ``records`` sets (None, empty, or a model never built at all)."""
    classes: set[type[BaseModel]] = set()
    for record in records:
        classes |= reachable_models(type(record))
    seen: dict[type[BaseModel], set[str]] = {c: set() for c in classes}
    for record in records:
        for model in walk(record):
            for name in type(model).model_fields:
                if _is_set(getattr(model, name)):
                    seen.setdefault(type(model), set()).add(name)
    return {
        f"{cls.__name__}.{name}"
        for cls in classes
        for name in cls.model_fields
        if name not in seen[cls]
    }


MINIMAL_OVERRIDES: dict[tuple[str, str], Override] = {
    ("Stimulus", "prompt"): lambda: "Say hello.",
}
"""Values of the optional fields a minimal record cannot leave unset."""


def minimal(model: type[BaseModel]) -> dict[str, Any]:
    """Only the required fields of ``model`` (None where None is allowed), recursively."""
    hints = typing.get_type_hints(model, include_extras=True)
    data: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        key = (model.__name__, name)
        if key in MINIMAL_OVERRIDES:
            data[name] = MINIMAL_OVERRIDES[key]()
            continue
        override = OVERRIDES.get(key)
        if not info.is_required():
            continue
        annotation = _unwrap(hints[name])
        if _is_union(annotation) and type(None) in get_args(annotation):
            data[name] = None
        elif isinstance(annotation, type) and issubclass(annotation, BaseModel):
            data[name] = minimal(annotation)
        elif override is not None:
            data[name] = override()
        elif name in TIMES:
            data[name] = TIMES[name]
        else:
            data[name] = _value(annotation, model.__name__, name, None)
    return data
