"""The eval spec (``eval.yaml``): stimuli, environments, graders, constraints and scoring.

Keys are exactly what users write. Both spellings vally has used are accepted:
``config:`` / ``defaults:`` and ``environment:`` / ``agent_environment:``; writing both forms
in one place is an error. Durations need a unit suffix (see :mod:`vally.models.durations`).
"""

from __future__ import annotations

import unicodedata
from typing import Any, Literal

from pydantic import ByteSize, Field, field_validator, model_validator

from vally.models.base import SpecModel
from vally.models.durations import Duration
from vally.models.limits import NAME_LENGTH, PLAN_TRIALS


def check_name(value: str, what: str) -> str:
    """Validate a name that becomes a folder, a record id and an XML attribute: not blank,
    at most :data:`~vally.models.limits.NAME_LENGTH` characters, no control characters.

    Raises:
        ValueError: Saying what is wrong and what to do.
    """
    if not value.strip():
        raise ValueError(f"{what} name must not be empty")
    if len(value) > NAME_LENGTH:
        raise ValueError(
            f"{what} name is {len(value)} characters long, more than {NAME_LENGTH}; "
            "shorten it (put details in 'description:')"
        )
    for char in value:
        if unicodedata.category(char) in {"Cc", "Cs"} or char in "\u2028\u2029":
            raise ValueError(
                f"{what} name {value!r} holds the control character "
                f"U+{ord(char):04X}; use printable characters only"
            )
    return value


def _rename_alias(data: Any, old: str, new: str) -> Any:
    """Accept ``old`` as a spelling of ``new``; both at once is an error."""
    if isinstance(data, dict) and old in data:
        if new in data:
            raise ValueError(f"'{old}' and '{new}' are two names for one field; keep only '{new}'")
        data = dict(data)
        data[new] = data.pop(old)
    return data


