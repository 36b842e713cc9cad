"""The ``yaml`` eval provider: vally's own eval.yaml files."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar

from vally import EmptyConfig, LoadedEval, Plugin, PluginMetadata, load_eval_file


class YamlEvalProvider(Plugin[EmptyConfig]):
    """Reads one ``eval.yaml`` (params resolved, validated, named environment resolved)."""

    metadata: ClassVar[PluginMetadata] = PluginMetadata(
        name="yaml",
        kind="eval_provider",
        description="vally eval specs written in YAML (eval.yaml)",
    )

    def load(self, path: Path, params: Mapping[str, str]) -> list[LoadedEval]:
        """Load ``path`` as one eval spec; ``.vally.yaml`` is found by walking up from it.

        Raises:
            ConfigError: The file is invalid (with file, line and column).
        """
        return [load_eval_file(path, cli_params=params)]
