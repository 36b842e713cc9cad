"""Run options as users write them: paths relative to a base folder, plugin specifiers
that may be paths, and folder flags checked before anything is created."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from vally.errors import ConfigError
from vally.specs.selection import absolute as absolute

if TYPE_CHECKING:
    from vally.engine.trials.budget import Budget
    from vally.engine.trials.components import ReporterChoice, RunnerChoice


JUNIT_CASES = ("trial", "stimulus")
"""What one JUnit test case stands for (``--junit-cases``)."""


def run_reporters(
    opts: RunOptions, results: dict[str, object], console: dict[str, object]
) -> list[ReporterChoice]:
    """The reporters a run command starts with: the results file (``results`` its config;
    on standard output with ``--output jsonl``), the console (``console`` its config; on
    standard error then), the report, JUnit with ``--junit``/``--junit-file``, and the
    trace with ``--trace``/``--otlp-endpoint``."""
    from vally.engine.trials.components import ReporterChoice
    from vally.plugins import defaults

    to_stdout = opts.output == "jsonl"
    results = {**results, "stdout": to_stdout}
    chosen = [ReporterChoice(defaults.RESULTS_REPORTER, results, "--output")]
    stream = "stderr" if to_stdout else "stdout"
    shown = {"verbose": opts.verbose, "quiet": opts.quiet, **console, "stream": stream}
    chosen += [ReporterChoice(defaults.CONSOLE_REPORTER, shown)] if opts.console else []
    chosen.append(ReporterChoice(defaults.REPORT_REPORTER))
    if opts.junit or opts.junit_file:
        junit: dict[str, object] = {} if opts.junit_cases is None else {"cases": opts.junit_cases}
        if opts.junit_file:
            junit["path"] = str(absolute(Path.cwd(), opts.junit_file))
        where = "--junit-file" if opts.junit_file else "--junit"
        chosen.append(ReporterChoice(defaults.JUNIT_REPORTER, junit, where))
    if opts.traced:
        where = "--otlp-endpoint" if opts.otlp_endpoint else "--trace"
        chosen.append(
            ReporterChoice(defaults.TRACE_REPORTER, {"endpoint": opts.otlp_endpoint}, where)
        )
    return chosen


def looks_like_path(specifier: str) -> bool:
    """True when a plugin specifier is written as a path (``./x``, ``/x``, ``a/b``, ``x.py``),
    not as a name, a distribution or ``package.module:Attr``."""
    return (
        specifier.startswith((".", "/", "~"))
        or specifier.endswith(".py")
        or os.sep in specifier
        or "/" in specifier
    ) and ":" not in specifier.split("/")[-1]


def plugin_paths(
    specifiers: Sequence[str], base: Path, *, fallback: Path | None = None
) -> list[str]:
    """Path specifiers made absolute against ``base`` (names and modules unchanged).

    With ``fallback`` (the working directory), a relative path that exists only there is
    taken from there.
    """
    out: list[str] = []
    for spec in specifiers:
        if not looks_like_path(spec) or Path(spec).expanduser().is_absolute():
            out.append(spec)
            continue
        first = absolute(base, spec)
        if fallback is not None and not first.exists() and absolute(fallback, spec).exists():
            first = absolute(fallback, spec)
        out.append(str(first))
    return out


def check_folder_flag(flag: str, value: str, path: Path) -> None:
    """Fail early when a folder flag (``--workspace``) names a file or a path under one.

    Raises:
        ConfigError: ``path`` or one of the folders above it is a file.
    """
    for folder in (path, *path.parents):
        if folder.exists():
            if not folder.is_dir():
                where = "is a file" if folder == path else f"is under the file {folder}"
                raise ConfigError(
                    f"{flag} {value}: {path} {where}, not a folder",
                    hint=f"pass a folder (it is created when missing) to {flag}",
                )
            return


@dataclass(kw_only=True)
class RunOptions:
    """The options ``vally eval`` and ``vally experiment run`` share, as their flags take
    them (see each command's ``--help``).

    Attributes:
        stimuli: ``--stimulus`` globs selecting stimuli by name (see
            :attr:`~vally.engine.planning.plan.PlanOptions.stimulus_patterns`).
        verbose: The console shows each stimulus in full (``-v``).
        quiet: The console shows only a line per failing stimulus and the closing verdict
            (``-q``), and off a terminal progress lines on standard error.
        console: Print progress and results on the terminal (off for library use).
        resume: Continue the run in this run folder (``--resume``): its finished trials
            are kept, the others run into it.
        retry_errors: With ``resume``, run errored trials again too (``--retry-errors``).
        max_cost: Stop starting trials once they cost this many US dollars (``--max-cost``).
        max_tokens: Stop starting trials once they used this many tokens (``--max-tokens``).
        no_cache: Judge graders send every request (``--no-cache``).
        output: ``jsonl``: stream each trial record to standard output as it finishes
            (``--output jsonl``; the console's report then goes to standard error).
        junit: Also write ``junit.xml`` in the run folder (``--junit``).
        junit_file: Write the JUnit XML here instead (``--junit-file``; implies ``junit``).
        junit_cases: One JUnit test case per ``trial`` or per ``stimulus``
            (``--junit-cases``); None keeps the reporter's (``.vally.yaml``, else trial).
        trace: Trace the run with OpenTelemetry (``--trace``): spans go to
            ``otel-spans.jsonl`` in the run folder, or to ``otlp_endpoint`` when given
            (which traces the run by itself). Off by default: no span file is written.
    """

    output_dir: str | None = None
    workers: int | None = None
    backend: str | None = None
    backend_args: list[str] = field(default_factory=list)
    params: list[str] = field(default_factory=list)
    stimuli: list[str] = field(default_factory=list)
    grader_plugins: list[str] = field(default_factory=list)
    executor_plugins: list[str] = field(default_factory=list)
    reporter_plugins: list[str] = field(default_factory=list)
    eval_plugin: str | None = None
    workspace: str | None = None
    require_pass: bool = False
    otlp_endpoint: str | None = None
    verbose: bool = False
    quiet: bool = False
    console: bool = True
    resume: str | None = None
    retry_errors: bool = False
    runner: str | None = None
    runner_args: list[str] = field(default_factory=list)
    ray_address: str | None = None
    max_cost: float | None = None
    max_tokens: int | None = None
    no_cache: bool = False
    output: str | None = None
    junit: bool = False
    junit_file: str | None = None
    junit_cases: str | None = None
    trace: bool = False

    @property
    def traced(self) -> bool:
        """Whether the run is traced: ``--trace`` or ``--otlp-endpoint`` was given."""
        return self.trace or self.otlp_endpoint is not None

    def budget(self) -> Budget | None:
        """The ``--max-cost``/``--max-tokens`` budget, or None without either.

        Raises:
            ConfigError: A limit is not above zero.
        """
        from vally.engine.trials.budget import Budget

        return Budget.from_flags(self.max_cost, self.max_tokens)

    def runner_choice(self) -> RunnerChoice | None:
        """``--runner`` with ``--runner-args`` (and ``--ray-address`` as ``address``); None
        runs the trials in this process.

        Raises:
            ConfigError: Runner arguments without a runner, or malformed.
        """
        from vally.engine.trials.components import RunnerChoice
        from vally.specs.params import parse_key_values

        if self.runner is None:
            if self.runner_args or self.ray_address:
                flag = "--runner-args" if self.runner_args else "--ray-address"
                raise ConfigError(
                    f"{flag} needs --runner (the arguments belong to one runner)",
                    hint="add e.g. --runner ray",
                )
            return None
        args = parse_key_values(self.runner_args, flag="--runner-args", collect_repeats=True)
        if self.ray_address:
            if self.runner != "ray":
                raise ConfigError(
                    f"--ray-address is for --runner ray, not --runner {self.runner}",
                    hint="drop --ray-address, or pass --runner ray",
                )
            args["address"] = self.ray_address
        return RunnerChoice(self.runner, args)

    def check_common(self) -> None:
        """Reject shared options that cannot work.

        Raises:
            ConfigError: Naming the flag and what to do.
        """
        if self.backend_args and not self.backend:
            raise ConfigError(
                "--backend-args needs --backend (the arguments belong to one backend)",
                hint="add e.g. --backend local",
            )
        if self.quiet and self.verbose:
            raise ConfigError(
                "--quiet and --verbose cannot be combined",
                hint="keep one: --quiet prints only failures, --verbose prints everything",
            )
        if self.workers is not None and self.workers < 1:
            raise ConfigError(f"--workers must be at least 1, got {self.workers}")
        if self.resume is not None and not self.resume.strip():
            raise ConfigError(
                "--resume needs the run folder to continue, got an empty value",
                hint="is the variable passed to --resume unset? Pass the run folder, or leave "
                "--resume out to start a new run",
            )
        if self.retry_errors and not self.resume:
            raise ConfigError(
                "--retry-errors needs --resume: it re-runs the errored trials of a run folder",
                hint="add --resume <run-dir>",
            )
        if self.output is not None and self.output != "jsonl":
            raise ConfigError(
                f"--output {self.output!r} is not supported; the only format is 'jsonl'",
                hint="use --output jsonl to stream trial records to standard output",
            )
        if self.junit_cases is not None and self.junit_cases not in JUNIT_CASES:
            raise ConfigError(
                f"--junit-cases {self.junit_cases!r} is not one of {', '.join(JUNIT_CASES)}",
                hint="--junit-cases trial: a test case per trial; "
                "--junit-cases stimulus: one per stimulus, red when its pass rate is short",
            )
        self.runner_choice()
        self.budget()


@dataclass(kw_only=True)
class ExperimentRequest(RunOptions):
    """Every option of ``vally experiment run`` (see its ``--help``)."""

    experiment_file: str
    variant: str | None = None
    eval_filters: list[str] = field(default_factory=list)
    dry_run: bool = False
    run_id: str | None = None
    shard: str | None = None
    shard_strategy: str | None = None
    compare: bool = False
    judge_model: str | None = None
    judge_timeout: str | None = None
    judge_reasoning_effort: str | None = None
    until_decided: bool = False

    def check(self) -> None:
        """Reject contradictory options before anything is loaded.

        Raises:
            ConfigError: Naming the flag and what to do.
        """
        self.check_common()
        if self.until_decided and self.shard is not None:
            raise ConfigError(
                "--until-decided cannot be combined with --shard: stopping a variant early "
                "needs every trial's outcome in one process",
                hint="drop --shard, or drop --until-decided and run every planned trial",
            )
        if self.shard is not None and not (self.run_id or self.resume):
            raise ConfigError(
                "--shard needs --run-id (or --resume <shard-folder>): every shard of a run "
                "must share one stable run id",
                hint='generate one id (e.g. a UUID) and pass --run-id "$RUN_ID" to every shard',
            )
        if self.run_id is not None:
            from vally.engine.records.run_folder import safe_name

            if not self.run_id.strip() or safe_name(self.run_id) != self.run_id:
                raise ConfigError(
                    f"--run-id {self.run_id!r} cannot be used as a folder name",
                    hint="use letters, digits, '-', '_' and '.' (a UUID is recommended)",
                )
        self._check_judge_flags()

    def _check_judge_flags(self) -> None:
        for flag, value in (
            ("--judge-model", self.judge_model),
            ("--judge-timeout", self.judge_timeout),
            ("--judge-reasoning-effort", self.judge_reasoning_effort),
        ):
            if value is not None and not self.compare:
                raise ConfigError(
                    f"{flag} needs --compare: it only configures the post-run comparison judge",
                    hint="add --compare, or drop the flag (trial grading uses the evals' settings)",
                )
        if self.judge_reasoning_effort is not None and not self.judge_reasoning_effort.strip():
            raise ConfigError("--judge-reasoning-effort must not be empty")
        if self.judge_timeout is not None:
            from vally.models.durations import parse_duration

            # Checked before any trial runs, not only when the comparison starts.
            if parse_duration(self.judge_timeout, field="--judge-timeout") <= 0:
                raise ConfigError(
                    f"--judge-timeout must be longer than zero, got {self.judge_timeout!r}",
                    hint="write e.g. --judge-timeout 2m",
                )
