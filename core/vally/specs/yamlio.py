"""YAML loading that remembers where every node came from.

vally's files are YAML. Errors in them must say *where*: ``file:line:column``, the field path
(``stimuli[1].graders[0].config``) and what to do. This module

* parses a file into plain Python data plus a :class:`Positions` table (path -> line/column),
  bounded in nesting depth and in size with aliases expanded (``VALLY_MAX_YAML_DEPTH``,
  ``VALLY_MAX_YAML_NODES``, see :mod:`vally.models.limits`),
* resolves ``${NAME}`` params on the YAML nodes before they become Python values (so a scalar
  that is exactly ``${RUNS=3}`` gets the YAML type of the value: an int here).

Schema errors that point at the offending node are in :mod:`vally.specs.schema_errors`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel

from vally.errors import ConfigError, SourceLocation, YamlSyntaxError
from vally.models.limits import YAML_DEPTH, YAML_NODES

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


class Positions:
    """The position of every node of one document, by path.

    Args:
        file: The file named in every location.
        table: The positions, by path.
        complete: When ``table`` leaves out the nodes below ``partial`` (a spec's stimuli,
            loaded one at a time by :mod:`vally.specs.yaml_stream`), builds the whole
            table; it is called the first time a path below ``partial`` or the whole
            :attr:`table` is asked for (an error message), not before.
        partial: The path whose descendants ``table`` leaves out.
    """

    def __init__(
        self,
        file: str,
        table: dict[PathKey, NodePosition] | None = None,
        *,
        complete: Callable[[], dict[PathKey, NodePosition]] | None = None,
        partial: PathKey = (),
    ) -> None:
        self.file = file
        self._table: dict[PathKey, NodePosition] = {} if table is None else table
        self._complete = complete
        self._partial = partial

    @property
    def table(self) -> dict[PathKey, NodePosition]:
        """Every node's position, by path (built in full on first use when partial)."""
        if self._complete is not None:
            complete, self._complete = self._complete, None
            self._table = complete()
        return self._table

    def _table_for(self, parts: PathKey) -> dict[PathKey, NodePosition]:
        """A table that holds ``parts`` if the document has it."""
        partial = self._partial
        if self._complete is None or len(parts) <= len(partial) or parts[: len(partial)] != partial:
            return self._table
        return self.table

    def location(self, path: Sequence[str | int], *, key: bool = False) -> SourceLocation:
        """The location of ``path`` or, when it is absent (a missing field), its nearest
        present parent. With ``key=True`` a mapping entry points at its key, not its value."""
        parts: PathKey = tuple(path)
        table = self._table_for(parts)
        while parts and parts not in table:
            parts = parts[:-1]
        pos = table.get(parts)
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


class YamlLimitError(YamlSyntaxError):
    """A YAML document is nested too deeply or expands to too many nodes through aliases."""


class _BoundedComposer(yaml.composer.Composer):
    """A composer that refuses collections nested deeper than ``max_depth`` (PyYAML
    composes recursively: a deep document would overflow the stack) and counts the nodes it
    makes. Mixed into a safe loader below, whose parser feeds it events."""

    _loader: Any = yaml.SafeLoader  # the safe loader whose reader, scanner and parser are used
    # the parser's and loader's methods, which the mixed-in safe loader provides
    check_event: Callable[..., bool]
    peek_event: Callable[[], yaml.Event]
    dispose: Callable[[], None]

    def __init__(self, stream: str, *, file: str, max_depth: int) -> None:
        self._loader.__init__(self, stream)
        self.file, self.max_depth, self.anchors = file, max_depth, {}
        self.depth = self.nodes = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        self.nodes += 1
        if not self.check_event(yaml.SequenceStartEvent, yaml.MappingStartEvent):
            return super().compose_node(parent, index)
        self.depth += 1
        try:
            if self.depth > self.max_depth:
                mark = self.peek_event().start_mark
                line, column = (mark.line + 1, mark.column + 1) if mark else (None, None)
                raise YamlLimitError(
                    f"YAML nested deeper than {self.max_depth} levels",
                    location=SourceLocation(self.file, line, column),
                    hint=f"flatten the document; {YAML_DEPTH.hint(self.max_depth)}",
                )
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


class _PythonLoader(_BoundedComposer, yaml.SafeLoader):
    """PyYAML's own scanner and parser under the bounded composer."""


_FastLoader: type[_BoundedComposer] = _PythonLoader
if hasattr(yaml, "CSafeLoader"):

    class _LibyamlLoader(_BoundedComposer, yaml.CSafeLoader):
        """libyaml's parser (4 times as fast) under the bounded composer: libyaml's own
        composer does not bound its recursion."""

        _loader = yaml.CSafeLoader

    _FastLoader = _LibyamlLoader


