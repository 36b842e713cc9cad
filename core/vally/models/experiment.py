"""The experiment file of ``vally experiment run``: evals, variants or a matrix, and ``vary``."""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator, model_validator

from vally.models.base import SpecModel
from vally.models.promotion import PromotionRules


class VariantOverride(SpecModel):
    """A patch applied to each eval's resolved config before stimulus environments resolve.

    JSON-merge-patch rules: ``null`` deletes, maps merge, lists and scalars replace.
    ``overrides`` patches ``/defaults`` (``model: x`` is ``/defaults/model``); ``defaults``
    and ``environment`` patch those sections directly.
    """

    description: str | None = None
    overrides: dict[str, Any] | None = None
    defaults: dict[str, Any] | None = None
    environment: dict[str, Any] | None = None

    @model_validator(mode="before")
    @classmethod
    def _aliases(cls, data: Any) -> Any:
        if data is None:
            return {}
        if isinstance(data, dict) and "agent_environment" in data:
            if "environment" in data:
                raise ValueError("'agent_environment' and 'environment' name one field; keep one")
            data = dict(data)
            data["environment"] = data.pop("agent_environment")
        return data


class MatrixAxis(SpecModel):
    """One axis of a matrix: a JSON pointer and labelled values."""

    path: str
    values: dict[str, Any]

    @field_validator("path")
    @classmethod
    def _pointer(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError(f"axis path {value!r} must be a JSON pointer starting with '/'")
        return value

    @field_validator("values")
    @classmethod
    def _non_empty(cls, value: dict[str, Any]) -> dict[str, Any]:
        if not value:
            raise ValueError("an axis needs at least one value")
        return value


class ExecutionSettings(SpecModel):
    """Defaults for running the experiment; CLI flags override them."""

    workers: int | None = Field(default=None, ge=1)


class ExperimentFile(SpecModel):
    """The whole experiment file."""

    name: str
    description: str | None = None
    evals: list[str] = Field(min_length=1)
    vary: list[str] | None = None
    baseline: str | dict[str, str]
    variants: dict[str, VariantOverride] | None = None
    matrix: dict[str, MatrixAxis] | None = None
    execution: ExecutionSettings | None = None
    grader_plugins: list[str] = Field(default_factory=list)
    executor_plugins: list[str] = Field(default_factory=list)
    reporter_plugins: list[str] = Field(default_factory=list)
    eval_plugin: str | None = None
    promotion: PromotionRules | None = Field(
        default=None,
        description="Promotion rules every variant is decided by against the baseline.",
    )

    @field_validator("evals", mode="before")
    @classmethod
    def _evals(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @field_validator("vary")
    @classmethod
    def _pointers(cls, value: list[str] | None) -> list[str] | None:
        for pointer in value or []:
            if not pointer.startswith("/"):
                raise ValueError(f"vary entry {pointer!r} must be a JSON pointer starting with '/'")
        return value

    @model_validator(mode="after")
    def _shape(self) -> ExperimentFile:
        if (self.variants is None) == (self.matrix is None):
            raise ValueError("an experiment needs exactly one of 'variants' or 'matrix'")
        if self.variants is not None:
            if self.vary is None:
                raise ValueError("'vary' is required with 'variants'")
            if len(self.variants) < 2:
                raise ValueError("an experiment needs at least two variants")
            if not isinstance(self.baseline, str):
                raise ValueError("with 'variants', 'baseline' is the name of one variant")
            if self.baseline not in self.variants:
                names = ", ".join(self.variants)
                raise ValueError(f"baseline {self.baseline!r} is not a variant (have: {names})")
        else:
            assert self.matrix is not None
            if self.vary is not None:
                raise ValueError(
                    "'vary' must be omitted with 'matrix'; it is derived from the axes"
                )
            if not isinstance(self.baseline, dict):
                raise ValueError("with 'matrix', 'baseline' maps each axis to one value label")
            cells = 1
            for axis in self.matrix.values():
                cells *= len(axis.values)
            if cells < 2:
                raise ValueError("an experiment needs at least two variants")
            for axis_name, axis in self.matrix.items():
                label = self.baseline.get(axis_name)
                if label is None:
                    raise ValueError(f"baseline does not pick a value for axis '{axis_name}'")
                if label not in axis.values:
                    raise ValueError(
                        f"baseline value {label!r} is not a label of axis '{axis_name}' "
                        f"(have: {', '.join(axis.values)})"
                    )
            extra = set(self.baseline) - set(self.matrix)
            if extra:
                raise ValueError(f"baseline names unknown axes: {', '.join(sorted(extra))}")
        return self
