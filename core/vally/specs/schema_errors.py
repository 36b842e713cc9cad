"""Schema errors that say where: a pydantic :class:`~pydantic.ValidationError` turned into a
:class:`SpecSchemaError` whose issues point at the offending node (``file:line:column``,
the field path) and suggest the closest field for an unknown key."""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from vally.errors import SchemaError, SourceLocation
from vally.specs.yamlio import (
    FIELD_ALIASES,
    ModelT,
    PathKey,
    Positions,
    format_path,
)


@dataclass(frozen=True)
class SchemaIssue:
    """One problem found while validating a document against its model."""

    location: SourceLocation
    path: str
    message: str

    def render(self) -> str:
        """``file:line:column: message``."""
        return f"{self.location}: {self.message}"


class SpecSchemaError(SchemaError):
    """A :class:`SchemaError` that keeps every issue found (the first gives the location)."""

    def __init__(self, issues: Sequence[SchemaIssue], *, hint: str | None = None) -> None:
        self.issues = list(issues)
        first = self.issues[0]
        message = first.message
        if len(self.issues) > 1:
            rest = "\n".join(f"  {issue.render()}" for issue in self.issues[1:])
            message += f"\n{len(self.issues) - 1} more problem(s):\n{rest}"
        super().__init__(message, location=first.location, hint=hint)


def _unwrap(tp: Any) -> list[Any]:
    """Flatten Optional/Union/Annotated into the member types."""
    origin = get_origin(tp)
    if origin is typing.Annotated:
        return _unwrap(get_args(tp)[0])
    if origin is Union or origin is types.UnionType:
        out: list[Any] = []
        for arg in get_args(tp):
            out.extend(_unwrap(arg))
        return out
    return [tp]


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel)


def _model_candidates(model: type[BaseModel], path: Sequence[str | int]) -> list[type[BaseModel]]:
    """The model classes that could describe the node at ``path`` (pydantic loc)."""
    current: list[Any] = [model]
    for part in path:
        nxt: list[Any] = []
        names = {getattr(c, "__name__", "") for c in current}
        if isinstance(part, str) and part in names and part not in _field_names(current):
            # a union member tag in the loc: keep only that member
            current = [c for c in current if getattr(c, "__name__", "") == part]
            continue
        for cand in current:
            for tp in _unwrap(cand):
                origin = get_origin(tp)
                if _is_model(tp):
                    fields = tp.model_fields
                    key = str(part)
                    for new, olds in FIELD_ALIASES.items():
                        if key in olds and new in fields:
                            key = new
                    if key in fields:
                        nxt.extend(_unwrap(fields[key].annotation))
                elif origin in (list, tuple, set, frozenset) and isinstance(part, int):
                    nxt.extend(_unwrap(get_args(tp)[0]))
                elif origin is dict:
                    args = get_args(tp)
                    if len(args) == 2:
                        nxt.extend(_unwrap(args[1]))
        current = nxt
    out: list[type[BaseModel]] = []
    for cand in current:
        out.extend(tp for tp in _unwrap(cand) if _is_model(tp))
    return out


def _field_names(types_: Iterable[Any]) -> set[str]:
    names: set[str] = set()
    for tp in types_:
        for member in _unwrap(tp):
            if _is_model(member):
                names.update(member.model_fields)
    return names


def did_you_mean(word: str, candidates: Iterable[str]) -> str | None:
    """The closest candidate to ``word`` (difflib), or ``None``."""
    matches = difflib.get_close_matches(word, sorted(set(candidates)), n=1, cutoff=0.6)
    return matches[0] if matches else None


def data_path(loc: Sequence[Any], data: Any, *, missing: bool = False) -> tuple[PathKey, bool]:
    """Map a pydantic loc onto the document: drop union-member tags, follow field aliases.

    Returns the document path and whether the loc went through a scalar-type union branch
    (``str``) while the data is a mapping or list: an error of an irrelevant union member.
    """
    out: list[str | int] = []
    current = data
    irrelevant = False
    for index, part in enumerate(loc):
        last = index == len(loc) - 1
        if isinstance(current, list) and isinstance(part, int) and 0 <= part < len(current):
            out.append(part)
            current = current[part]
        elif isinstance(current, Mapping) and (key := _match_key(current, part)) is not None:
            out.append(str(key))
            current = current[key]
        elif part in _SCALAR_TAGS and isinstance(current, Mapping | list):
            # a scalar union-member tag ('str') on a mapping: an irrelevant branch. Model
            # tags such as 'EnvironmentConfig' are simply skipped.
            irrelevant = True
        elif last and missing:
            out.append(part if isinstance(part, int) else str(part))  # the missing field
    return tuple(out), irrelevant


