"""The ``otel`` reporter: traces a run with OpenTelemetry.

Spans, all in one trace:

- the run's root span ``vally.<command>`` (``vally.eval``, ``vally.experiment``,
  ``vally.experiment.merge``) with ``vally.run_id``, ``vally.evals``, ``vally.experiment``,
  ``vally.baseline``, ``vally.shard`` and ``vally.planned_trials``, linked to the runs it
  continues (``RunInfo.links``: a merge links every shard's root span);
- one ``vally.variant`` span per variant of an experiment;
- one ``vally.trial`` span per trial (under its variant's span), with ``vally.variant``,
  ``vally.eval``, ``vally.stimulus``, ``vally.model``, ``vally.trial``, ``vally.status``,
  ``vally.verdict``, ``vally.score`` and ``vally.tokens.*``;
- under each trial a ``vally.executor`` span (the agent's own start and end times) and one
  ``vally.grader <name>`` span per grader result.

The reporter runs only when tracing is asked for (``--trace``, ``--otlp-endpoint``,
``--reporter-plugin otel`` or ``.vally.yaml`` ``plugins.reporter: [otel]``); a run is not
traced by default. Without an ``endpoint`` the spans go to ``otel-spans.jsonl`` in the run
folder, one JSON object per line as each span ends (the file is flushed at most once a
second and when the run ends, not once per span); with one they are sent to that OTLP/HTTP
collector from a background thread. ``otel-context.json`` (the root span's identity) is
written to the run folder either way, so that ``vally experiment merge`` can link the
shards' traces. A run without a folder and without an endpoint is not traced.

The reporter is not critical: a collector that cannot be reached is reported once, as a
warning, when the run ends. opentelemetry is imported when a run starts, never before.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from pydantic import Field, field_validator
from pydantic_core import PydanticCustomError

from vally import (
    BaseReporter,
    Duration,
    GraderResult,
    ReporterMetadata,
    RunInfo,
    RunOutcome,
    StrictConfig,
    TrialKey,
    TrialResultRecord,
    hookimpl,
)
from vally_builtin.reporters import atomic_write_text

if TYPE_CHECKING:
    from opentelemetry.trace import Span

    from vally_builtin.reporters.otel_export import SpanPipeline

SPANS_FILE = "otel-spans.jsonl"
"""The span file in the run folder (no endpoint)."""

CONTEXT_FILE = "otel-context.json"
"""The root span's identity in the run folder."""

DEFAULT_MODEL_LABEL = "default"
"""How trial keys name the model of a trial that let the agent pick it."""


def endpoint_problem(endpoint: str) -> str | None:
    """Why ``endpoint`` is not an ``http(s)://host[:port][/path]`` URL (None when it is)."""
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return (
            f"{endpoint!r} is not an http(s) URL: pass the collector's OTLP/HTTP URL, "
            "e.g. http://localhost:4318"
        )
    return None


class OtelConfig(StrictConfig):
    """Options of the ``otel`` reporter.

    Attributes:
        endpoint: Base URL of an OTLP/HTTP collector (``http://localhost:4318``;
            ``/v1/traces`` is added to a URL without a path). Without one, spans are written
            to ``otel-spans.jsonl`` in the run folder.
        timeout: How long one export to the collector may take, retries included. When the
            run ends, pending spans are sent for about this long at most (not at all when the
            collector just failed); what is left is dropped and reported.
    """

    endpoint: str | None = None
    timeout: Duration = Field(default=10.0, gt=0)

    @field_validator("endpoint")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None:
            problem = endpoint_problem(value)
            if problem is not None:
                # A custom error keeps pydantic's "Value error, " prefix out of the message.
                raise PydanticCustomError("http_url", "{problem}", {"problem": problem})
        return value


def _key_attributes(key: TrialKey) -> dict[str, Any]:
    return {
        "vally.variant": key.variant or None,
        "vally.eval": key.eval_name,
        "vally.stimulus": key.stimulus,
        "vally.model": key.model,
        "vally.trial": key.trial,
    }


