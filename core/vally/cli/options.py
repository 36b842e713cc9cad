"""Flags of the run commands, declared once: small builders for typer options, the options
``eval`` and ``experiment run`` share, and the step from a command's parameters to its
request."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Annotated, Any, TypeVar

import typer

R = TypeVar("R")


def opt(metavar: str, help: str, *names: str, **extra: Any) -> Any:
    """A flag taking a value: ``metavar`` names it in ``--help``; ``names`` override the
    name derived from the parameter (``--tag`` for a parameter ``tags``)."""
    return typer.Option(*names, metavar=metavar, help=help, **extra)


def switch(name: str, help: str, *aliases: str, **extra: Any) -> Any:
    """An on/off flag (``--verbose``) without a ``--no-...`` twin."""
    return typer.Option(name, *aliases, help=help, **extra)


def request_from(cls: type[R], values: Mapping[str, Any]) -> R:
    """The request dataclass ``cls`` from a command's parameters (same names); a repeatable
    flag that was not given (None) becomes an empty list, other parameters are ignored."""
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    kwargs: dict[str, Any] = {}
    for name, value in values.items():
        field = fields.get(name)
        if field is None:
            continue
        kwargs[name] = [] if value is None and field.default_factory is list else value
    return cls(**kwargs)


Backend = Annotated[
    str | None, opt("NAME|SPEC", "Backend: local, docker, or a plugin (default: local).")
]
BackendArgs = Annotated[
    list[str] | None, opt("KEY=VALUE", "Backend argument KEY=VALUE (repeatable).", "--backend-args")
]
Params = Annotated[
    list[str] | None,
    opt("KEY=VALUE", "Param value for ${KEY} in specs (repeatable).", "--param", "-p"),
]
Stimuli = Annotated[
    list[str] | None,
    opt(
        "NAME",
        "Run only stimuli whose name matches this glob, e.g. 'auth-*' (repeatable, "
        "case-sensitive; combines with the other filters).",
        "--stimulus",
    ),
]
GraderPlugins = Annotated[
    list[str] | None, opt("SPEC", "Grader plugin to load (repeatable).", "--grader-plugin")
]
ExecutorPlugins = Annotated[
    list[str] | None, opt("SPEC", "Executor plugin to load (repeatable).", "--executor-plugin")
]
ReporterPlugins = Annotated[
    list[str] | None, opt("SPEC", "Reporter plugin to load (repeatable).", "--reporter-plugin")
]
OtlpEndpoint = Annotated[
    str | None, opt("URL", "Trace the run and send the spans to this OTLP/HTTP endpoint.")
]
Trace = Annotated[
    bool,
    switch(
        "--trace",
        "Trace the run with OpenTelemetry: spans to otel-spans.jsonl in the run folder "
        "(off by default; --otlp-endpoint traces too).",
    ),
]
Workers = Annotated[
    int | None, opt("N", "Parallel trials (default 5); with --runner ray, cluster-wide.")
]
Runner = Annotated[
    str | None, opt("NAME", "Where trials run: local (default) or ray (pip install 'vally[ray]').")
]
RunnerArgs = Annotated[
    list[str] | None, opt("KEY=VALUE", "Runner argument KEY=VALUE (repeatable).", "--runner-args")
]
RayAddress = Annotated[
    str | None, opt("ADDRESS", "With --runner ray: auto, HOST:PORT or ray://HOST:PORT.")
]
Output = Annotated[
    str | None, opt("jsonl", "'jsonl': stream each trial record to stdout as it finishes.")
]
Junit = Annotated[bool, switch("--junit", "Also write junit.xml in the run folder.")]
JunitFile = Annotated[
    str | None, opt("FILE", "Write the JUnit XML to FILE instead (implies --junit).")
]
JunitCases = Annotated[
    str | None,
    opt(
        "trial|stimulus",
        "JUnit test case per trial (default) or per stimulus (red when its pass rate falls "
        "short: a flaky stimulus is one red case).",
    ),
]
RequirePass = Annotated[bool, switch("--require-pass", "Exit 1 when a verdict fails.")]
Verbose = Annotated[
    bool,
    switch("--verbose", "Show each stimulus in full: metrics, graders, agent output.", "-v"),
]
Quiet = Annotated[
    bool,
    switch(
        "--quiet",
        "Print only a line per failing stimulus and the closing verdict (and, off a "
        "terminal, progress lines on stderr).",
        "-q",
    ),
]
EvalPlugin = Annotated[str | None, opt("SPEC", "Eval provider reading the eval files.")]
Resume = Annotated[
    str | None,
    opt("RUN_DIR", "Continue this run folder: keep finished trials, run the rest into it."),
]
NoCache = Annotated[
    bool, switch("--no-cache", "Send every judge request; neither read nor fill the judge cache.")
]
MaxCost = Annotated[
    float | None,
    opt("USD", "Start no new trial once the finished ones cost this much (exit 3).", min=0.0),
]
MaxTokens = Annotated[
    int | None,
    opt("N", "Start no new trial once the finished ones used this many tokens (exit 3).", min=1),
]
RetryErrors = Annotated[
    bool, switch("--retry-errors", "With --resume, also run errored trials again.")
]
