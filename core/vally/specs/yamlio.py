"""YAML loading that remembers where every node came from.

vally's files are YAML. Errors in them must say *where*: ``file:line:column``, the field path
(``stimuli[1].graders[0].config``) and what to do. This module

* parses a file into plain Python data plus a :class:`Positions` table (path -> line/column),
* resolves ``${NAME}`` params on the YAML nodes before they become Python values (so a scalar
  that is exactly ``${RUNS=3}`` gets the YAML type of the value: an int here),
* turns a pydantic :class:`~pydantic.ValidationError` into a :class:`SpecSchemaError` whose
  message points at the offending node and suggests the closest field for an unknown key.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError

from vally.errors import ConfigError, SchemaError, SourceLocation, YamlSyntaxError

PathKey = tuple[str | int, ...]
"""A path into a YAML document: mapping keys are strings, sequence indexes are ints."""

ModelT = TypeVar("ModelT", bound=BaseModel)

# Alternative spellings vally accepts for one field (new name -> old names).
FIELD_ALIASES: dict[str, tuple[str, ...]] = {
    "defaults": ("config",),
    "environment": ("agent_environment",),
}


@dataclass(frozen=True)
class NodePosition:
    """Where one node sits in its file (1-based); ``key_*`` is set for mapping values."""

    line: int
    column: int
    key_line: int | None = None
    key_column: int | None = None


@dataclass
class Positions:
    """The position of every node of one document, by path."""

    file: str
    table: dict[PathKey, NodePosition] = field(default_factory=dict)

    def location(self, path: Sequence[str | int], *, key: bool = False) -> SourceLocation:
        """The location of ``path`` or, when it is absent (a missing field), its nearest
        present parent. With ``key=True`` a mapping entry points at its key, not its value."""
        parts: PathKey = tuple(path)
        while parts and parts not in self.table:
            parts = parts[:-1]
        pos = self.table.get(parts)
        if pos is None:
            return SourceLocation(self.file, 1, 1)
        if key and pos.key_line is not None:
            return SourceLocation(self.file, pos.key_line, pos.key_column)
        return SourceLocation(self.file, pos.line, pos.column)

    def line(self, path: Sequence[str | int], *, key: bool = False) -> int:
        """The 1-based line of ``path`` (see :meth:`location`)."""
        return self.location(path, key=key).line or 1


@dataclass(frozen=True)
class YamlDocument:
    """A parsed YAML file: its data (``None`` for an empty file) and node positions."""

    data: Any
    positions: Positions
    source: Path


ScalarHook = Callable[[yaml.ScalarNode], None]
"""Called on every scalar node before construction; may rewrite ``node.value``/``node.tag``."""


def format_path(path: Sequence[str | int]) -> str:
    """Render a path the way users read it: ``stimuli[1].graders[0].config``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "(document)"


def _syntax_error(exc: yaml.YAMLError, file: str, text: str | None = None) -> YamlSyntaxError:
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        mark = exc.problem_mark
        problem = exc.problem or "invalid YAML"
        context = f" ({exc.context})" if exc.context else ""
        hint = "check indentation, quoting and that ':' is followed by a space"
        lines = (text or "").splitlines()
        if "${" in (lines[mark.line] if 0 <= mark.line < len(lines) else ""):
            hint = 'inside { } or [ ], quote a value holding a param: model: "${MODEL}"'
        elif "\t" in (lines[mark.line] if 0 <= mark.line < len(lines) else ""):
            hint = "YAML indentation must use spaces, not tabs"
        return YamlSyntaxError(
            f"invalid YAML: {problem}{context}",
            location=SourceLocation(file, mark.line + 1, mark.column + 1),
            hint=hint,
        )
    return YamlSyntaxError(f"invalid YAML: {exc}", location=SourceLocation(file))


def read_text(path: Path) -> str:
    """Read a UTF-8 text file, turning OS errors into :class:`ConfigError`."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"file not found: {path}") from None
    except IsADirectoryError:
        raise ConfigError(f"expected a file but {path} is a directory") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None


_COMPOSER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's safe loader when PyYAML was built with it (same nodes and marks, parsed about
four times faster), else the pure-Python one."""


def compose(text: str, file: str) -> yaml.Node | None:
    """Parse ``text`` into a node tree (``None`` for an empty document).

    Raises:
        YamlSyntaxError: With ``file:line:column`` of the problem.
    """
    try:
        return yaml.compose(text, Loader=_COMPOSER)
    except yaml.YAMLError as exc:
        raise _syntax_error(exc, file, text) from None


