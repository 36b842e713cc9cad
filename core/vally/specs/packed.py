"""A spec's document held compactly while a run needs it only now and then.

A run keeps each eval's param-resolved document (:attr:`vally.LoadedEval.raw`) beside its
validated spec: the summaries hash it, experiments patch their variants from it, and an
error points into it. It is read a few times, before the first trial, and held to the
end; its ``stimuli``, as dictionaries and lists, take about 1 KB a stimulus.
:class:`PackedDocument` is the same mapping with its long lists held pickled and
compressed, :data:`PACKED_BLOCK` items at a time (stimuli are much alike, so a block
compresses well: about 8 bytes a short stimulus, against about 166 pickled one at
a time): reading one gives a fresh copy, equal to the one it was made from, and the items
can be read a block at a time (to hash the document without holding it whole).
"""

from __future__ import annotations

import dataclasses
import pickle
import zlib
from collections.abc import Iterator, Mapping
from typing import Any

from vally.contracts.protocols import LoadedEval

PACKED_ITEMS = 32
"""Lists of at least this many items are held packed; everything else as it is."""

PACKED_BLOCK = 64
"""Items of a packed list pickled and compressed together: a block is unpacked whole."""

_PROTOCOL = pickle.HIGHEST_PROTOCOL


class _PackedItems:
    """A list of the document, pickled and compressed :data:`PACKED_BLOCK` items at a
    time (read a block at a time)."""

    __slots__ = ("_blocks", "_count")

    def __init__(self, items: list[Any]) -> None:
        self._count = len(items)
        self._blocks = tuple(
            zlib.compress(pickle.dumps(items[start : start + PACKED_BLOCK], _PROTOCOL))
            for start in range(0, len(items), PACKED_BLOCK)
        )

    def __iter__(self) -> Iterator[Any]:
        """The items, fresh copies, unpacking one block at a time."""
        for block in self._blocks:
            yield from pickle.loads(zlib.decompress(block))

    def __len__(self) -> int:
        return self._count

    def unpacked(self) -> list[Any]:
        """The list, a fresh copy."""
        return list(self)


class PackedDocument(Mapping[str, Any]):
    """``document``, read-only, with its top-level lists of at least :data:`PACKED_ITEMS`
    items held pickled and compressed, :data:`PACKED_BLOCK` items at a time: reading such
    a value unpacks a fresh copy of it (changing that copy leaves the document as it is),
    and :meth:`items_of` gives its items one at a time, unpacking a block at a time; the
    rest is held and given as it is.

    Args:
        document: The document to hold (its long lists are pickled, not kept).
        shared: The pickled form of lists already packed, by ``id`` of the list, filled as
            lists are packed: documents sharing a list (variants that leave an eval's
            stimuli as they are) then share its pickled form. The caller keeps those lists
            alive while it passes the same ``shared``.
    """

    __slots__ = ("_values",)

    def __init__(self, document: Mapping[str, Any], shared: dict[int, Any] | None = None) -> None:
        known = {} if shared is None else shared
        values: dict[str, Any] = {}
        for key, value in document.items():
            if isinstance(value, list) and len(value) >= PACKED_ITEMS:
                packed = known.get(id(value))
                if packed is None:
                    packed = known[id(value)] = _pack(value)
                values[key] = packed
            else:
                values[key] = value
        self._values = values

    def __getitem__(self, key: str) -> Any:
        value = self._values[key]
        return value.unpacked() if type(value) is _PackedItems else value

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"PackedDocument({dict(self)!r})"

    def is_list(self, key: str) -> bool:
        """Whether the value of ``key`` is a list (packed or not)."""
        value = self._values[key]
        return type(value) is _PackedItems or isinstance(value, list)

    def items_of(self, key: str) -> Iterator[Any]:
        """The items of the list at ``key``, a fresh copy of each, one at a time (without
        the whole list at once when it is packed).

        Raises:
            KeyError: No such key.
            TypeError: Its value is not a list.
        """
        if not self.is_list(key):
            raise TypeError(f"{key!r} holds {type(self._values[key]).__name__}, not a list")
        return iter(self._values[key])


def plain(value: Any) -> Any:
    """``value`` with every mapping in it a plain ``dict`` and every list a plain list, to
    any depth: a :class:`PackedDocument` unpacked whole, as ``json`` writes it."""
    if isinstance(value, Mapping):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [plain(item) for item in value]
    return value


def _pack(value: list[Any]) -> Any:
    """``value`` packed, or ``value`` itself when it holds what cannot be pickled (an eval
    provider's own objects)."""
    try:
        return _PackedItems(value)
    except (pickle.PicklingError, TypeError, AttributeError):
        return value


def packed_eval(loaded: LoadedEval, shared: dict[int, Any] | None = None) -> LoadedEval:
    """``loaded`` with its document held as a :class:`PackedDocument` (itself when it holds
    one already or has no document)."""
    if not loaded.raw or isinstance(loaded.raw, PackedDocument):
        return loaded
    return dataclasses.replace(loaded, raw=PackedDocument(loaded.raw, shared))