def record_key(record: TrialResultRecord) -> TrialKey:
    """The key the trial of ``record`` had when it started."""
    return TrialKey(
        record.variant or "",
        record.eval_name,
        record.stimulus_name,
        record.model or DEFAULT_MODEL_LABEL,
        record.trial_index,
    )


def _verdict(record: TrialResultRecord) -> str:
    if record.status != "success":
        return "error"
    grade = record.grade_result
    if grade is None:
        return "none"
    return "pass" if grade.passed else "fail"


def _token_attributes(record: TrialResultRecord) -> dict[str, Any]:
    trajectory = record.trajectory
    tokens = trajectory.metrics.token_usage if trajectory is not None else None
    return {
        "vally.tokens.input": tokens.input_tokens if tokens else None,
        "vally.tokens.output": tokens.output_tokens if tokens else None,
        "vally.tokens.total": tokens.total_tokens if tokens else None,
    }


def _root_attributes(run: RunInfo) -> dict[str, Any]:
    return {
        "vally.run_id": run.run_id,
        "vally.evals": ",".join(run.evals) if run.evals else None,
        "vally.experiment": run.experiment,
        "vally.baseline": run.baseline,
        "vally.shard": run.shard,
        "vally.planned_trials": run.planned_trials,
    }


@dataclass
class _RunTrace:
    """The spans of the run being traced: its pipeline, root, and the open variant and
    trial spans."""

    pipeline: SpanPipeline
    root: Span
    variants: dict[str, Span] = field(default_factory=dict)
    trials: dict[TrialKey, Span] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def child(self, name: str, attributes: dict[str, Any], parent: Span | None = None) -> Span:
        """Start a span under ``parent`` (default: the root); the caller ends it."""
        from opentelemetry import trace

        from vally_builtin.reporters.otel_export import clean_attributes

        context = trace.set_span_in_context(parent or self.root)
        return self.pipeline.tracer.start_span(
            name, context=context, attributes=clean_attributes(attributes)
        )

    def variant_span(self, variant: str) -> Span | None:
        """The span of ``variant``, opened on first use (None outside experiments)."""
        if not variant:
            return None
        with self.lock:
            span = self.variants.get(variant)
            if span is None:
                span = self.child("vally.variant", {"vally.variant": variant})
                self.variants[variant] = span
            return span

    def executor_span(self, trial: Span, key: TrialKey, record: TrialResultRecord) -> None:
        """Record the agent's run of ``record`` under ``trial``, with its own times."""
        from opentelemetry import trace

        from vally_builtin.reporters.otel_export import clean_attributes, iso_to_ns

        trajectory = record.trajectory
        if trajectory is None:
            return
        meta = trajectory.metadata
        start = iso_to_ns(meta.started_at) if meta is not None else None
        end = iso_to_ns(meta.completed_at) if meta is not None else None
        attributes = {
            **_key_attributes(key),
            "vally.executor": meta.executor if meta is not None else None,
            "vally.end_reason": trajectory.end_reason,
            "vally.turns": trajectory.metrics.turn_count,
            "vally.tool_calls": trajectory.metrics.tool_call_count,
            **_token_attributes(record),
        }
        span = self.pipeline.tracer.start_span(
            "vally.executor",
            context=trace.set_span_in_context(trial),
            attributes=clean_attributes(attributes),
            start_time=start,
        )
        span.end(end_time=end if end and start and end >= start else None)

    def end_open_spans(self) -> None:
        """End the trial spans left open (an interrupted run), then the variant spans."""
        with self.lock:
            spans = [*self.trials.values(), *self.variants.values()]
            self.trials.clear()
            self.variants.clear()
        for span in spans:
            span.end()

    def context(self) -> dict[str, str]:
        """The root span's identity: ``traceId`` and ``spanId`` as hex."""
        ctx = self.root.get_span_context()
        return {"traceId": format(ctx.trace_id, "032x"), "spanId": format(ctx.span_id, "016x")}


