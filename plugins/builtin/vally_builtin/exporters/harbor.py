"""The ``harbor`` exporter: one Harbor task folder per stimulus.

Harbor (and Terminal-Bench 2, NeMo Gym) read a task as a folder::

    <task>/
      task.toml              metadata and timeouts
      instruction.md         the prompt
      environment/Dockerfile the image the agent works in
      tests/test.sh          the verifier; writes the reward to /logs/verifier/reward.txt

The verifier script runs the stimulus's graders that can run without vally (``run-command``,
``file-exists``, ``file-not-exists``) and writes ``1`` when vally's verdict would pass (binary
mode: every grader passed; threshold mode: the weighted score reaches the threshold and no
required grader failed), else ``0``. Anything Harbor cannot express (several turns, graders
that read the agent's output, environment files, skills, MCP servers) is refused with a
:class:`~vally.ConfigError` naming the stimulus, before anything is written.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field

from vally import (
    ConfigError,
    EvalSpec,
    LoadedEval,
    Plugin,
    PluginMetadata,
    Stimulus,
    StrictConfig,
)

SUPPORTED_GRADERS = ("run-command", "file-exists", "file-not-exists")
"""Grader types the exported verifier script can run."""

_SAFE_GLOB = re.compile(r"^[A-Za-z0-9_.*?/-]+$")
"""Paths a ``file-exists`` grader may name in the script unquoted (so globs expand)."""

REWARD_FILE = "/logs/verifier/reward.txt"
"""Where a Harbor verifier writes its reward."""


class HarborExportConfig(StrictConfig):
    """Settings of the ``harbor`` exporter (``vally export ... -- key=value``).

    Attributes:
        base_image: The ``FROM`` image of every task's ``environment/Dockerfile``.
        workdir: The folder the agent and the verifier work in (the image's ``WORKDIR``).
        agent_timeout: Seconds the agent may work (``[agent] timeout_sec``).
        verifier_timeout: Seconds the verifier may take (``[verifier] timeout_sec``).
    """

    base_image: str = Field(default="ubuntu:24.04", min_length=1)
    workdir: str = Field(default="/app", pattern=r"^/")
    agent_timeout: float = Field(default=600.0, gt=0)
    verifier_timeout: float = Field(default=120.0, gt=0)


@dataclass(frozen=True)
class _Task:
    name: str
    files: dict[str, str]


class HarborExporter(Plugin[HarborExportConfig]):
    """Writes each stimulus of an eval spec as a Harbor task folder."""

    metadata: ClassVar[PluginMetadata] = PluginMetadata(
        name="harbor",
        kind="exporter",
        description="Harbor / Terminal-Bench 2 task folders (task.toml, instruction.md, "
        "environment/Dockerfile, tests/test.sh)",
    )

    def export(self, loaded: LoadedEval, output_dir: Path) -> list[Path]:
        """Write one task folder per stimulus under ``output_dir``; every stimulus is checked
        before the first file is written.

        Raises:
            ConfigError: A stimulus uses something Harbor cannot express.
        """
        tasks = [self._task(loaded, stimulus) for stimulus in loaded.spec.stimuli]
        written: list[Path] = []
        for task in tasks:
            folder = output_dir / task.name
            for rel, text in task.files.items():
                path = folder / rel
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8")
                if rel.endswith(".sh"):
                    path.chmod(0o755)
            written.append(folder)
        return written

    def _task(self, loaded: LoadedEval, stimulus: Stimulus) -> _Task:
        where = f"{loaded.source}: stimulus '{stimulus.name}'"
        if stimulus.is_multi_turn:
            raise _refuse(where, "has several turns", "give it a single 'prompt'")
        spec = loaded.spec
        return _Task(
            name=stimulus.name,
            files={
                "task.toml": self._toml(spec, stimulus),
                "instruction.md": (stimulus.prompt or "").rstrip("\n") + "\n",
                "environment/Dockerfile": self._dockerfile(spec, stimulus, where),
                "tests/test.sh": _test_script(spec, stimulus, where),
            },
        )

    def _toml(self, spec: EvalSpec, stimulus: Stimulus) -> str:
        cfg = self.config
        tags = sorted({*spec.tags.values(), *stimulus.tags.values()})
        lines = [
            'version = "1.0"',
            "",
            "[metadata]",
            f"source = {_toml_str('vally: ' + (spec.name or 'eval'))}",
            f"tags = [{', '.join(_toml_str(t) for t in tags)}]",
            "",
            "[verifier]",
            f"timeout_sec = {cfg.verifier_timeout:.1f}",
            "",
            "[agent]",
            f"timeout_sec = {cfg.agent_timeout:.1f}",
            "",
            "[environment]",
            "build_timeout_sec = 600.0",
        ]
        return "\n".join(lines) + "\n"

    def _dockerfile(self, spec: EvalSpec, stimulus: Stimulus, where: str) -> str:
        environments = [e for e in (spec.environment, stimulus.environment) if e is not None]
        commands: list[str] = []
        for env in environments:
            if isinstance(env, str):
                raise _refuse(where, f"uses the named environment '{env}'", "inline it")
            if env.files or env.skills or env.mcpServers or env.git or env.env:
                raise _refuse(
                    where,
                    "has environment files, skills, git, env or MCP servers",
                    "bake them into the base image (-- base_image=...) and keep only "
                    "environment 'commands'",
                )
            commands.extend(env.commands)
        lines = [f"FROM {self.config.base_image}", f"WORKDIR {self.config.workdir}"]
        lines += [f"RUN {command}" for command in commands]
        return "\n".join(lines) + "\n"


def _refuse(where: str, what: str, fix: str) -> ConfigError:
    return ConfigError(
        f"{where} {what}, which a Harbor task cannot express", hint=f"to export it, {fix}"
    )


def _toml_str(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def _check_command(grader_type: str, config: dict[str, Any], where: str) -> str:
    """The shell test for one grader: exits 0 when the grader would pass."""
    if grader_type == "run-command":
        unsupported = sorted(
            k for k in ("files", "stdout_contains", "stdout_matches") if config.get(k)
        )
        if unsupported:
            raise _refuse(where, f"run-command uses {', '.join(unsupported)}", "drop them")
        command = config["command"]
        run = command if isinstance(command, str) else shlex.join(command)
        env = " ".join(f"{k}={shlex.quote(str(v))}" for k, v in config.get("env", {}).items())
        cwd = config.get("cwd")
        inner = f"{'env ' + env + ' ' if env else ''}sh -c {shlex.quote(run)}"
        if cwd:
            inner = f"cd {shlex.quote(cwd)} && {inner}"
        expected = int(config.get("expected_exit_code", 0))
        return f'( {inner} ) >/dev/null 2>&1; [ "$?" -eq {expected} ]'
    path = str(config["path"])
    if "**" in path or not _SAFE_GLOB.match(path):
        raise _refuse(
            where,
            f"uses {grader_type} with the path {path!r}",
            "use a plain path or a one-folder glob (letters, digits, '._-/*?')",
        )
    found = f"ls -d {path} >/dev/null 2>&1"
    return found if grader_type == "file-exists" else f"! {found}"


def _test_script(spec: EvalSpec, stimulus: Stimulus, where: str) -> str:
    graders = [*spec.graders, *stimulus.graders]
    if not graders:
        raise _refuse(where, "has no graders", "add a run-command or file grader")
    threshold = spec.scoring.threshold
    lines = [
        "#!/bin/sh",
        f"# Exported by vally from eval '{spec.name or 'eval'}', stimulus '{stimulus.name}'.",
        "mkdir -p /logs/verifier",
        "total=0; passed=0; failed=0; required_failed=0",
    ]
    for grader in graders:
        if grader.type not in SUPPORTED_GRADERS:
            raise _refuse(
                where,
                f"uses the grader '{grader.type}'",
                f"use only {', '.join(SUPPORTED_GRADERS)} graders",
            )
        weight = spec.scoring.weights.get(grader.type, 1.0)
        check = _check_command(grader.type, grader.config, where)
        on_fail = "failed=$((failed+1))" + ("; required_failed=1" if grader.required else "")
        lines += [
            f"# grader: {grader.label}",
            f'total=$(awk "BEGIN {{print $total + {weight!r}}}")',
            f"if {check}; then",
            f'  passed=$(awk "BEGIN {{print $passed + {weight!r}}}"); echo "pass: '
            f'{_echo_safe(grader.label)}"',
            f'else {on_fail}; echo "fail: {_echo_safe(grader.label)}"; fi',
        ]
    if threshold is None:
        lines.append('if [ "$failed" -eq 0 ]; then reward=1; else reward=0; fi')
    else:
        lines.append(
            f'reward=$(awk "BEGIN {{s = ($total > 0) ? $passed / $total : 0; '
            f'print (s >= {threshold!r} - 1e-9 && $required_failed == 0) ? 1 : 0}}")'
        )
    lines.append(f'echo "$reward" > {REWARD_FILE}')
    return "\n".join(lines) + "\n"


def _echo_safe(label: str) -> str:
    return "".join(c for c in label if c.isalnum() or c in " -_.:")
