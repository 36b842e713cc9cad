"""An example third-party vally eval provider: every row of a JSONL or CSV dataset is a
stimulus.

A row has a name, a prompt and, optionally, an expected answer, which becomes an
``output-contains`` grader. Column names and the agent to run come from the provider's
``Config``; each can be overridden per project or per run with params named
``dataset.<field>`` (``--param dataset.prompt_column=question``, or ``params:`` in
``.vally.yaml``), because ``--eval-plugin`` builds the provider with its default config.
"""

from __future__ import annotations

import csv
import json
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field, ValidationError

from vally import ConfigError, EvalSpec, LoadedEval, PluginMetadata, StrictConfig

__all__ = ["DatasetEvalProvider", "DatasetProviderConfig", "read_rows"]

PARAM_PREFIX = "dataset."
"""Params starting with this prefix override fields of the provider's config."""


class DatasetProviderConfig(StrictConfig):
    """Options of the ``dataset`` eval provider.

    Attributes:
        name_column: Column holding the stimulus name (rows without one are named ``row-N``).
        prompt_column: Column holding the prompt (required in every row).
        expected_column: Column holding the expected answer; a non-empty value adds an
            ``output-contains`` grader.
        tags_column: Column holding tags (a JSON object, or ``key=value;key=value`` in CSV).
        eval_name: The eval's name (default: the dataset file's stem).
        executor: The executor running each stimulus.
        command: For the ``command``/``script`` executors: the agent command line (split
            like a shell would; ``{dataset_dir}`` is replaced by the dataset's folder).
        files: Files copied into every workspace, relative to the dataset's folder.
        runs: Trials per stimulus.
        timeout: Per-trial timeout (``30s``, ``5m``).
        case_sensitive: Whether the expected answer must match case.
    """

    name_column: str = "name"
    prompt_column: str = "prompt"
    expected_column: str = "expected"
    tags_column: str = "tags"
    eval_name: str | None = None
    executor: str = "script"
    command: str | None = None
    files: list[str] = Field(default_factory=list)
    runs: int = Field(default=1, ge=1)
    timeout: str = "2m"
    case_sensitive: bool = False


def read_rows(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """The rows of a ``.jsonl`` or ``.csv`` file with their 1-based line numbers.

    Raises:
        ConfigError: The file is unreadable, has another suffix, or a line is not a JSON
            object.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read dataset {path}: {exc}") from exc
    suffix = path.suffix.lower()
    rows: list[tuple[int, dict[str, Any]]] = []
    if suffix == ".jsonl":
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ConfigError(
                    f"{path}:{number}: not valid JSON: {exc.msg}",
                    hint="each line of a .jsonl dataset is one JSON object",
                ) from exc
            if not isinstance(value, dict):
                raise ConfigError(f"{path}:{number}: expected a JSON object, got {value!r}")
            rows.append((number, value))
    elif suffix == ".csv":
        reader = csv.DictReader(text.splitlines())
        for index, row in enumerate(reader, start=2):  # line 1 is the header
            rows.append((index, {k: v for k, v in row.items() if k is not None}))
    else:
        raise ConfigError(
            f"dataset {path} has suffix {path.suffix!r}; expected .jsonl or .csv",
            hint="pass the dataset with --eval-spec and this provider with --eval-plugin",
        )
    return rows


def _tags(value: Any, where: str) -> dict[str, str]:
    if value in (None, ""):
        return {}
    if isinstance(value, str):
        stripped = value.strip()
        if stripped.startswith("{"):
            value = json.loads(stripped)
        else:
            pairs = [p.partition("=") for p in stripped.split(";") if p.strip()]
            return {k.strip(): v.strip() for k, _, v in pairs}
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: tags must be an object or key=value;key=value")
    return {str(k): str(v) for k, v in value.items()}


class DatasetEvalProvider:
    """Reads a JSONL or CSV dataset as one eval spec: one stimulus per row."""

    metadata: ClassVar[PluginMetadata] = PluginMetadata(
        name="dataset",
        kind="eval_provider",
        description="Stimuli from a JSONL or CSV dataset (name, prompt, expected answer).",
    )
    Config: ClassVar[type[DatasetProviderConfig]] = DatasetProviderConfig

    def __init__(self, config: DatasetProviderConfig | None = None) -> None:
        self.config = config if config is not None else DatasetProviderConfig()

    def settings(self, params: Mapping[str, str]) -> DatasetProviderConfig:
        """The config with ``dataset.<field>`` params applied.

        Raises:
            ConfigError: A param names an unknown field or has an invalid value.
        """
        overrides: dict[str, Any] = {}
        for key, value in params.items():
            if key.startswith(PARAM_PREFIX):
                field = key[len(PARAM_PREFIX) :]
                if field == "files":
                    overrides[field] = [f for f in value.split(",") if f]
                else:
                    overrides[field] = value
        if not overrides:
            return self.config
        try:
            return DatasetProviderConfig.model_validate(
                {**self.config.model_dump(), **overrides}
            )
        except ValidationError as exc:
            raise ConfigError(
                f"invalid dataset.* params: {exc.errors()[0]['loc']}: {exc.errors()[0]['msg']}",
                hint=f"known fields: {', '.join(DatasetProviderConfig.model_fields)}",
            ) from exc

    def load(self, path: Path, params: Mapping[str, str]) -> list[LoadedEval]:
        """Read ``path`` and return one eval spec with a stimulus per row.

        Raises:
            ConfigError: The file is unreadable, a row has no prompt, names repeat, or the
                resulting spec is invalid.
        """
        cfg = self.settings(params)
        stimuli: list[dict[str, Any]] = []
        seen: set[str] = set()
        for number, row in read_rows(path):
            where = f"{path}:{number}"
            prompt = row.get(cfg.prompt_column)
            if not isinstance(prompt, str) or not prompt.strip():
                raise ConfigError(
                    f"{where}: no prompt in column {cfg.prompt_column!r}",
                    hint="set dataset.prompt_column to the column holding the prompts",
                )
            name = str(row.get(cfg.name_column) or f"row-{len(stimuli) + 1}")
            if name in seen:
                raise ConfigError(f"{where}: stimulus name {name!r} appears twice")
            seen.add(name)
            graders: list[dict[str, Any]] = []
            expected = row.get(cfg.expected_column)
            if expected not in (None, ""):
                graders.append(
                    {
                        "type": "output-contains",
                        "config": {
                            "substring": str(expected),
                            "case_sensitive": cfg.case_sensitive,
                        },
                    }
                )
            stimuli.append(
                {
                    "name": name,
                    "prompt": prompt,
                    "graders": graders,
                    "tags": _tags(row.get(cfg.tags_column), where),
                }
            )
        if not stimuli:
            raise ConfigError(f"dataset {path} has no rows")
        executor: dict[str, Any] = {"name": cfg.executor, "config": {}}
        if cfg.command is not None:
            command = cfg.command.replace("{dataset_dir}", str(path.parent.resolve()))
            executor["config"]["command"] = shlex.split(command)
        document: dict[str, Any] = {
            "name": cfg.eval_name or path.stem,
            "description": f"Stimuli read from {path.name}",
            "defaults": {"runs": cfg.runs, "timeout": cfg.timeout, "executor": executor},
            "stimuli": stimuli,
        }
        if cfg.files:
            document["environment"] = {
                "files": [{"src": f} for f in cfg.files]
            }
        try:
            spec = EvalSpec.model_validate(document)
        except ValidationError as exc:
            raise ConfigError(f"dataset {path} gives an invalid eval spec: {exc}") from exc
        return [LoadedEval(spec=spec, source=path.resolve(), raw=document)]
