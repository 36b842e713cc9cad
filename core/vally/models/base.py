"""Base classes for vally's data models.

Two families:

* :class:`SpecModel` for what users write (eval.yaml, .vally.yaml, experiment files): keys are
  exactly as written in YAML (snake_case, as vally's files use), unknown keys are errors.
* :class:`RecordModel` for what vally writes (trajectories, results.jsonl, summaries): Python
  attributes are snake_case, JSON keys are camelCase, every field is always written (``None``
  as ``null``), and unknown keys are ignored on read so newer files stay readable.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Self

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticSerializationError

REPLACEMENT_CHARACTER = "\ufffd"


def without_lone_surrogates(text: str) -> str:
    """``text`` with every lone UTF-16 surrogate (``"\\ud800"`` from a JSON escape, or
    ``"\\udcff"`` from an undecodable file name) replaced by U+FFFD, so it can be written
    as UTF-8."""
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _clean(value: Any) -> Any:
    if isinstance(value, str):
        return without_lone_surrogates(value)
    if isinstance(value, dict):
        return {_clean(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def share_field_keys(model: BaseModel) -> None:
    """Hold ``model``'s field values in a dictionary that shares its keys with the other
    models of its class, as a plain object's attributes do.

    pydantic gives each model a dictionary of its own keys and values: 272 bytes for a
    stimulus's ten fields, 400 for a stimulus summary's fifteen. One sharing its class's
    keys holds only the values (on CPython about 100 and 200 bytes less). It is an
    ordinary dictionary in every other way: setting a field, copying the model and
    comparing it behave as before. Where the interpreter cannot share the keys (a class
    of more fields than it shares, another implementation) the model keeps a dictionary
    of its own, equal to the one it had.
    """
    # a fresh instance's dictionary shares the class's keys (object.__new__: whatever
    # __new__ a subclass defines, nothing of it runs for this throwaway instance)
    values = object.__new__(type(model)).__dict__
    for name, value in model.__dict__.items():  # one at a time: update() unshares the keys
        values[name] = value
    object.__setattr__(model, "__dict__", values)


class _SharedFieldNames(set[str]):
    """The names of the fields a spec model was given, shared by the models of its class
    given the same fields (see :meth:`SpecModel.model_post_init`)."""


_GIVEN_FIELDS: dict[tuple[type[BaseModel], frozenset[str]], _SharedFieldNames] = {}
"""The shared sets of given field names, by model class and names: as many as the
combinations of given fields the specs use."""


class SpecModel(BaseModel):
    """A user-written document section. Strict: unknown keys are rejected.

    The models of one class given the same fields share one set of their names
    (``model_fields_set``): a spec of 10^4 stimuli holds two such sets a stimulus
    otherwise (about 430 bytes). A model takes a set of its own before a field is set on
    it, and a copy (``model_copy``) gets one of its own.
    """

    model_config = ConfigDict(
        extra="forbid",
        populate_by_name=True,
        validate_default=True,
        # YAML reads `version: 1.0` or `model: 4` as numbers; string fields accept them.
        coerce_numbers_to_str=True,
    )

    def model_post_init(self, context: Any, /) -> None:
        """Hold the shared set of this model's given field names instead of its own (after
        validation, not as a validator: a validator would rename the model in the errors
        of a union it is part of)."""
        given = self.__pydantic_fields_set__
        key = (type(self), frozenset(given))
        shared = _GIVEN_FIELDS.get(key)
        if shared is None:
            shared = _GIVEN_FIELDS[key] = _SharedFieldNames(given)
        object.__setattr__(self, "__pydantic_fields_set__", shared)
        share_field_keys(self)

    def __setattr__(self, name: str, value: Any) -> None:
        """Set a field (see :class:`pydantic.BaseModel`), on a set of given field names of
        this model's own when it held a shared one."""
        if type(self.__pydantic_fields_set__) is _SharedFieldNames:
            object.__setattr__(self, "__pydantic_fields_set__", set(self.__pydantic_fields_set__))
        super().__setattr__(name, value)


class RecordModel(BaseModel):
    """A record vally writes. camelCase on disk, snake_case in Python."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="ignore",
        ser_json_inf_nan="null",
    )

    def to_json_dict(self) -> dict[str, Any]:
        """The on-disk form: camelCase keys, JSON-compatible values, every field present."""
        return self.model_dump(mode="json", by_alias=True)

    def to_json_line(self) -> str:
        """One compact JSON line (no trailing newline), keys in declaration order."""
        return self.model_dump_json(by_alias=True)

    def json_pieces(self) -> Iterator[str]:
        """:meth:`to_json_line` in pieces that join to it, for writing a long record
        without its whole line at once: here the line itself, one piece."""
        yield self.to_json_line()

    def writable(self) -> Self:
        """This record itself when it can be written as UTF-8 JSON, else a copy with every
        lone surrogate in its texts (and keys) replaced by U+FFFD.

        Agents can emit text no UTF-8 file can hold (a ``"\\ud800"`` escape in an event,
        a file name that is not UTF-8); one such text must not stop a writer.
        """
        try:
            self.model_dump_json(by_alias=True)
        except PydanticSerializationError:
            return self.model_validate(_clean(self.model_dump(mode="python", by_alias=True)))
        return self
