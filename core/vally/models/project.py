"""The project file ``.vally.yaml``: discovery paths, suites, named environments, defaults,
plugins, params and LLM provider settings."""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator, model_validator

from vally.models.base import SpecModel
from vally.models.durations import Duration
from vally.models.pricing import ModelPrice
from vally.models.spec import EnvironmentConfig


def _as_list(value: Any) -> Any:
    return [value] if isinstance(value, str) else value


class PathsConfig(SpecModel):
    """Where skills and evals live, where results go, and which file names are evals."""

    skills: list[str] = Field(default_factory=lambda: ["skills/"])
    evals: list[str] = Field(default_factory=lambda: ["evals/"])
    results: str | None = None
    cache: str | None = None
    evalFilenames: list[str] = Field(default_factory=lambda: ["eval.yaml", "eval.yml"])

    @field_validator("skills", "evals", "evalFilenames", mode="before")
    @classmethod
    def _lists(cls, value: Any) -> Any:
        return _as_list(value)


TagFilter = dict[str, list[str]]


class SuiteConfig(SpecModel):
    """A named selection: eval file globs and/or a tag filter (AND across keys, OR within)."""

    description: str | None = None
    evals: list[str] | None = None
    filter: TagFilter | None = None

    @field_validator("evals", mode="before")
    @classmethod
    def _evals(cls, value: Any) -> Any:
        return _as_list(value)

    @field_validator("filter", mode="before")
    @classmethod
    def _filter(cls, value: Any) -> Any:
        if value is None:
            return value
        if isinstance(value, dict) and set(value) == {"tags"} and isinstance(value["tags"], dict):
            value = value["tags"]  # the alternative form filter: {tags: {...}}
        if isinstance(value, dict):
            return {
                str(k): [str(x) for x in (v if isinstance(v, list) else [v])]
                for k, v in value.items()
            }
        return value

    @model_validator(mode="after")
    def _one_of(self) -> SuiteConfig:
        if self.evals is None and self.filter is None:
            raise ValueError("a suite needs 'filter', 'evals' or both")
        return self


class BackendDefault(SpecModel):
    """The backend used when ``--backend`` is absent, and its arguments."""

    name: str
    args: dict[str, str | list[str]] = Field(default_factory=dict)


class ProjectDefaults(SpecModel):
    """Project-wide defaults."""

    backend: BackendDefault | None = None
    eval_provider: str | None = None
    workers: int | None = Field(default=None, ge=1)
    judge_model: str | None = None

    @field_validator("backend", mode="before")
    @classmethod
    def _backend_shorthand(cls, value: Any) -> Any:
        return {"name": value} if isinstance(value, str) else value


class PluginsConfig(SpecModel):
    """Plugins loaded for every command in the project (CLI flags add to these)."""

    grader: list[str] = Field(default_factory=list)
    executor: list[str] = Field(default_factory=list)
    reporter: list[str] = Field(default_factory=list)
    backend: list[str] = Field(default_factory=list)
    eval_provider: list[str] = Field(default_factory=list)
    shard_strategy: list[str] = Field(default_factory=list)
    llm_provider: list[str] = Field(default_factory=list)

    @field_validator("*", mode="before")
    @classmethod
    def _lists(cls, value: Any) -> Any:
        return _as_list(value)


class LLMSettings(SpecModel):
    """How to reach models: provider name and its connection settings.

    ``api_key_env`` names the environment variable holding the key; keys never live in files.
    """

    provider: str = "openai"
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    timeout: Duration | None = None
    max_retries: int = Field(default=4, ge=0)
    max_concurrency: int = Field(default=16, ge=1)
    headers: dict[str, str] = Field(default_factory=dict)


CONFIGURABLE_KINDS = ("reporter", "eval_provider", "shard_strategy", "exporter")
"""Plugin kinds whose config comes from ``.vally.yaml`` ``plugin_config`` (graders,
executors, backends and LLM providers are configured in specs, flags and ``llm:``)."""


class ProjectConfig(SpecModel):
    """The whole ``.vally.yaml``.

    ``plugin_config`` configures plugins selected by name on the command line, keyed by
    kind and name, e.g. ``plugin_config: {reporter: {csv: {path: trials.csv}}}``.
    ``prices`` adds or overrides model prices (US dollars per million tokens) over the
    built-in list prices, e.g. ``prices: {my-model: {input: 3.0, output: 15.0}}``.
    """

    paths: PathsConfig = Field(default_factory=PathsConfig)
    suites: dict[str, SuiteConfig] = Field(default_factory=dict)
    environments: dict[str, EnvironmentConfig] = Field(default_factory=dict)
    defaults: ProjectDefaults = Field(default_factory=ProjectDefaults)
    plugins: PluginsConfig = Field(default_factory=PluginsConfig)
    params: dict[str, str] = Field(default_factory=dict)
    llm: LLMSettings = Field(default_factory=LLMSettings)
    plugin_config: dict[str, dict[str, dict[str, Any]]] = Field(default_factory=dict)
    prices: dict[str, ModelPrice] = Field(default_factory=dict)

    @field_validator("plugin_config")
    @classmethod
    def _plugin_config_kinds(
        cls, value: dict[str, dict[str, dict[str, Any]]]
    ) -> dict[str, dict[str, dict[str, Any]]]:
        unknown = sorted(set(value) - set(CONFIGURABLE_KINDS))
        if unknown:
            raise ValueError(
                f"plugin_config cannot configure {', '.join(unknown)}; "
                f"it takes {', '.join(CONFIGURABLE_KINDS)}"
            )
        return value

    @model_validator(mode="before")
    @classmethod
    def _nulls(cls, data: Any) -> Any:
        if isinstance(data, dict):
            return {k: v for k, v in data.items() if v is not None}
        return data

    @field_validator("params", mode="before")
    @classmethod
    def _params(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {str(k): str(v) for k, v in value.items()}
        return value
