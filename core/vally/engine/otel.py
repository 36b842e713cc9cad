"""OpenTelemetry tracing of runs: spans for the run (or experiment), variants, trials, the
executor and each grader.

By default finished spans are appended, one JSON object per line, to ``otel-spans.jsonl`` in
the run folder; with an OTLP endpoint they are exported to that OTLP/HTTP collector instead
and no span file is written. ``otel-context.json`` is always written: it holds the identity
of the parent (run) span, so that ``vally experiment merge`` can link its own span to every
shard's trace.

Usage::

    tracing = Tracing.start(run_dir, endpoint, "vally.experiment", {"vally.run_id": run_id})
    session.register_observer(tracing.observer(), "otel")
    ...  # run
    problems = tracing.finish()

opentelemetry is imported when tracing starts, never at CLI start.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from vally.contracts.hookspecs import hookimpl

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.trace import Span, Tracer

    from vally.contracts.events import RunInfo, RunOutcome
    from vally.contracts.protocols import TrialKey
    from vally.models.records import GraderResult, TrialResultRecord

SPANS_FILE = "otel-spans.jsonl"
CONTEXT_FILE = "otel-context.json"

AttributeValue = str | bool | int | float


def otlp_traces_url(endpoint: str) -> str:
    """The traces URL of an OTLP/HTTP endpoint: ``/v1/traces`` is added to a bare base URL
    (``http://host:4318`` -> ``http://host:4318/v1/traces``); a URL with a path is kept."""
    parts = urlsplit(endpoint)
    if parts.path in ("", "/"):
        return endpoint.rstrip("/") + "/v1/traces"
    return endpoint


def check_endpoint(endpoint: str, *, flag: str = "--otlp-endpoint") -> None:
    """Refuse an endpoint that is not an ``http(s)://host[:port][/path]`` URL.

    Raises:
        ConfigError: Not an http or https URL with a host.
    """
    from vally.errors import ConfigError

    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(
            f"{flag} {endpoint!r} is not an http(s) URL",
            hint="pass the collector's OTLP/HTTP URL, e.g. http://localhost:4318",
        )


def _iso_to_ns(value: str | None) -> int | None:
    if not value:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return int(moment.timestamp() * 1_000_000_000)


def _clean(attributes: Mapping[str, Any]) -> dict[str, AttributeValue]:
    out: dict[str, AttributeValue] = {}
    for key, value in attributes.items():
        if value is None:
            continue
        out[key] = value if isinstance(value, (str, bool, int, float)) else str(value)
    return out


def span_to_json(span: ReadableSpan) -> dict[str, Any]:
    """One finished span as a JSON-ready dict (ids as lowercase hex, times in ns)."""
    context = span.get_span_context()
    parent = span.parent
    status = span.status
    return {
        "name": span.name,
        "traceId": format(context.trace_id, "032x") if context else None,
        "spanId": format(context.span_id, "016x") if context else None,
        "parentSpanId": format(parent.span_id, "016x") if parent is not None else None,
        "kind": span.kind.name,
        "startTimeUnixNano": span.start_time,
        "endTimeUnixNano": span.end_time,
        "status": status.status_code.name,
        "statusDescription": status.description,
        "attributes": dict(span.attributes or {}),
        "links": [
            {
                "traceId": format(link.context.trace_id, "032x"),
                "spanId": format(link.context.span_id, "016x"),
                "attributes": dict(link.attributes or {}),
            }
            for link in span.links
        ],
        "events": [
            {"name": e.name, "timeUnixNano": e.timestamp, "attributes": dict(e.attributes or {})}
            for e in span.events
        ],
    }


def _json_lines_exporter(path: Path) -> Any:
    """A SpanExporter that appends each finished span as one flushed JSON line."""
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    class JsonLinesSpanExporter(SpanExporter):
        """Writes spans to ``path``, one JSON object per line."""

        def __init__(self) -> None:
            self._lock = threading.Lock()
            path.parent.mkdir(parents=True, exist_ok=True)
            self._file = path.open("a", encoding="utf-8", newline="\n")

        def export(self, spans: Sequence[ReadableSpan]) -> Any:
            with self._lock:
                if self._file.closed:
                    return SpanExportResult.FAILURE
                for span in spans:
                    self._file.write(json.dumps(span_to_json(span), ensure_ascii=False) + "\n")
                self._file.flush()
            return SpanExportResult.SUCCESS

        def shutdown(self) -> None:
            with self._lock:
                if not self._file.closed:
                    self._file.close()

        def force_flush(self, timeout_millis: int = 30000) -> bool:
            return True

    return JsonLinesSpanExporter()


class Tracing:
    """The spans of one run: a root span, plus what :meth:`observer` records from run events.

    Build it with :meth:`start`; call :meth:`finish` once at the end.
    """

    def __init__(
        self,
        provider: TracerProvider,
        tracer: Tracer,
        root: Span,
        run_dir: Path,
        endpoint: str | None,
    ) -> None:
        self.provider = provider
        self.tracer = tracer
        self.root = root
        self.run_dir = run_dir
        self.endpoint = endpoint
        self._finished = False

    @classmethod
    def start(
        cls,
        run_dir: Path,
        endpoint: str | None,
        name: str,
        attributes: Mapping[str, Any] | None = None,
        *,
        links: Sequence[Mapping[str, Any]] = (),
    ) -> Tracing:
        """Start tracing a run: open the root span and write ``otel-context.json``.

        Args:
            run_dir: The run folder (``otel-spans.jsonl`` and ``otel-context.json`` go there).
            endpoint: An OTLP/HTTP collector URL; None writes ``otel-spans.jsonl``.
            name: The root span's name (``vally.experiment``, ``vally.eval``, ...).
            attributes: Attributes of the root span.
            links: Other spans to link the root to: mappings with ``traceId`` (32 hex) and
                ``spanId`` (16 hex), e.g. the contents of shards' ``otel-context.json``.

        Raises:
            OutputError: ``otel-context.json`` or the span file cannot be written.
        """
        from opentelemetry import trace
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

        from vally._version import __version__
        from vally.errors import OutputError

        resource = Resource.create({"service.name": "vally", "service.version": __version__})
        provider = TracerProvider(resource=resource)
        try:
            if endpoint:
                from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
                    OTLPSpanExporter,
                )

                exporter: Any = OTLPSpanExporter(endpoint=otlp_traces_url(endpoint), timeout=10)
            else:
                exporter = _json_lines_exporter(run_dir / SPANS_FILE)
        except OSError as exc:
            raise OutputError(
                f"cannot write {run_dir / SPANS_FILE}: {exc.strerror or exc}",
                hint="check that the output directory is writable",
            ) from exc
        # The span file gets each span as it ends; a collector is fed from a background
        # thread so that a slow or unreachable endpoint never stalls the run.
        processor = BatchSpanProcessor(exporter) if endpoint else SimpleSpanProcessor(exporter)
        provider.add_span_processor(processor)
        tracer = provider.get_tracer("vally", __version__)
        otel_links = []
        for link in links:
            try:
                context = trace.SpanContext(
                    trace_id=int(str(link["traceId"]), 16),
                    span_id=int(str(link["spanId"]), 16),
                    is_remote=True,
                    trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED),
                )
            except (KeyError, ValueError):
                continue
            extra = {k: v for k, v in link.items() if k not in {"traceId", "spanId"}}
            otel_links.append(trace.Link(context, _clean(extra)))
        root = tracer.start_span(name, attributes=_clean(attributes or {}), links=otel_links)
        tracing = cls(provider, tracer, root, run_dir, endpoint)
        tracing.write_context(name, attributes or {})
        return tracing

    def context(self) -> dict[str, str]:
        """The root span's identity: ``traceId`` and ``spanId`` as hex."""
        ctx = self.root.get_span_context()
        return {"traceId": format(ctx.trace_id, "032x"), "spanId": format(ctx.span_id, "016x")}

    def write_context(self, name: str, attributes: Mapping[str, Any]) -> None:
        """Write ``otel-context.json`` (the parent span identity).

        Raises:
            OutputError: The file cannot be written.
        """
        from vally.engine.rundir import write_json
        from vally.errors import OutputError

        data = {
            **self.context(),
            "name": name,
            "exporter": "otlp" if self.endpoint else "jsonl",
            "attributes": _clean(attributes),
        }
        try:
            write_json(self.run_dir / CONTEXT_FILE, data)
        except OSError as exc:
            raise OutputError(
                f"cannot write {self.run_dir / CONTEXT_FILE}: {exc.strerror or exc}"
            ) from exc

    def child(
        self, name: str, attributes: Mapping[str, Any] | None = None, parent: Span | None = None
    ) -> Span:
        """Start a span under ``parent`` (default: the root span); end it yourself."""
        from opentelemetry import trace

        context = trace.set_span_in_context(parent or self.root)
        return self.tracer.start_span(name, context=context, attributes=_clean(attributes or {}))

    def observer(self) -> TracingObserver:
        """A run-event observer that records variant, trial, executor and grader spans."""
        return TracingObserver(self)

    def finish(self, *, error: str | None = None) -> list[str]:
        """End the root span and flush/shut down the exporter. Safe to call twice.

        Returns:
            Problems while exporting (never raises): e.g. an unreachable collector.
        """
        if self._finished:
            return []
        self._finished = True
        from opentelemetry.trace import Status, StatusCode

        if error:
            self.root.set_status(Status(StatusCode.ERROR, error))
        problems: list[str] = []
        try:
            self.root.end()
            self.provider.force_flush()
            self.provider.shutdown()
        except Exception as exc:
            problems.append(f"trace export failed: {type(exc).__name__}: {exc}")
        return problems