def _key_text(node: yaml.Node) -> str:
    return str(node.value) if isinstance(node, yaml.ScalarNode) else "<complex key>"


def _nodes(root: yaml.Node) -> Iterator[yaml.Node]:
    """Every node of the tree once, in document order (a node behind several aliases is
    visited once)."""
    seen: set[int] = set()
    stack: list[yaml.Node] = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        yield node
        if isinstance(node, yaml.SequenceNode):
            stack.extend(reversed(node.value))
        elif isinstance(node, yaml.MappingNode):
            for key, value in reversed(node.value):
                stack.append(value)
                stack.append(key)


def walk_scalars(root: yaml.Node, hook: ScalarHook) -> None:
    """Call ``hook`` once on every scalar node (aliases are visited once)."""
    for node in _nodes(root):
        if isinstance(node, yaml.ScalarNode):
            hook(node)


def _check_duplicate_keys(root: yaml.Node, file: str) -> None:
    for node in _nodes(root):
        if not isinstance(node, yaml.MappingNode):
            continue
        keys: dict[str, yaml.Node] = {}
        for key, _value in node.value:
            if not isinstance(key, yaml.ScalarNode) or key.tag == "tag:yaml.org,2002:merge":
                continue
            if key.value in keys:
                first = keys[key.value].start_mark
                raise YamlSyntaxError(
                    f"duplicate key '{key.value}' (first defined on line {first.line + 1})",
                    location=SourceLocation(
                        file, key.start_mark.line + 1, key.start_mark.column + 1
                    ),
                    hint="remove one of them",
                )
            keys[key.value] = key


def _positions(root: yaml.Node, file: str) -> Positions:
    positions = Positions(file)

    def visit(node: yaml.Node, path: PathKey, key: yaml.Node | None, depth: int) -> None:
        if depth > 200:
            return
        mark = node.start_mark
        key_mark = key.start_mark if key is not None else None
        if path not in positions.table:
            positions.table[path] = NodePosition(
                mark.line + 1,
                mark.column + 1,
                key_mark.line + 1 if key_mark else None,
                key_mark.column + 1 if key_mark else None,
            )
        if isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                visit(item, (*path, index), None, depth + 1)
        elif isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                visit(v, (*path, _key_text(k)), k, depth + 1)

    visit(root, (), None, 0)
    return positions


def construct(root: yaml.Node | None, file: str) -> Any:
    """Build plain Python data from a node tree (after hooks have rewritten scalars)."""
    if root is None:
        return None
    loader = yaml.SafeLoader("")
    try:
        return loader.construct_document(root)
    except yaml.YAMLError as exc:
        raise _syntax_error(exc, file) from None
    finally:
        loader.dispose()


def resolve_scalar_tag(value: str) -> str:
    """The tag a plain (unquoted) YAML scalar with this text would get (int, bool, ...)."""
    loader = yaml.SafeLoader("")
    try:
        return str(loader.resolve(yaml.ScalarNode, value, (True, False)))  # type: ignore[no-untyped-call]
    finally:
        loader.dispose()


def load_yaml(
    path: Path, *, text: str | None = None, scalar_hook: ScalarHook | None = None
) -> YamlDocument:
    """Read and parse one YAML file, keeping positions.

    Args:
        path: The file (named in every error).
        text: Its content, when already read.
        scalar_hook: Rewrites scalars before construction (param resolution).

    Raises:
        ConfigError: Unreadable file.
        YamlSyntaxError: Invalid YAML or a duplicate key, with ``file:line:column``.
    """
    if text is None:
        text = read_text(path)
    return document_from_node(compose(text, str(path)), path, scalar_hook=scalar_hook)


def document_from_node(
    root: yaml.Node | None, path: Path, *, scalar_hook: ScalarHook | None = None
) -> YamlDocument:
    """Finish loading a composed node tree (see :func:`load_yaml`)."""
    file = str(path)
    if root is None:
        return YamlDocument(None, Positions(file), path)
    _check_duplicate_keys(root, file)
    if scalar_hook is not None:
        walk_scalars(root, scalar_hook)
    data = construct(root, file)
    return YamlDocument(data, _positions(root, file), path)


def top_level_value(root: yaml.Node | None, key: str) -> yaml.Node | None:
    """The value node of ``key`` in a top-level mapping, if any."""
    if isinstance(root, yaml.MappingNode):
        for k, v in root.value:
            if isinstance(k, yaml.ScalarNode) and k.value == key:
                found: yaml.Node = v
                return found
    return None


# --------------------------------------------------------------------------- schema errors


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
