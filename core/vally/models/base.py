"""Base classes for vally's data models.

Two families:

* :class:`SpecModel` for what users write (eval.yaml, .vally.yaml, experiment files): keys are
  exactly as written in YAML (snake_case, as vally's files use), unknown keys are errors.
* :class:`RecordModel` for what vally writes (trajectories, results.jsonl, summaries): Python
  attributes are snake_case, JSON keys are camelCase, every field is always written (``None``
  as ``null``), and unknown keys are ignored on read so newer files stay readable.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class SpecModel(BaseModel):
    """A user-written document section. Strict: unknown keys are rejected."""

    model_config = ConfigDict(
        extra="forbid",
        populate_by_name=True,
        validate_default=True,
        # YAML reads `version: 1.0` or `model: 4` as numbers; string fields accept them.
        coerce_numbers_to_str=True,
    )


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
