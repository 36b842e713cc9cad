"""The ``prompt-set`` exporter: an eval spec's prompts as JSONL, one line per stimulus."""

from __future__ import annotations

import json
from pathlib import Path
from typing import ClassVar

from pydantic import field_validator

from vally import LoadedEval, PluginMetadata, StrictConfig

__all__ = ["PromptSetConfig", "PromptSetExporter"]


class PromptSetConfig(StrictConfig):
    """Options of the exporter (``vally export ... -- key=value``).

    Attributes:
        file: The file name written in the output folder (default: the eval's name plus
            ``.jsonl``).
        tags: Whether each line carries the stimulus tags.
    """

    file: str | None = None
    tags: bool = True

    @field_validator("file")
    @classmethod
    def _plain_name(cls, value: str | None) -> str | None:
        if value is not None and (not value.strip() or Path(value).name != value):
            raise ValueError(f"file must be a plain file name, got {value!r}")
        return value


class PromptSetExporter:
    """Writes each stimulus's name, prompts and tags as one JSON line."""

    metadata: ClassVar[PluginMetadata] = PluginMetadata(
        name="prompt-set",
        kind="exporter",
        description="An eval's prompts as a JSONL prompt set (one line per stimulus).",
    )
    Config: ClassVar[type[PromptSetConfig]] = PromptSetConfig

    def __init__(self, config: PromptSetConfig | None = None) -> None:
        self.config = config if config is not None else PromptSetConfig()

    def export(self, loaded: LoadedEval, output_dir: Path) -> list[Path]:
        """Write the prompt set and return its path."""
        spec = loaded.spec
        lines = []
        for stimulus in spec.stimuli:
            line: dict[str, object] = {"name": stimulus.name, "prompts": stimulus.prompts}
            if self.config.tags:
                line["tags"] = {**spec.tags, **stimulus.tags}
            lines.append(json.dumps(line, ensure_ascii=False) + "\n")
        path = output_dir / (self.config.file or f"{spec.name or loaded.source.stem}.jsonl")
        path.write_text("".join(lines), encoding="utf-8")
        return [path]
