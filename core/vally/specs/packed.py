"""A spec's document held compactly while a run needs it only now and then.

A run keeps each eval's param-resolved document (:attr:`vally.LoadedEval.raw`) beside its
validated spec: the summaries hash it, experiments patch their variants from it, and an
error points into it. It is read a few times, before the first trial, and held to the
end; its ``stimuli``, as dictionaries and lists, take about 1 KB a stimulus.
:class:`PackedDocument` is the same mapping with its long lists held pickled, an item at a
time (about 200 bytes a stimulus): reading one gives a fresh copy, equal to the one it was
made from, and the items can be read one at a time (to hash the document without holding
it whole).
"""

from __future__ import annotations

import dataclasses
import pickle
from collections.abc import Iterator, Mapping
from typing import Any

from vally.contracts.protocols import LoadedEval

PACKED_ITEMS = 32
"""Lists of at least this many items are held pickled; everything else as it is."""


class _PickledItems(tuple[bytes, ...]):
    """A list of the document, each item pickled on its own (read one at a time)."""

    __slots__ = ()

    def unpacked(self) -> list[Any]:
        """The list, a fresh copy."""
        return [pickle.loads(item) for item in self]


class PackedDocument(Mapping[str, Any]):
    """``document``, read-only, with its top-level lists of at least :data:`PACKED_ITEMS`
    items held pickled, an item at a time: reading such a value unpickles a fresh copy of
    it (changing that copy leaves the document as it is), and :meth:`items_of` gives its
    items one at a time; the rest is held and given as it is.

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
        return value.unpacked() if type(value) is _PickledItems else value

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"PackedDocument({dict(self)!r})"

    def is_list(self, key: str) -> bool:
        """Whether the value of ``key`` is a list (packed or not)."""
        value = self._values[key]
        return type(value) is _PickledItems or isinstance(value, list)

    def items_of(self, key: str) -> Iterator[Any]:
        """The items of the list at ``key``, a fresh copy of each, one at a time (without
        the whole list at once when it is packed).

        Raises:
            KeyError: No such key.
            TypeError: Its value is not a list.
        """
        value = self._values[key]
        if type(value) is _PickledItems:
            return (pickle.loads(item) for item in value)
        if isinstance(value, list):
            return iter(value)
        raise TypeError(f"{key!r} holds {type(value).__name__}, not a list")


def _pack(value: list[Any]) -> Any:
    """``value`` with each item pickled, or ``value`` itself when it holds what cannot be
    pickled (an eval provider's own objects)."""
    try:
        return _PickledItems(pickle.dumps(item, protocol=pickle.HIGHEST_PROTOCOL) for item in value)
    except (pickle.PicklingError, TypeError, AttributeError):
        return value


def packed_eval(loaded: LoadedEval, shared: dict[int, Any] | None = None) -> LoadedEval:
    """``loaded`` with its document held as a :class:`PackedDocument` (itself when it holds
    one already or has no document)."""
    if not loaded.raw or isinstance(loaded.raw, PackedDocument):
        return loaded
    return dataclasses.replace(loaded, raw=PackedDocument(loaded.raw, shared))
