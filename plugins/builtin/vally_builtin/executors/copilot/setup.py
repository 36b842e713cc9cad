"""What the ``copilot`` executor prepares before a session: the SDK, the CLI, the model
provider and the CLI's environment.

The CLI never sees the user's environment: it gets :data:`BASE_ENV` variables from the host
(plus ``pass_env``), the trial's ``environment.env``, an isolated home (``HOME``,
``COPILOT_HOME`` and the XDG folders) and a cache folder shared by trials (where the CLI
unpacks its runtime on first start).
"""

from __future__ import annotations

import glob
import importlib
import os
import platform
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from vally import ExecutorOptions, SetupError

from .config import CopilotConfig

CLI_VERSION = "1.0.102"
"""The ``@github/copilot`` npm version vally is tested with."""

SDK_VERSION = "1.0.27"
"""The ``github-copilot-sdk`` PyPI version vally is tested with."""

INSTALL_CLI = f"npm install -g @github/copilot@{CLI_VERSION}"
INSTALL_SDK = "pip install 'vally[copilot]'"

BASE_ENV = (
    "PATH",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TERM",
    "TZ",
    "TMPDIR",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
)
"""Host variables the CLI inherits (when set)."""


def import_sdk() -> ModuleType:
    """The ``copilot`` module of the official SDK.

    Raises:
        SetupError: The SDK is not installed.
    """
    try:
        return importlib.import_module("copilot")
    except ImportError as exc:
        raise SetupError(
            "the copilot executor needs the GitHub Copilot SDK (github-copilot-sdk), which "
            "is not installed",
            hint=f"install it with: {INSTALL_SDK} (and the CLI with: {INSTALL_CLI})",
        ) from exc


def _native_binary(loader: Path) -> Path | None:
    """The native CLI an npm ``@github/copilot`` loader would start, when installed."""
    machine = platform.machine().lower()
    arch = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64"}.get(machine, machine)
    system = platform.system().lower()
    scope = loader.parent.parent  # node_modules/@github
    for candidate in sorted(glob.glob(str(scope / f"copilot-{system}*-{arch}" / "copilot"))):
        if os.access(candidate, os.X_OK):
            return Path(candidate)
    return None


def resolve_cli(config: CopilotConfig) -> str:
    """The host path of the Copilot CLI (``local`` backend).

    Raises:
        SetupError: No CLI at the configured path, in ``$COPILOT_CLI_PATH`` or on ``PATH``.
    """
    given = config.cli_path or os.environ.get("COPILOT_CLI_PATH") or "copilot"
    found = shutil.which(given) if os.sep not in given else given
    if not found or not os.path.exists(found):
        where = "config.cli_path" if config.cli_path else "$COPILOT_CLI_PATH or PATH"
        raise SetupError(
            f"the copilot executor cannot find the GitHub Copilot CLI ({given!r} via {where})",
            hint=f"install it with: {INSTALL_CLI}, or set config.cli_path to the binary",
        )
    real = Path(found).resolve()
    if real.suffix in {".js", ".mjs", ".cjs"}:
        native = _native_binary(real)
        if native is not None:
            return str(native)
    return str(real)


def default_cache_dir(config: CopilotConfig) -> Path:
    """The folder shared by trials for the CLI's unpacked runtime."""
    if config.cache_dir:
        return Path(config.cache_dir).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "vally" / "copilot"


@dataclass(frozen=True)
class Provider:
    """How the session reaches its model.

    Attributes:
        byok: The SDK ``provider`` dict (``type``, ``base_url``, ``api_key``, ``wire_api``)
            for an OpenAI-compatible server; None for a Copilot account.
        github_token: The account's token (None with ``byok``).
        model: The model the session runs (None: the account's default).
    """

    byok: dict[str, Any] | None
    github_token: str | None
    model: str | None

    @property
    def base_url(self) -> str | None:
        """The BYOK server's URL."""
        return str(self.byok["base_url"]) if self.byok else None


def _project_llm(options: ExecutorOptions) -> tuple[str | None, str | None]:
    """(base_url, api_key_env) of the project's ``llm:`` provider, when it names a server."""
    settings = getattr(options.llm, "config", None)
    base_url = getattr(settings, "base_url", None)
    key_env = getattr(settings, "api_key_env", None)
    return (
        base_url if isinstance(base_url, str) and base_url else None,
        key_env if isinstance(key_env, str) and key_env else None,
    )


def resolve_provider(
    config: CopilotConfig, options: ExecutorOptions, environ: Mapping[str, str]
) -> Provider:
    """The model provider of a trial, from the executor config, then the project's ``llm:``.

    Raises:
        SetupError: No server and no token, or a BYOK provider without a model.
    """
    model = options.model or config.model
    project_url, project_key_env = _project_llm(options)
    base_url = config.base_url or project_url
    if config.provider == "byok" or (config.provider == "auto" and base_url):
        if not base_url:
            raise SetupError(
                "the copilot executor is set to provider 'byok' but no model server is given",
                hint="set executor config base_url, or base_url in the llm: section of .vally.yaml",
            )
        if not model:
            raise SetupError(
                f"the copilot executor needs a model name for the server at {base_url}",
                hint="pass --model, set defaults.model in the eval, or executor config model",
            )
        byok: dict[str, Any] = {
            "type": config.provider_type,
            "base_url": base_url,
            "wire_api": config.wire_api,
        }
        key_env = config.api_key_env or project_key_env
        if key_env and environ.get(key_env):
            byok["api_key"] = environ[key_env]
        return Provider(byok=byok, github_token=None, model=model)
    for name in config.token_env:
        if environ.get(name):
            return Provider(byok=None, github_token=environ[name], model=model)
    raise SetupError(
        "the copilot executor has no model provider: no base_url for a server of your own "
        f"and no GitHub token in {', '.join('$' + n for n in config.token_env)}",
        hint="set base_url in the llm: section of .vally.yaml (any OpenAI-compatible server) "
        "or export COPILOT_GITHUB_TOKEN with a token of a Copilot account",
    )


def cli_environment(
    config: CopilotConfig,
    options: ExecutorOptions,
    provider: Provider,
    *,
    home: str,
    cache_dir: str | None,
    environ: Mapping[str, str],
) -> dict[str, str]:
    """The CLI's whole environment: the allow-list, the trial's ``env``, an isolated home
    and the provider's variables. ``XDG_CACHE_HOME`` is ``cache_dir`` when given (else the
    image's own setting holds, or the CLI unpacks into the isolated home)."""
    env = {name: environ[name] for name in (*BASE_ENV, *config.pass_env) if name in environ}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env.update(options.env)
    env.update(
        {
            "HOME": home,
            "COPILOT_HOME": f"{home}/.copilot",
            "XDG_CONFIG_HOME": f"{home}/.config",
            "XDG_STATE_HOME": f"{home}/.local/state",
            "XDG_DATA_HOME": f"{home}/.local/share",
            "COPILOT_AUTO_UPDATE": "false",
        }
    )
    if cache_dir:
        env["XDG_CACHE_HOME"] = cache_dir
    if provider.byok is not None:
        env["COPILOT_OFFLINE"] = "true"
        env["COPILOT_PROVIDER_BASE_URL"] = str(provider.byok["base_url"])
        if provider.model:
            env["COPILOT_MODEL"] = provider.model
    return env
