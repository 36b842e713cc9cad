"""The options of the ``copilot`` executor (its ``executor.config`` in an eval spec)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from vally import StrictConfig

PERMISSION_KINDS = ("shell", "write", "read", "mcp", "url", "memory", "custom-tool")
"""Kinds of permission request the Copilot CLI sends before running a tool."""

PermissionKind = Literal["shell", "write", "read", "mcp", "url", "memory", "custom-tool"]

DEFAULT_PERMISSIONS: tuple[PermissionKind, ...] = ("shell", "write", "read", "mcp")
"""Kinds approved by default: the workspace tools and the trial's MCP servers."""

DEFAULT_TOKEN_ENV = ("COPILOT_GITHUB_TOKEN", "GH_TOKEN", "GITHUB_TOKEN")
"""Variables searched, in order, for a GitHub token when no BYOK provider is configured."""


class CopilotConfig(StrictConfig):
    """Options of the ``copilot`` executor.

    Attributes:
        cli_path: The Copilot CLI: on the host for the ``local`` backend, inside the image
            for ``docker``. Default: ``$COPILOT_CLI_PATH``, else ``copilot`` on ``PATH``
            (an npm install's loader is replaced by the native binary it would start).
        model: Model used when the run gives none (``--model`` / ``defaults.model`` win).
        provider: ``byok`` (an OpenAI-compatible server: ``base_url``, else the project's
            ``llm:`` settings), ``github`` (a Copilot account through a token variable) or
            ``auto`` (``byok`` when a base URL is known, else ``github``).
        base_url: The model server for ``byok``, e.g. ``http://127.0.0.1:8000/v1``.
        api_key_env: The variable holding the server's API key (default: the project's
            ``llm.api_key_env``; no key is sent when the variable is unset).
        wire_api: ``completions`` (Chat Completions) or ``responses`` (Responses API).
        provider_type: ``openai``, ``azure`` or ``anthropic``.
        token_env: Variables searched for a GitHub token (``github`` provider).
        permissions: Kinds of tool permission approved; every other request is denied.
            ``read`` and ``write`` are approved only inside the workspace, ``mcp`` only for
            the trial's servers and their allowed tools.
        available_tools: Only these Copilot tools are offered to the model (None: all).
        excluded_tools: Copilot tools never offered to the model.
        system_message: Text appended to Copilot's system prompt.
        pass_env: Host variables passed to the CLI besides the built-in allow-list.
        cache_dir: Folder shared by trials for the CLI's unpacked runtime (default on the
            host: ``$XDG_CACHE_HOME/vally/copilot``, else ``~/.cache/vally/copilot``; in a
            container: the image's ``XDG_CACHE_HOME``, else the trial's home).
        startup_timeout: Seconds for the CLI to start and open the session.
        log_level: The CLI's log level.
    """

    cli_path: str | None = None
    model: str | None = None
    provider: Literal["auto", "byok", "github"] = "auto"
    base_url: str | None = None
    api_key_env: str | None = None
    wire_api: Literal["completions", "responses"] = "completions"
    provider_type: Literal["openai", "azure", "anthropic"] = "openai"
    token_env: list[str] = Field(default_factory=lambda: list(DEFAULT_TOKEN_ENV))
    permissions: list[PermissionKind] = Field(default_factory=lambda: list(DEFAULT_PERMISSIONS))
    available_tools: list[str] | None = None
    excluded_tools: list[str] = Field(default_factory=list)
    system_message: str | None = None
    pass_env: list[str] = Field(default_factory=list)
    cache_dir: str | None = None
    startup_timeout: float = Field(default=60.0, gt=0)
    log_level: Literal["none", "error", "warning", "info", "debug", "all"] = "error"

    @field_validator("base_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError(
                f"base_url must start with http:// or https://, got {value!r} "
                "(e.g. http://127.0.0.1:8000/v1)"
            )
        return value
