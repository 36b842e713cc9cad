"""The ``claude-code`` executor: Claude Code (``claude -p``) as a preset over ``command``.

Example (``eval.yaml``)::

    defaults:
      executor:
        name: claude-code
        config:
          permission_mode: acceptEdits        # when running as root, see below
          allowed_tools: [Bash, Read, Edit, Write, Glob, Grep]
    environment:
      env: {ANTHROPIC_API_KEY: "..."}

Each turn runs ``claude -p --output-format stream-json --verbose`` with the prompt on
stdin; turns 2..n add ``--resume <session id>``. The chosen model goes to ``--model``; the
trial's ``max_turns`` constraint (or ``max_turns`` here) to ``--max-turns``, and a run
stopped by it ends with ``endReason: max_turns``. Skills are copied to
``.claude/skills/<name>/``, where Claude Code discovers them; the trial's MCP servers
(possibly none) are written to ``.vally/claude-code-mcp.json`` and passed with
``--mcp-config ... --strict-mcp-config``, so no other server configuration is used.

Claude Code keeps its settings, sessions and login in ``CLAUDE_CONFIG_DIR``; by default
each trial gets its own (``.vally/claude`` in the workspace), so nothing of the user's
setup leaks into an eval. Set ``config_dir: null`` to use the user's own.

Running as root (the usual user in containers): Claude Code refuses
``--dangerously-skip-permissions`` (``permission_mode: bypassPermissions``) there. Either
use ``permission_mode: acceptEdits`` with ``allowed_tools`` listing what the agent may run
without asking (``Bash``, or narrower rules such as ``Bash(npm test)``), or, inside a
sandbox you trust, set ``IS_SANDBOX=1`` in ``env``, which Claude Code reads as permission
to bypass its prompts as root.

The CLI is started directly, as the leader of its process group: with the ``local``
backend a timeout's SIGTERM reaches the CLI itself, so it can stop the tools it started
before everything left is killed.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from vally import ExecutionError, ExecutorMetadata, ExecutorOptions, StrictConfig

from .cli_preset import CliPreset
from .command import CommandExecutor, McpConfigFile

PermissionMode = Literal[
    "bypassPermissions", "acceptEdits", "auto", "default", "dontAsk", "manual", "plan"
]

ROOT_HINT = (
    "Claude Code refuses to bypass permissions as root: set permission_mode: acceptEdits "
    "and allowed_tools (e.g. [Bash, Read, Edit, Write]) in the executor config, or set "
    "IS_SANDBOX=1 in its env inside a sandbox you trust"
)


class ClaudeCodeExecutor(CliPreset["ClaudeCodeExecutor.Config"]):
    """Runs Claude Code once per turn (resuming its session) and records its stream."""

    metadata: ClassVar[ExecutorMetadata] = ExecutorMetadata(
        name="claude-code",
        description="Claude Code (claude -p, stream-json) with resume, skills and MCP.",
        multi_turn=True,
        needs_workspace=True,
    )
    skills_dir: ClassVar[str] = ".claude/skills"
    install_hint: ClassVar[str] = (
        "install Claude Code where the agent runs (npm install -g @anthropic-ai/claude-code) "
        "or set config.program to the claude program's path"
    )

    class Config(StrictConfig):
        """Options of the ``claude-code`` executor.

        Attributes:
            program: The ``claude`` program (a name on ``PATH`` or a path).
            permission_mode: ``--permission-mode``. ``bypassPermissions`` (default) runs
                every tool without asking; Claude Code refuses it as root (then use
                ``acceptEdits`` with ``allowed_tools``, see ``docs/agents.md``).
            allowed_tools: ``--allowedTools`` rules, e.g. ``["Bash", "Edit"]``.
            disallowed_tools: ``--disallowedTools`` rules.
            max_turns: ``--max-turns``; default: the trial's ``max_turns`` constraint.
            base_url: ``ANTHROPIC_BASE_URL`` (an Anthropic-compatible endpoint).
            config_dir: Workspace folder used as ``CLAUDE_CONFIG_DIR`` (a fresh one per
                trial); ``null`` keeps the user's own configuration and login.
            env: Environment variables for the CLI (added to the spec's ``env``).
            args: More arguments, added after the preset's.
            output_limit: Bytes of stdout and of stderr kept per turn.
        """

        program: str = "claude"
        permission_mode: PermissionMode = "bypassPermissions"
        allowed_tools: list[str] = Field(default_factory=list)
        disallowed_tools: list[str] = Field(default_factory=list)
        max_turns: int | None = Field(default=None, gt=0)
        base_url: str | None = None
        config_dir: str | None = ".vally/claude"
        env: dict[str, str] = Field(default_factory=dict)
        args: list[str] = Field(default_factory=list)
        output_limit: int = Field(default=50_000_000, gt=0)

    def command_config(self, options: ExecutorOptions) -> CommandExecutor.Config:
        """``claude -p`` with the preset's flags, resume, MCP file and environment."""
        cfg = self.config
        flags = [
            "--output-format",
            "stream-json",
            "--verbose",
            "--permission-mode",
            cfg.permission_mode,
        ]
        if cfg.allowed_tools:
            flags += ["--allowedTools", ",".join(cfg.allowed_tools)]
        if cfg.disallowed_tools:
            flags += ["--disallowedTools", ",".join(cfg.disallowed_tools)]
        flags += self.model_flags(options)
        max_turns = cfg.max_turns or options.constraints.max_turns
        if max_turns:
            flags += ["--max-turns", str(max_turns)]
        # Always (with no servers, an empty list): the trial's servers and no others.
        mcp = McpConfigFile(format="claude-code", path=".vally/claude-code-mcp.json")
        flags += ["--mcp-config", "{mcp_config}", "--strict-mcp-config"]
        env = {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
        if cfg.config_dir is not None:
            env["CLAUDE_CONFIG_DIR"] = "{workdir}/" + cfg.config_dir
        if cfg.base_url:
            env["ANTHROPIC_BASE_URL"] = cfg.base_url
        return self.stdin_config(
            command=[cfg.program, "-p", *flags, *cfg.args],
            resume=[cfg.program, "-p", "--resume", "{session_id}", *flags, *cfg.args],
            events="claude-code",
            env=env,
            mcp_config=mcp,
        )

    def crash_hint(self, error: ExecutionError) -> str | None:
        """Explain the refusal to bypass permissions as root."""
        return ROOT_HINT if "root/sudo" in error.message else None