class OtelReporter(BaseReporter[OtelConfig]):
    """Records the run's spans and writes or exports them (see the module docstring)."""

    metadata = ReporterMetadata(
        name="otel",
        kind="reporter",
        description="Traces the run with OpenTelemetry: otel-spans.jsonl in the run folder, "
        "or export to an OTLP/HTTP collector.",
    )

    _trace: _RunTrace | None = None

    def context(self) -> dict[str, str] | None:
        """The root span's identity (``traceId``, ``spanId`` as hex), None when no run is
        being traced."""
        return self._trace.context() if self._trace is not None else None

    @hookimpl
    def vally_run_start(self, run: RunInfo) -> None:
        """Open the root span and write ``otel-context.json``.

        Raises:
            OutputError: The span file or ``otel-context.json`` cannot be written.
        """
        self._trace = None
        if run.run_dir is None and not self.config.endpoint:
            return
        from vally_builtin.reporters.otel_export import (
            clean_attributes,
            open_pipeline,
            span_links,
        )

        spans_file = run.run_dir / SPANS_FILE if run.run_dir is not None else None
        pipeline = open_pipeline(spans_file, self.config.endpoint, self.config.timeout)
        name = f"vally.{run.command}"
        attributes = clean_attributes(_root_attributes(run))
        root = pipeline.tracer.start_span(name, attributes=attributes, links=span_links(run.links))
        self._trace = _RunTrace(pipeline, root)
        if run.run_dir is not None:
            data = {
                **self._trace.context(),
                "name": name,
                "exporter": pipeline.exporter_name,
                "attributes": attributes,
            }
            text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
            atomic_write_text(run.run_dir / CONTEXT_FILE, text)

    @hookimpl
    def vally_trial_start(self, run: RunInfo, key: TrialKey) -> None:
        """Open the trial's span (under its variant's span in experiments)."""
        trace = self._trace
        if trace is None:
            return
        span = trace.child("vally.trial", _key_attributes(key), trace.variant_span(key.variant))
        with trace.lock:
            trace.trials[key] = span

    @hookimpl
    def vally_grader_result(self, run: RunInfo, key: TrialKey, result: GraderResult) -> None:
        """Record one grader's result as a span under the trial."""
        trace = self._trace
        if trace is None:
            return
        with trace.lock:
            parent = trace.trials.get(key)
        attributes = {
            **_key_attributes(key),
            "vally.grader.name": result.name,
            "vally.grader.type": result.type,
            "vally.grader.passed": result.passed,
            "vally.grader.score": result.score,
            "vally.grader.status": result.status,
            "vally.verdict": "pass" if result.passed else "fail",
        }
        trace.child(f"vally.grader {result.name}", attributes, parent).end()

    @hookimpl
    def vally_trial_end(self, run: RunInfo, record: TrialResultRecord) -> None:
        """Close the trial's span with its status, verdict, score and tokens, with an
        executor span below it."""
        trace = self._trace
        if trace is None:
            return
        from opentelemetry.trace import Status, StatusCode

        from vally_builtin.reporters.otel_export import clean_attributes

        key = record_key(record)
        with trace.lock:
            span = trace.trials.pop(key, None)
        if span is None:
            span = trace.child("vally.trial", _key_attributes(key), trace.variant_span(key.variant))
        trace.executor_span(span, key, record)
        grade = record.grade_result
        attributes = {
            "vally.status": record.status,
            "vally.verdict": _verdict(record),
            "vally.score": grade.score if grade is not None else None,
            **_token_attributes(record),
        }
        span.set_attributes(clean_attributes(attributes))
        if record.error is not None:
            span.set_status(Status(StatusCode.ERROR, record.error.message[:500]))
        span.end()

    @hookimpl
    def vally_run_end(self, run: RunInfo, outcome: RunOutcome) -> None:
        """End every open span (the root with ERROR status when the run failed or was
        interrupted), send what is pending and shut down.

        Raises:
            OutputError: Spans could not be written or delivered. The reporter is not
                critical: the run reports it as a warning and its results are not affected.
        """
        trace, self._trace = self._trace, None
        if trace is None:
            return
        from opentelemetry.trace import Status, StatusCode

        trace.end_open_spans()
        error = outcome.error or ("run interrupted" if outcome.cancelled else None)
        if error:
            trace.root.set_status(Status(StatusCode.ERROR, error))
        trace.root.end()
        problem = trace.pipeline.close(self.config.timeout)
        if problem is not None:
            raise problem
