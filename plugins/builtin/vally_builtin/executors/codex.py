"""The ``codex`` executor: OpenAI Codex (``codex exec --json``) as a preset over
``command``.

Example (``eval.yaml``), with a model server of one's own::

    defaults:
      executor:
        name: codex
        config:
          provider:
            base_url: http://127.0.0.1:8000/v1
            env_key: MY_API_KEY             # the variable holding the key (in env)

Each turn runs ``codex exec --json --skip-git-repo-check`` with the prompt on stdin; turns
2..n run ``codex exec resume <thread id>``. The chosen model goes to ``--model``. A
``provider`` becomes ``-c model_provider=...`` and ``-c model_providers.<name>.*``
overrides (``wire_api: responses`` by default); ``config`` adds any other ``-c`` override.
Skills are copied to ``.agents/skills/<name>/``, where Codex discovers them.

Codex keeps its configuration, sessions and login in ``CODEX_HOME``; by default each trial
gets its own (``.vally/codex`` in the workspace) and the trial's MCP servers are written to
its ``config.toml``. With ``codex_home: null`` the user's own is used (and MCP servers
cannot be given). With a fresh home, Codex authenticates with ``CODEX_API_KEY`` /
``OPENAI_API_KEY`` from ``env`` or with the provider's ``env_key``.

``sandbox: none`` (default) passes ``--dangerously-bypass-approvals-and-sandbox``: the
backend is the sandbox, and Codex's own one often cannot start inside containers. Other
values pass ``--sandbox <mode>``. Codex has no turn limit of its own; a ``max_turns``
constraint is checked on the trajectory after the run.

The CLI is started directly, as the leader of its process group: with the ``local``
backend a timeout's SIGTERM reaches it (the ``codex`` launcher forwards it to the agent),
so it can stop its tools before everything left is killed.
"""

from __future__ import annotations

import json
from typing import ClassVar, Literal

from pydantic import Field

from vally import ExecutorMetadata, ExecutorOptions, StrictConfig, UnsupportedError

from .cli_preset import CliPreset
from .command import CommandExecutor, McpConfigFile


class CodexProvider(StrictConfig):
    """A custom model provider for Codex.

    Attributes:
        name: The provider's id in Codex's configuration.
        base_url: The API's base URL (ends in ``/v1`` for OpenAI-compatible servers).
        wire_api: ``responses`` (the Responses API) or ``chat`` (Chat Completions).
        env_key: The environment variable holding the API key, if the server needs one.
    """

    name: str = Field(default="vally", pattern=r"^[A-Za-z0-9_-]+$")
    base_url: str
    wire_api: Literal["responses", "chat"] = "responses"
    env_key: str | None = None


class CodexExecutor(CliPreset["CodexExecutor.Config"]):
    """Runs Codex once per turn (resuming its thread) and records its stream."""

    metadata: ClassVar[ExecutorMetadata] = ExecutorMetadata(
        name="codex",
        description="OpenAI Codex (codex exec --json) with resume, skills and MCP.",
        multi_turn=True,
        needs_workspace=True,
    )
    skills_dir: ClassVar[str] = ".agents/skills"
    install_hint: ClassVar[str] = (
        "install Codex where the agent runs (npm install -g @openai/codex) "
        "or set config.program to the codex program's path"
    )

    class Config(StrictConfig):
        """Options of the ``codex`` executor.

        Attributes:
            program: The ``codex`` program (a name on ``PATH`` or a path).
            sandbox: ``none`` (bypass Codex's sandbox and approvals), ``read-only``,
                ``workspace-write`` or ``danger-full-access``.
            provider: A custom model provider (a server of one's own, or a proxy).
            config: More ``-c key=value`` overrides (values written as TOML/JSON).
            codex_home: Workspace folder used as ``CODEX_HOME`` (a fresh one per trial,
                which also gets the trial's MCP servers); ``null`` keeps the user's.
            env: Environment variables for the CLI (added to the spec's ``env``).
            args: More ``codex exec`` arguments, added after the preset's.
            output_limit: Bytes of stdout and of stderr kept per turn.
        """

        program: str = "codex"
        sandbox: Literal["none", "read-only", "workspace-write", "danger-full-access"] = "none"
        provider: CodexProvider | None = None
        config: dict[str, str | int | float | bool] = Field(default_factory=dict)
        codex_home: str | None = ".vally/codex"
        env: dict[str, str] = Field(default_factory=dict)
        args: list[str] = Field(default_factory=list)
        output_limit: int = Field(default=50_000_000, gt=0)

    def _overrides(self) -> list[str]:
        cfg = self.config
        values: dict[str, str | int | float | bool] = {}
        if cfg.provider is not None:
            key = f"model_providers.{cfg.provider.name}"
            values["model_provider"] = cfg.provider.name
            values[f"{key}.name"] = cfg.provider.name
            values[f"{key}.base_url"] = cfg.provider.base_url
            values[f"{key}.wire_api"] = cfg.provider.wire_api
            if cfg.provider.env_key:
                values[f"{key}.env_key"] = cfg.provider.env_key
        values.update(cfg.config)
        flags: list[str] = []
        for key, value in values.items():
            flags += ["-c", f"{key}={json.dumps(value)}"]
        return flags

    def command_config(self, options: ExecutorOptions) -> CommandExecutor.Config:
        """``codex exec`` with the preset's flags, resume, MCP file and environment.

        Raises:
            UnsupportedError: MCP servers with ``codex_home: null``.
        """
        cfg = self.config
        flags = ["--json", "--skip-git-repo-check"]
        if cfg.sandbox == "none":
            flags.append("--dangerously-bypass-approvals-and-sandbox")
        else:
            flags += ["--sandbox", cfg.sandbox]
        flags += [*self.model_flags(options), *self._overrides(), *cfg.args]
        env: dict[str, str] = {}
        mcp = None
        if cfg.codex_home is not None:
            # Written even with no servers: Codex refuses a CODEX_HOME that does not exist.
            env["CODEX_HOME"] = "{workdir}/" + cfg.codex_home
            mcp = McpConfigFile(format="codex", path=f"{cfg.codex_home}/config.toml")
        elif options.mcp_servers:
            raise UnsupportedError(
                "executor 'codex' cannot give MCP servers to Codex with codex_home: null",
                hint="leave codex_home at its default so the servers go to its config.toml",
            )
        return self.stdin_config(
            command=[cfg.program, "exec", *flags, "-"],
            resume=[cfg.program, "exec", "resume", *flags, "{session_id}", "-"],
            events="codex",
            env=env,
            mcp_config=mcp,
        )
