"""The one exception hierarchy of vally.

Every error a user can cause or meet derives from :class:`VallyError`. Each class carries a
stable ``code`` (``VALLY_...``) that scripts may match on, and a message that says what failed,
where (file and line for YAML) and what to do about it. The CLI prints ``code: message`` and
exits 1; it never shows a Python traceback for a :class:`VallyError` unless ``--debug`` is set.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SourceLocation:
    """Where in a file something was found: 1-based line and column."""

    file: str
    line: int | None = None
    column: int | None = None

    def __str__(self) -> str:
        parts = [self.file]
        if self.line is not None:
            parts.append(str(self.line))
            if self.column is not None:
                parts.append(str(self.column))
        return ":".join(parts)


class VallyError(Exception):
    """Base of every error vally raises on purpose.

    Args:
        message: What failed and what to do. Written for the user, one or a few sentences.
        location: Optional file position the error refers to; it prefixes the message.
        hint: Optional extra advice printed on its own line.
    """

    code: str = "VALLY_ERROR"

    def __init__(
        self, message: str, *, location: SourceLocation | None = None, hint: str | None = None
    ) -> None:
        self.message = message
        self.location = location
        self.hint = hint
        super().__init__(self.render())

    def render(self) -> str:
        """The full user-facing text: location, message and hint."""
        text = f"{self.location}: {self.message}" if self.location else self.message
        if self.hint:
            text += f"\n  hint: {self.hint}"
        return text


class ConfigError(VallyError):
    """A spec, project file, experiment file or flag is invalid."""

    code = "VALLY_CONFIG"


class YamlSyntaxError(ConfigError):
    """A YAML file could not be parsed."""

    code = "VALLY_YAML_SYNTAX"


class SchemaError(ConfigError):
    """A YAML document does not match its schema (unknown key, wrong type, bad value)."""

    code = "VALLY_SCHEMA"


class ParamError(ConfigError):
    """A ``${NAME}`` param could not be resolved."""

    code = "VALLY_PARAM"


class DurationError(ConfigError):
    """A duration has no unit or cannot be parsed."""

    code = "VALLY_DURATION"


class MissingExecutorError(ConfigError):
    """An eval names no executor and the run has no default one."""


class PathEscapeError(ConfigError):
    """A path in a spec resolves outside the root it must stay in."""

    code = "VALLY_PATH_ESCAPE"


class PluginError(VallyError):
    """Base of the plugin-system errors."""

    code = "VALLY_PLUGIN"


class PluginNotFoundError(PluginError):
    """No plugin of that kind has that name."""

    code = "VALLY_PLUGIN_NOT_FOUND"


class PluginLoadError(PluginError):
    """A selected plugin failed to import or construct; the cause is chained."""

    code = "VALLY_PLUGIN_LOAD"


class PluginConflictError(PluginError):
    """Two providers claim one name in one group."""

    code = "VALLY_PLUGIN_CONFLICT"


class PluginValidationError(PluginError):
    """A plugin class does not satisfy its kind's contract (metadata, Config, hooks)."""

    code = "VALLY_PLUGIN_INVALID"


class ExecutionError(VallyError):
    """An executor failed to produce a trajectory (an operational error of one trial)."""

    code = "VALLY_EXECUTION"


class TrialTimeoutError(ExecutionError):
    """A trial's agent did not finish within its timeout and was stopped.

    Args:
        timeout: The trial's timeout in seconds.
    """

    code = "VALLY_TIMEOUT"

    def __init__(self, message: str, *, timeout: float | None = None) -> None:
        super().__init__(message)
        self.timeout = timeout


class UnsupportedError(ExecutionError):
    """An executor or backend cannot honour a requested option (turns, MCP servers, ...)."""

    code = "VALLY_UNSUPPORTED"


class SetupError(VallyError):
    """Preparing a trial's environment failed (files, setup commands, skills, git, MCP)."""

    code = "VALLY_SETUP"


class GradingError(VallyError):
    """A grader could not produce a result (an operational error, never a low score)."""

    code = "VALLY_GRADING"


class BackendError(VallyError):
    """A backend failed to start, open a sandbox, or run a command."""

    code = "VALLY_BACKEND"


class CleanupError(VallyError):
    """Shutting something down failed: backend, executor, session logs, evidence."""

    code = "VALLY_CLEANUP"


class OutputError(VallyError):
    """A required output (results.jsonl, summaries, manifests) could not be written."""

    code = "VALLY_OUTPUT"


class LLMError(VallyError):
    """A model call failed.

    Args:
        retryable: True for failures that may pass on another attempt (connection errors,
            timeouts, HTTP 429 and 5xx). Only retryable errors are ever retried.
        error_class: Short diagnostic label: ``timeout``, ``rate_limit``, ``connection``,
            ``server``, ``model_unavailable``, ``auth``, ``bad_request``, ``malformed``.
        status: HTTP status when there was one.
        model: The model the call was for.
        retry_after: Seconds the server asked to wait before another attempt.
        hint: Optional advice printed on its own line.
    """

    code = "VALLY_LLM"

    def __init__(
        self,
        message: str,
        *,
        retryable: bool,
        status: int | None = None,
        error_class: str,
        model: str | None = None,
        retry_after: float | None = None,
        hint: str | None = None,
    ) -> None:
        self.retryable = retryable
        self.error_class = error_class
        self.status = status
        self.model = model
        self.retry_after = retry_after
        super().__init__(message, hint=hint)