def _compose_with(
    loader_class: type[_BoundedComposer], text: str, file: str
) -> tuple[yaml.Node | None, int]:
    """The root node and the number of nodes composed, with ``loader_class``."""
    loader = loader_class(text, file=file, max_depth=YAML_DEPTH.value())  # checks characters
    try:
        return loader.get_single_node(), loader.nodes
    finally:
        loader.dispose()


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _node_error(node: yaml.Node, file: str, message: str, hint: str) -> YamlLimitError:
    mark = node.start_mark
    return YamlLimitError(
        message, location=SourceLocation(file, mark.line + 1, mark.column + 1), hint=hint
    )


def check_expansion(root: yaml.Node, file: str, *, max_nodes: int | None = None) -> int:
    """Count the nodes of ``root`` with every alias expanded (a node reached through two
    aliases counts twice), without expanding anything.

    Returns:
        The expanded node count.

    Raises:
        YamlLimitError: The count exceeds ``max_nodes`` (default ``VALLY_MAX_YAML_NODES``),
            located at the first node whose expansion passes the limit; or an alias refers to
            a node that contains it (an endless expansion).
    """
    limit = YAML_NODES.value() if max_nodes is None else max_nodes
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()  # the nodes whose subtree is being counted
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        ident = id(node)
        if finished:
            open_nodes.discard(ident)
            size = 1 + sum(sizes[id(child)] for child in _children(node))
            if size > limit:
                raise _node_error(
                    node,
                    file,
                    f"YAML expands to more than {limit} nodes through aliases (*name)",
                    f"repeat less through aliases of aliases; {YAML_NODES.hint(limit)}",
                )
            sizes[ident] = size
            continue
        if ident in sizes:
            continue
        if ident in open_nodes:
            raise _node_error(
                node,
                file,
                "a YAML alias refers to a node that contains it (an endless structure)",
                "an alias (*name) may only repeat a node defined before and outside it",
            )
        open_nodes.add(ident)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node) if id(child) not in sizes)
    return sizes[id(root)]


def compose(text: str, file: str) -> yaml.Node | None:
    """Parse ``text`` into a node tree (``None`` for an empty document), bounded in nesting
    depth (``VALLY_MAX_YAML_DEPTH``) and in size with aliases expanded
    (``VALLY_MAX_YAML_NODES``).

    Raises:
        YamlSyntaxError: With ``file:line:column`` of the problem; a
            :class:`YamlLimitError` when the document passes a limit.
    """
    try:
        try:
            root, nodes = _compose_with(_FastLoader, text, file)
        except yaml.YAMLError:
            if _FastLoader is _PythonLoader:
                raise
            # libyaml stops at limits of its own (newer builds refuse 1,000 levels of flow
            # nesting, scanning ahead past vally's bound) and may place a problem elsewhere:
            # PyYAML's own parser reports it where vally's bound and positions say.
            root, nodes = _compose_with(_PythonLoader, text, file)
    except yaml.YAMLError as exc:
        raise _syntax_error(exc, file, text) from None
    except RecursionError:
        raise YamlLimitError(
            "YAML nested too deeply for the parser",
            location=SourceLocation(file),
            hint=f"flatten the document, or lower {YAML_DEPTH.env}",
        ) from None
    if root is not None and ("&" in text or nodes > YAML_NODES.value()):  # else no aliases
        check_expansion(root, file)
    return root


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


SHARED_TEXT_CHARS = 64
"""Texts up to this long that a document repeats are held once (see :class:`Constructor`)."""


class Constructor(yaml.SafeLoader):
    """The safe loader's constructor, holding each short text the document repeats once:
    a spec of many stimuli repeats its keys, grader types, config keys and values, tags and
    models in every stimulus, about 60 bytes each (strings do not change, so sharing them
    changes nothing else)."""

    def __init__(self) -> None:
        super().__init__("")
        self._texts: dict[str, str] = {}

    def construct_scalar(self, node: yaml.ScalarNode | yaml.MappingNode) -> Any:
        """The scalar's text, the one held already when the document had it before."""
        value = super().construct_scalar(node)
        if isinstance(value, str) and len(value) <= SHARED_TEXT_CHARS:
            return self._texts.setdefault(value, value)
        return value


def construct(root: yaml.Node | None, file: str) -> Any:
    """Build plain Python data from a node tree (after hooks have rewritten scalars)."""
    if root is None:
        return None
    loader = Constructor()
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
