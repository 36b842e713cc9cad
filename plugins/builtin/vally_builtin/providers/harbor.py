"""The ``harbor`` eval provider: a Harbor (Terminal-Bench 2) task folder as an eval.

Point ``--eval-spec`` at a task's ``task.toml`` (repeat it for several tasks) and select the
provider with ``--eval-plugin harbor``. Each task becomes an eval with one stimulus named
after the task folder:

* ``instruction.md`` is the prompt;
* ``tests/`` runs after the agent as the ``harbor-verifier`` grader, whose score is the
  reward the tests write to ``/logs/verifier/reward.txt`` (passing at reward 1);
* ``[verifier] timeout_sec`` bounds the tests, ``[agent] timeout_sec`` the agent;
* ``[metadata]`` strings (difficulty, category) become tags.

Which agent runs the tasks is the provider's ``defaults`` setting (the eval ``defaults:``
block: executor, model, runs, timeout), given in ``.vally.yaml``::

    plugin_config:
      eval_provider:
        harbor:
          defaults: {executor: claude-code, model: claude-sonnet-4-5}

The image is the task's ``environment/Dockerfile``, built by the docker backend:
``--backend docker --backend-args dockerfile=<task>/environment/Dockerfile``.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field, ValidationError

from vally import ConfigError, EvalSpec, LoadedEval, Plugin, PluginMetadata, StrictConfig

TASK_FILE = "task.toml"
"""The file that marks a Harbor task folder."""


class HarborProviderConfig(StrictConfig):
    """Settings of the ``harbor`` eval provider (``.vally.yaml`` ``plugin_config``).

    Attributes:
        defaults: The eval ``defaults:`` block every task gets (``executor``, ``model``,
            ``runs``, ``timeout``, ...), validated as in an eval spec.
    """

    defaults: dict[str, Any] = Field(default_factory=dict)


class HarborEvalProvider(Plugin[HarborProviderConfig]):
    """Reads one Harbor task folder (``task.toml``, ``instruction.md``, ``tests/``)."""

    metadata: ClassVar[PluginMetadata] = PluginMetadata(
        name="harbor",
        kind="eval_provider",
        description="Harbor / Terminal-Bench 2 task folders (point --eval-spec at task.toml)",
    )

    def load(self, path: Path, params: Mapping[str, str]) -> list[LoadedEval]:
        """Load the task whose ``task.toml`` (or folder) is ``path``.

        Raises:
            ConfigError: The folder is not a Harbor task, or a file in it is invalid.
        """
        folder = path if path.is_dir() else path.parent
        task_file = folder / TASK_FILE
        if not task_file.is_file():
            raise ConfigError(
                f"{path} is not a Harbor task: no {TASK_FILE} in {folder}",
                hint="point --eval-spec at a task folder's task.toml",
            )
        settings = _read_toml(task_file)
        raw = _spec_document(folder, settings)
        if self.config.defaults:
            raw["defaults"] = dict(self.config.defaults)
        try:
            spec = EvalSpec.model_validate(raw)
        except ValidationError as exc:
            raise ConfigError(f"{task_file}: the task does not make a valid eval: {exc}") from exc
        return [LoadedEval(spec=spec, source=task_file, raw=raw)]


TASK_FILE_BYTES = 1024 * 1024
"""The largest ``task.toml`` or ``instruction.md`` read (1 MiB): a prompt is text, not data."""


def read_task_text(path: Path, limit: int = TASK_FILE_BYTES) -> str:
    """A task folder's text file, read link-safe: a symbolic link is refused (a task must not
    make a host file its prompt), so is a file over ``limit`` bytes, and text that is not
    UTF-8 is a task error naming the byte.

    Raises:
        ConfigError: The file is a link, too large, unreadable or not UTF-8.
    """
    if path.is_symlink():
        raise ConfigError(
            f"{path} is a symbolic link; a Harbor task's files are read only from the task folder",
            hint="replace the link with the file itself",
        )
    try:
        with path.open("rb") as handle:
            data = handle.read(limit + 1)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read: {exc.strerror or exc}") from exc
    if len(data) > limit:
        raise ConfigError(
            f"{path} is larger than {limit // 1024} KiB",
            hint="a task's instruction and settings are text; move data into the task's "
            "environment",
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start})",
            hint="save the file as UTF-8",
        ) from None


def _read_toml(task_file: Path) -> dict[str, Any]:
    text = read_task_text(task_file)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{task_file}: invalid TOML: {exc}") from exc


def _section(settings: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    value = settings.get(name, {})
    return value if isinstance(value, Mapping) else {}


def _spec_document(folder: Path, settings: Mapping[str, Any]) -> dict[str, Any]:
    """The eval document for the task in ``folder``.

    Raises:
        ConfigError: ``instruction.md`` or ``tests/test.sh`` is missing.
    """
    instruction = folder / "instruction.md"
    if not instruction.is_file() and not instruction.is_symlink():
        raise ConfigError(f"the Harbor task {folder} has no instruction.md")
    if not (folder / "tests" / "test.sh").is_file():
        raise ConfigError(f"the Harbor task {folder} has no tests/test.sh (its verifier)")
    verifier: dict[str, Any] = {"tests": "tests"}
    verifier_timeout = _section(settings, "verifier").get("timeout_sec")
    if isinstance(verifier_timeout, int | float) and verifier_timeout > 0:
        verifier["timeout"] = f"{float(verifier_timeout):g}s"
    stimulus: dict[str, Any] = {
        "name": folder.name,
        "prompt": read_task_text(instruction),
        "graders": [{"type": "harbor-verifier", "config": verifier, "required": True}],
        "tags": {
            k: v
            for k, v in _section(settings, "metadata").items()
            if isinstance(v, str | int | float | bool)
        },
    }
    agent_timeout = _section(settings, "agent").get("timeout_sec")
    if isinstance(agent_timeout, int | float) and agent_timeout > 0:
        stimulus["constraints"] = {"max_duration": f"{float(agent_timeout):g}s"}
    return {"name": folder.name, "tags": {"source": "harbor"}, "stimuli": [stimulus]}