_SCALAR_TAGS = frozenset({"str", "int", "float", "bool", "none", "literal", "function-after"})


def _match_key(mapping: Mapping[Any, Any], part: Any) -> Any:
    if part in mapping:
        return part
    text = str(part)
    for key in mapping:
        if str(key) == text:
            return key
    for old in FIELD_ALIASES.get(text, ()):
        if old in mapping:
            return old
    return None


def _clean_message(msg: str) -> str:
    for prefix in ("Value error, ", "Assertion failed, ", "duration: "):
        if msg.startswith(prefix):
            msg = msg[len(prefix) :]
    return msg


def schema_issues(
    exc: ValidationError,
    data: Any,
    positions: Positions,
    model: type[BaseModel],
    *,
    prefix: Sequence[str | int] = (),
) -> list[SchemaIssue]:
    """Turn ``exc`` (raised validating ``data`` against ``model``) into located issues.

    Args:
        exc: The pydantic error.
        data: The data that was validated (to follow the loc through the document).
        positions: Node positions of the document holding ``data``.
        model: The model that was validated (for did-you-mean suggestions).
        prefix: Path of ``data`` inside the document, when it is a sub-tree.
    """
    found: list[tuple[SchemaIssue, bool, PathKey | None]] = []  # issue, irrelevant, missing
    seen: set[tuple[str, str]] = set()
    suggested: set[PathKey] = set()  # fields a did-you-mean already points at
    for err in exc.errors(include_url=False):
        loc = list(err.get("loc", ()))
        kind = err.get("type", "")
        path, irrelevant = data_path(loc, data, missing=kind == "missing")
        full = (*prefix, *path)
        where = format_path(full)
        if kind == "extra_forbidden" and path:
            unknown = str(path[-1])
            parent = format_path(full[:-1])
            candidates = _model_candidates(model, [p for p in loc[:-1]])
            names = _field_names(candidates)
            for new, olds in FIELD_ALIASES.items():
                if new in names:
                    names.update(olds)
            message = (
                f"unknown key '{unknown}' in {parent}"
                if full[:-1]
                else f"unknown top-level key '{unknown}'"
            )
            suggestion = did_you_mean(unknown, names)
            if suggestion:
                message += f"; did you mean '{suggestion}'?"
                suggested.add((*full[:-1], suggestion))
            elif names:
                message += f" (allowed: {', '.join(sorted(names))})"
            location = positions.location(full, key=True)
        elif kind == "missing":
            message = (
                f"{format_path(full[:-1])}: required field '{path[-1] if path else ''}' is missing"
            )
            location = positions.location(full[:-1])
        else:
            message = f"{where}: {_clean_message(str(err.get('msg', 'invalid value')))}"
            location = positions.location(full)
        key = (str(location), message)
        if key in seen:
            continue
        seen.add(key)
        issue = SchemaIssue(location, where, message)
        found.append((issue, irrelevant, full if kind == "missing" else None))
    # "unknown key 'pth'; did you mean 'path'?" already explains "'path' is missing"
    kept = [(i, irr) for i, irr, miss in found if miss is None or miss not in suggested]
    relevant = [i for i, irr in kept if not irr]
    return relevant or [i for i, _ in kept]


def validate_model(
    model: type[ModelT],
    data: Any,
    positions: Positions,
    *,
    prefix: Sequence[str | int] = (),
    hint: str | None = None,
) -> ModelT:
    """Validate ``data`` against ``model``.

    Raises:
        SpecSchemaError: With ``file:line:column``, field path and a did-you-mean for
            unknown keys. A :class:`~vally.errors.VallyError` raised inside a validator
            passes through unchanged.
    """
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        issues = schema_issues(exc, data, positions, model, prefix=prefix)
        if not issues:
            issues = [SchemaIssue(positions.location(prefix), format_path(prefix), str(exc))]
        raise SpecSchemaError(issues, hint=hint) from None
