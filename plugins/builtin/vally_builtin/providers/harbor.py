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


def _read_toml(task_file: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(task_file.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{task_file}: invalid TOML: {exc}") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{task_file}: cannot be read: {exc}") from exc


def _section(settings: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    value = settings.get(name, {})
    return value if isinstance(value, Mapping) else {}


def _spec_document(folder: Path, settings: Mapping[str, Any]) -> dict[str, Any]:
    """The eval document for the task in ``folder``.

    Raises:
        ConfigError: ``instruction.md`` or ``tests/test.sh`` is missing.
    """
    instruction = folder / "instruction.md"
    if not instruction.is_file():
        raise ConfigError(f"the Harbor task {folder} has no instruction.md")
    if not (folder / "tests" / "test.sh").is_file():
        raise ConfigError(f"the Harbor task {folder} has no tests/test.sh (its verifier)")
    verifier: dict[str, Any] = {"tests": "tests"}
    verifier_timeout = _section(settings, "verifier").get("timeout_sec")
    if isinstance(verifier_timeout, int | float) and verifier_timeout > 0:
        verifier["timeout"] = f"{float(verifier_timeout):g}s"
    stimulus: dict[str, Any] = {
        "name": folder.name,
        "prompt": instruction.read_text(encoding="utf-8"),
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