class TracingObserver:
    """Records spans from run events: one span per variant (experiments), one per trial,
    with an executor span and one span per grader result below it.

    Trial spans carry ``vally.variant``, ``vally.eval``, ``vally.stimulus``, ``vally.model``,
    ``vally.trial``, ``vally.status``, ``vally.verdict``, ``vally.score`` and token counts.
    """

    def __init__(self, tracing: Tracing) -> None:
        self.tracing = tracing
        self._variants: dict[str, Span] = {}
        self._trials: dict[TrialKey, Span] = {}
        self._lock = threading.Lock()

    def _variant_span(self, variant: str) -> Span | None:
        if not variant:
            return None
        with self._lock:
            span = self._variants.get(variant)
            if span is None:
                span = self.tracing.child("vally.variant", {"vally.variant": variant})
                self._variants[variant] = span
            return span

    def _key_attributes(self, key: TrialKey) -> dict[str, Any]:
        return {
            "vally.variant": key.variant or None,
            "vally.eval": key.eval_name,
            "vally.stimulus": key.stimulus,
            "vally.model": key.model,
            "vally.trial": key.trial,
        }

    @hookimpl
    def vally_trial_start(self, run: RunInfo, key: TrialKey) -> None:
        """Open the trial's span (under its variant's span in experiments)."""
        parent = self._variant_span(key.variant)
        span = self.tracing.child("vally.trial", self._key_attributes(key), parent)
        with self._lock:
            self._trials[key] = span

    @hookimpl
    def vally_grader_result(self, run: RunInfo, key: TrialKey, result: GraderResult) -> None:
        """Record one grader's result as a span under the trial."""
        with self._lock:
            parent = self._trials.get(key)
        span = self.tracing.child(
            f"vally.grader {result.name}",
            {
                **self._key_attributes(key),
                "vally.grader.name": result.name,
                "vally.grader.type": result.type,
                "vally.grader.passed": result.passed,
                "vally.grader.score": result.score,
                "vally.grader.status": result.status,
                "vally.verdict": "pass" if result.passed else "fail",
            },
            parent,
        )
        span.end()

    @hookimpl
    def vally_trial_end(self, run: RunInfo, record: TrialResultRecord) -> None:
        """Close the trial's span with its verdict, tokens and an executor span."""
        from opentelemetry import trace
        from opentelemetry.trace import Status, StatusCode

        key = _record_key(record)
        with self._lock:
            span = self._trials.pop(key, None)
        if span is None:
            span = self.tracing.child(
                "vally.trial", self._key_attributes(key), self._variant_span(key.variant)
            )
        grade = record.grade_result
        verdict = (
            "error"
            if record.status != "success"
            else (("pass" if grade.passed else "fail") if grade is not None else "none")
        )
        trajectory = record.trajectory
        tokens = trajectory.metrics.token_usage if trajectory is not None else None
        token_attributes = {
            "vally.tokens.input": tokens.input_tokens if tokens else None,
            "vally.tokens.output": tokens.output_tokens if tokens else None,
            "vally.tokens.total": tokens.total_tokens if tokens else None,
        }
        if trajectory is not None:
            meta = trajectory.metadata
            start = _iso_to_ns(meta.started_at) if meta is not None else None
            end = _iso_to_ns(meta.completed_at) if meta is not None else None
            executor = self.tracing.tracer.start_span(
                "vally.executor",
                context=trace.set_span_in_context(span),
                attributes=_clean(
                    {
                        **self._key_attributes(key),
                        "vally.executor": meta.executor if meta is not None else None,
                        "vally.end_reason": trajectory.end_reason,
                        "vally.turns": trajectory.metrics.turn_count,
                        "vally.tool_calls": trajectory.metrics.tool_call_count,
                        **token_attributes,
                    }
                ),
                start_time=start,
            )
            executor.end(end_time=end if end and start and end >= start else None)
        span.set_attributes(
            _clean(
                {
                    "vally.status": record.status,
                    "vally.verdict": verdict,
                    "vally.score": grade.score if grade is not None else None,
                    **token_attributes,
                }
            )
        )
        if record.error is not None:
            span.set_status(Status(StatusCode.ERROR, record.error.message[:500]))
        span.end()

    @hookimpl
    def vally_run_end(self, run: RunInfo, outcome: RunOutcome) -> None:
        """End the variant spans and any trial span left open (interrupted runs)."""
        with self._lock:
            trials = list(self._trials.values())
            self._trials.clear()
            variants = list(self._variants.values())
            self._variants.clear()
        for span in trials:
            span.end()
        for span in variants:
            span.end()


def _record_key(record: TrialResultRecord) -> TrialKey:
    from vally.contracts.protocols import TrialKey
    from vally.engine.planner import model_label

    return TrialKey(
        record.variant or "",
        record.eval_name,
        record.stimulus_name,
        model_label(record.model),
        record.trial_index,
    )