class FileEntry(SpecModel):
    """A file or directory copied into the workspace before the agent runs.

    ``src`` is relative to the file that declares it (the eval spec) and must stay inside
    the project (the folder of ``.vally.yaml``, else the git repository, else the eval's
    folder); ``dest`` is relative to the workspace and must stay inside it.
    """

    src: str
    dest: str | None = None

    @field_validator("src")
    @classmethod
    def _src_not_empty(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("src must not be empty")
        return value


class GitConfig(SpecModel):
    """Use a git worktree of ``source`` at ``ref`` as the workspace."""

    type: Literal["worktree"] = "worktree"
    source: str = "."
    ref: str | None = None


class McpServerConfig(SpecModel):
    """An MCP server started for each trial: ``stdio`` (a command) or ``http`` (a URL).

    ``stdio``: ``command``, ``args``, ``env`` and ``cwd`` (relative to the workspace).
    ``http`` (streamable HTTP): ``url`` and ``headers``. Both: ``timeout`` (how long the
    server may take to answer ``initialize``; default 30s; also bounds each tool call when
    set) and ``tools`` (an allow-list of tool names; ``*`` or no list allows all).
    """

    type: Literal["stdio", "http"] = "stdio"
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    timeout: Duration | None = None
    tools: list[str] | None = None

    @model_validator(mode="after")
    def _check_transport(self) -> McpServerConfig:
        if self.type == "stdio" and not self.command:
            hint = "; for a server reached by URL set 'type: http'" if self.url else ""
            raise ValueError(f"an MCP server of type 'stdio' needs 'command'{hint}")
        if self.type == "http":
            if not self.url:
                raise ValueError("an MCP server of type 'http' needs 'url'")
            if not self.url.startswith(("http://", "https://")):
                raise ValueError(
                    f"the url of an MCP server must start with http:// or https://, "
                    f"got {self.url!r}"
                )
        foreign = ["url", "headers"] if self.type == "stdio" else ["command", "args", "env", "cwd"]
        given = [name for name in foreign if name in self.model_fields_set]
        # Fields written only with their empty defaults (``url: null``, ``headers: {}``, as
        # every record holds them) are no conflict: records of stdio servers read back.
        if given and any(getattr(self, name) not in (None, {}, []) for name in given):
            raise ValueError(
                f"{', '.join(repr(n) for n in given)} cannot be used with an MCP server of "
                f"type '{self.type}'"
            )
        if self.timeout is not None and self.timeout <= 0:
            raise ValueError("the timeout of an MCP server must be positive, e.g. '30s'")
        return self


class EnvironmentConfig(SpecModel):
    """What a trial's workspace holds before the agent starts.

    The stimulus environment is merged onto the root one: skills are united, files and
    commands are appended, ``git`` and ``env`` keys are overridden, and ``mcpServers`` are
    merged by name (a ``null`` server deletes the inherited one).
    """

    skills: list[str] = Field(default_factory=list)
    files: list[FileEntry] = Field(default_factory=list)
    commands: list[str] = Field(default_factory=list)
    git: GitConfig | None = None
    mcpServers: dict[str, McpServerConfig | None] = Field(default_factory=dict)
    env: dict[str, str] = Field(default_factory=dict)
    public_env: list[str] = Field(default_factory=list)

    @field_validator("skills", "commands", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value


class Constraints(SpecModel):
    """Limits enforced while the agent runs, and tool/skill expectations checked after.

    ``max_*`` limits stop the agent in flight; the trajectory records the end reason and the
    trial fails. ``expect_*``/``reject_*`` lists are name regexes checked on the trajectory.
    """

    max_turns: int | None = None
    max_tokens: int | None = None
    max_duration: Duration | None = None
    max_tool_calls: int | None = None
    expect_tools: list[str] = Field(default_factory=list)
    reject_tools: list[str] = Field(default_factory=list)
    expect_skills: list[str] = Field(default_factory=list)
    reject_skills: list[str] = Field(default_factory=list)

    def is_empty(self) -> bool:
        """True when nothing is constrained."""
        return self == Constraints()


class ExecutorRef(SpecModel):
    """Which executor runs the spec, and its config (validated by the executor's ``Config``)."""

    name: str
    config: dict[str, Any] = Field(default_factory=dict)


class TrialResources(SpecModel):
    """What each trial reserves on the node that runs it, with a distributed runner
    (``--runner ray``; the local runner runs trials in one process and ignores it).

    Attributes:
        cpus: CPUs per trial (fractions allowed); default the runner's (one).
        memory: Memory per trial: bytes, or with a unit (``512MiB``, ``2GB``).
        custom: Custom resources per trial by name (``{docker: 1}`` runs trials only on
            nodes started with that resource).
    """

    cpus: float | None = Field(default=None, ge=0)
    memory: ByteSize | None = None
    custom: dict[str, float] = Field(default_factory=dict)

    @field_validator("custom")
    @classmethod
    def _amounts(cls, value: dict[str, float]) -> dict[str, float]:
        for name, amount in value.items():
            if not name.strip():
                raise ValueError("a custom resource needs a name, e.g. {docker: 1}")
            if amount < 0:
                raise ValueError(
                    f"custom resource {name!r} asks for {amount:g}; amounts are 0 or more"
                )
        return value


class EvalConfig(SpecModel):
    """Execution settings of an eval (``defaults:``, formerly ``config:``)."""

    runs: int = Field(default=1, ge=0)
    timeout: Duration | None = None
    model: str | None = None
    judge_model: str | None = None
    judge_reasoning_effort: str | None = None
    judge_provider: str | None = None
    judge_timeout: Duration | None = None
    executor: ExecutorRef | None = None
    reasoning_effort: str | None = None
    max_agent_duration: Duration | None = None
    resources: TrialResources | None = None

    @field_validator("runs")
    @classmethod
    def _bounded_runs(cls, value: int) -> int:
        limit = PLAN_TRIALS.value()
        if value > limit:
            raise ValueError(
                f"{value} is more than the limit of {limit} trials of one run; "
                f"{PLAN_TRIALS.hint(limit)}"
            )
        return value

    @field_validator("executor", mode="before")
    @classmethod
    def _executor_shorthand(cls, value: Any) -> Any:
        return {"name": value} if isinstance(value, str) else value

    @field_validator("timeout", "judge_timeout", "max_agent_duration")
    @classmethod
    def _positive_duration(cls, value: float | None) -> float | None:
        # Zero would otherwise silently fall back to the default.
        if value is not None and value <= 0:
            raise ValueError("must be longer than zero, e.g. '5m' (leave it out for the default)")
        return value


class GraderConfig(SpecModel):
    """One grader entry: a registered ``type`` and its ``config``.

    ``turn`` restricts the trajectory the grader sees to that 0-based turn. ``required``
    graders fail the trial when they fail, whatever the weighted score. ``timeout`` bounds
    how long the grader may take (default: ``DEFAULT_GRADER_TIMEOUT``, 10 minutes); a grader
    that takes longer is stopped and errors, the trial and the run go on.
    """

    type: str
    config: dict[str, Any] = Field(default_factory=dict)
    name: str | None = None
    turn: int | None = Field(default=None, ge=0)
    required: bool = False
    timeout: Duration | None = None

    @field_validator("timeout")
    @classmethod
    def _positive_timeout(cls, value: float | None) -> float | None:
        if value is not None and value <= 0:
            raise ValueError("must be longer than zero, e.g. '2m' (leave it out for the default)")
        return value

    @field_validator("config", mode="before")
    @classmethod
    def _none_is_empty(cls, value: Any) -> Any:
        return {} if value is None else value

    @property
    def label(self) -> str:
        """The display name: ``name`` when given, else the type."""
        return self.name or self.type


class ScoringConfig(SpecModel):
    """Weights keyed by grader type (default 1) and an optional pass threshold in [0, 1]."""

    weights: dict[str, float] = Field(default_factory=dict)
    threshold: float | None = Field(default=None, ge=0.0, le=1.0)


class Turn(SpecModel):
    """One prompt of a multi-turn conversation."""

    prompt: str


Tags = dict[str, str]


def _stringify_tags(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            str(k): (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in value.items()
        }
    return value


class Stimulus(SpecModel):
    """One test case: a prompt (or turns), its environment, graders and constraints."""

    name: str
    description: str | None = None
    prompt: str | None = None
    turns: list[Turn] | None = None
    environment: EnvironmentConfig | None = None
    graders: list[GraderConfig] = Field(default_factory=list)
    rubric: list[str] = Field(default_factory=list)
    constraints: Constraints | None = None
    tags: Tags = Field(default_factory=dict)
    artifacts: list[str] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _aliases(cls, data: Any) -> Any:
        return _rename_alias(data, "agent_environment", "environment")

    @field_validator("rubric", "artifacts", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @field_validator("tags", mode="before")
    @classmethod
    def _tags(cls, value: Any) -> Any:
        return _stringify_tags(value)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        check_name(value, "stimulus")
        if "/" in value or "\\" in value or value in {".", ".."}:
            raise ValueError(
                f"stimulus name {value!r} cannot contain '/' or '\\' (it names a folder)"
            )
        return value

    @model_validator(mode="after")
    def _prompt_or_turns(self) -> Stimulus:
        if (self.prompt is None) == (self.turns is None):
            raise ValueError(f"stimulus '{self.name}' needs exactly one of 'prompt' or 'turns'")
        if self.turns is not None and not self.turns:
            raise ValueError(f"stimulus '{self.name}': 'turns' must hold at least one prompt")
        return self

    @property
    def prompts(self) -> list[str]:
        """The prompts in order: one for a single-turn stimulus, one per turn otherwise."""
        if self.turns is not None:
            return [t.prompt for t in self.turns]
        return [self.prompt or ""]

    @property
    def is_multi_turn(self) -> bool:
        """True when the stimulus uses ``turns``."""
        return self.turns is not None


class EvalSpec(SpecModel):
    """A whole eval file."""

    name: str | None = None
    description: str | None = None
    version: str | None = None
    type: Literal["capability", "regression"] | None = None
    tags: Tags = Field(default_factory=dict)
    environment: EnvironmentConfig | str | None = None
    defaults: EvalConfig = Field(default_factory=EvalConfig)
    constraints: Constraints | None = None
    graders: list[GraderConfig] = Field(default_factory=list)
    stimuli: list[Stimulus] = Field(min_length=1)
    scoring: ScoringConfig = Field(default_factory=ScoringConfig)
    params: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _aliases(cls, data: Any) -> Any:
        data = _rename_alias(data, "agent_environment", "environment")
        data = _rename_alias(data, "config", "defaults")
        if isinstance(data, dict):
            for key in ("defaults", "scoring"):
                if key in data and data[key] is None:
                    data = {**data, key: {}}
        return data

    @field_validator("tags", "params", mode="before")
    @classmethod
    def _string_maps(cls, value: Any) -> Any:
        return _stringify_tags(value)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str | None) -> str | None:
        return value if value is None else check_name(value, "eval")
