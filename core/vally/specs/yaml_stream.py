"""Loading a spec's stimuli one at a time, so that its loading does not hold every
stimulus's YAML nodes at once.

:func:`vally.specs.yamlio.load_yaml` composes the whole document into a node tree (about
300 bytes a node, with its two marks), then builds the data and a position for every node:
for a spec of many stimuli the tree is most of loading's peak. Here the top-level
``stimuli`` sequence is composed one item at a time: each item's nodes are checked for
duplicate keys, turned into data and dropped before the next item is composed. An item
holding a ``$`` (a param the document's own ``params:`` may resolve, and they may come
later in the file) keeps its nodes until the params are known.

Positions are built only when something asks for them (an error message): the positions
of the rest of the document are kept, those inside ``stimuli`` come from parsing the text
again (:class:`~vally.specs.yamlio.Positions` with ``complete``). The data and positions are those
:func:`~vally.specs.yamlio.document_from_node` gives.

Only a document without anchors (``&``) is streamed: an alias may refer to any earlier
node. Whatever goes wrong on this path (invalid YAML, a duplicate key, a param that does
not resolve, a limit) makes :func:`streamed_document` give up, and the caller loads the
document the usual way, which reports the problem as it always did.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from vally.models.limits import YAML_DEPTH, YAML_NODES
from vally.specs.yamlio import (
    Constructor,
    NodePosition,
    PathKey,
    Positions,
    ScalarHook,
    YamlDocument,
    _check_duplicate_keys,
    _FastLoader,
    _nodes,
    _positions,
    compose,
    construct,
    walk_scalars,
)

STREAMED_KEY = "stimuli"
"""The top-level sequence whose items are composed one at a time."""


class _StreamingComposer(_FastLoader):  # type: ignore[misc,valid-type]
    """The bounded composer of :mod:`vally.specs.yamlio`, composing the items of the
    top-level ``stimuli`` sequence one at a time (see the module docstring)."""

    def __init__(self, stream: str, *, file: str, max_depth: int) -> None:
        super().__init__(stream, file=file, max_depth=max_depth)
        self.items: list[Any] = []
        """Each item's data, or ``None`` while it waits for the params."""
        self.waiting: list[tuple[int, yaml.Node]] = []
        """The items holding a ``$``, by index, with their nodes."""
        self.streamed = 0
        self._stream_next = False
        self._constructor = Constructor()

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        """Compose one node; the top-level ``stimuli`` sequence item by item."""
        self._stream_next = (
            self.depth == 1
            and isinstance(index, yaml.ScalarNode)
            and index.value == STREAMED_KEY
            and self.check_event(yaml.SequenceStartEvent)
        )
        try:
            node: yaml.Node | None = super().compose_node(parent, index)
            return node
        finally:
            self._stream_next = False

    def compose_sequence_node(self, anchor: str | None) -> yaml.SequenceNode:
        """A sequence node; the streamed one is returned empty, its items taken apart."""
        if not self._stream_next:
            node: yaml.SequenceNode = super().compose_sequence_node(anchor)
            return node
        self._stream_next = False
        self.streamed += 1
        start = self.get_event()
        tag = start.tag
        if tag is None or tag == "!":
            tag = self.resolve(yaml.SequenceNode, None, start.implicit)
        node = yaml.SequenceNode(tag, [], start.start_mark, None, flow_style=start.flow_style)
        index = 0
        while not self.check_event(yaml.SequenceEndEvent):
            self._take(index, self.compose_node(node, index))
            index += 1
        node.end_mark = self.get_event().end_mark
        return node

    def _take(self, index: int, item: yaml.Node | None) -> None:
        """Turn one item into data now, or keep its nodes when it holds a ``$``."""
        if item is None:
            raise ValueError("an item without a node")
        if any(
            isinstance(node, yaml.ScalarNode) and isinstance(node.value, str) and "$" in node.value
            for node in _nodes(item)
        ):
            self.items.append(None)
            self.waiting.append((index, item))
            return
        _check_duplicate_keys(item, self.file)
        self.items.append(self._constructor.construct_document(item))


def streamed_document(
    text: str, path: Path, hook_for: Callable[[yaml.Node | None], ScalarHook | None]
) -> YamlDocument | None:
    """Load ``text`` as :func:`~vally.specs.yamlio.document_from_node` would, composing the
    top-level ``stimuli`` items one at a time; ``None`` when the document cannot be
    streamed (it has anchors, or anything on this path fails: the caller then loads it
    the usual way, which reports any problem).

    Args:
        text: The document.
        path: Its file.
        hook_for: Given the composed document without its stimuli (``params:`` is in it),
            the hook that resolves params in every scalar, or ``None``.
    """
    if "&" in text:
        return None
    file = str(path)
    try:
        return _streamed(text, path, file, hook_for)
    except Exception:  # invalid input: the usual path reports it as before
        return None


def _streamed(
    text: str,
    path: Path,
    file: str,
    hook_for: Callable[[yaml.Node | None], ScalarHook | None],
) -> YamlDocument | None:
    loader = _StreamingComposer(text, file=file, max_depth=YAML_DEPTH.value())
    try:
        root = loader.get_single_node()
    finally:
        loader.dispose()
    if root is None or loader.streamed != 1 or loader.nodes > YAML_NODES.value():
        return None
    items, waiting = loader.items, loader.waiting
    del loader
    hook = hook_for(root)
    _check_duplicate_keys(root, file)
    if hook is not None:
        walk_scalars(root, hook)
    for index, item in waiting:
        _check_duplicate_keys(item, file)
        if hook is not None:
            walk_scalars(item, hook)
        items[index] = construct(item, file)
    del waiting
    data = construct(root, file)
    if not isinstance(data, dict) or data.get(STREAMED_KEY) != []:
        return None
    data[STREAMED_KEY] = items

    def complete() -> dict[PathKey, NodePosition]:
        whole = compose(text, file)
        if whole is not None and hook is not None:
            walk_scalars(whole, hook)
        return {} if whole is None else _positions(whole, file).table

    skeleton = _positions(root, file).table
    positions = Positions(file, skeleton, complete=complete, partial=(STREAMED_KEY,))
    return YamlDocument(data, positions, path)
