"""Where the ``otel`` reporter's spans go: ``otel-spans.jsonl`` or an OTLP/HTTP collector.

:func:`open_pipeline` builds a tracer provider for one run. Without an endpoint, each span
is appended to the span file as it ends (one JSON object per line), and the file is flushed
at most once every :data:`FLUSH_SECONDS` and when the run ends, so spans cost no system call
each. With one, spans
are batched and sent from a background thread, so a slow or unreachable collector never
stalls the run; :meth:`SpanPipeline.close` then waits a bounded time for the last batches.

Both exporters remember what went wrong instead of only logging it, so that the reporter
can tell the user once the run ends. This module imports opentelemetry when it is itself
imported: the reporter imports it on first use only.
"""

from __future__ import annotations

import contextlib
import json
import random
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO, Any, Protocol
from urllib.parse import urlsplit

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from vally import OutputError, __version__

AttributeValue = str | bool | int | float
"""A span attribute value as vally records it."""

CONTEXT_FIELDS = frozenset({"traceId", "spanId", "name", "exporter", "attributes"})
"""The fields of ``otel-context.json``: never copied into a link's attributes."""


def otlp_traces_url(endpoint: str) -> str:
    """The traces URL of an OTLP/HTTP endpoint: ``/v1/traces`` is added to a bare base URL
    (``http://host:4318`` -> ``http://host:4318/v1/traces``); a URL with a path is kept."""
    parts = urlsplit(endpoint)
    if parts.path in ("", "/"):
        return endpoint.rstrip("/") + "/v1/traces"
    return endpoint


def clean_attributes(attributes: Mapping[str, Any]) -> dict[str, AttributeValue]:
    """Span attributes without None values; anything not a str, bool, int or float becomes
    its ``str``."""
    out: dict[str, AttributeValue] = {}
    for key, value in attributes.items():
        if value is None:
            continue
        out[key] = value if isinstance(value, (str, bool, int, float)) else str(value)
    return out


def iso_to_ns(value: str | None) -> int | None:
    """An ISO 8601 time as nanoseconds since the epoch (None when absent or unreadable)."""
    if not value:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return int(moment.timestamp() * 1_000_000_000)


def span_links(links: Sequence[Mapping[str, Any]]) -> list[trace.Link]:
    """Links to other runs' spans.

    Each mapping holds ``traceId`` (32 hex digits) and ``spanId`` (16 hex digits); its other
    entries with a str, bool, int or float value become the link's attributes (e.g.
    ``vally.shard``), except the fields of ``otel-context.json`` itself, so a shard's context
    file can be passed as it is. A mapping without valid ids is skipped.
    """
    out: list[trace.Link] = []
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
        if not context.is_valid:
            continue
        extra = {
            key: value
            for key, value in link.items()
            if key not in CONTEXT_FIELDS and isinstance(value, (str, bool, int, float))
        }
        out.append(trace.Link(context, extra))
    return out


def span_to_json(span: ReadableSpan) -> dict[str, Any]:
    """One finished span as a JSON-ready dict (ids as lowercase hex, times in ns)."""
    return _span_json(
        name=span.name,
        context=span.get_span_context(),
        parent=span.parent,
        kind=span.kind,
        start_time=span.start_time,
        end_time=span.end_time,
        status=span.status,
        attributes=span.attributes or {},
        links=span.links,
        events=[
            {"name": e.name, "timeUnixNano": e.timestamp, "attributes": dict(e.attributes or {})}
            for e in span.events
        ],
    )


def _span_json(
    *,
    name: str,
    context: trace.SpanContext | None,
    parent: trace.SpanContext | None,
    kind: trace.SpanKind,
    start_time: int | None,
    end_time: int | None,
    status: trace.Status,
    attributes: Mapping[str, Any],
    links: Sequence[trace.Link],
    events: list[dict[str, Any]],
) -> dict[str, Any]:
    """A span's line of the span file, from its parts (the SDK's spans and
    :class:`FileSpan` both)."""
    return {
        "name": name,
        "traceId": format(context.trace_id, "032x") if context else None,
        "spanId": format(context.span_id, "016x") if context else None,
        "parentSpanId": format(parent.span_id, "016x") if parent is not None else None,
        "kind": kind.name,
        "startTimeUnixNano": start_time,
        "endTimeUnixNano": end_time,
        "status": status.status_code.name,
        "statusDescription": status.description,
        "attributes": dict(attributes),
        "links": [
            {
                "traceId": format(link.context.trace_id, "032x"),
                "spanId": format(link.context.span_id, "016x"),
                "attributes": dict(link.attributes or {}),
            }
            for link in links
        ],
        "events": events,
    }


class WatchedExporter(Protocol):
    """An exporter that remembers whether every span it was given was delivered."""

    def begin_closing(self, deadline: float) -> None:
        """The run has ended: exports may start until ``deadline`` (``time.monotonic``)."""

    def problem(self) -> OutputError | None:
        """What went wrong while exporting, None when every span was delivered."""


FLUSH_SECONDS = 1.0
"""How long finished spans may wait in the span file's buffer before it is flushed."""


class JsonLinesSpanExporter(SpanExporter):
    """Appends each finished span to a file as one JSON line, flushed at most once every
    ``flush_every`` seconds (a killed run loses at most that much), at
    :meth:`force_flush` and at :meth:`shutdown`.

    Args:
        path: The span file (created with its folder; appended to when it exists).
        flush_every: Seconds between flushes (default :data:`FLUSH_SECONDS`).

    Raises:
        OutputError: The file cannot be opened.
    """

    def __init__(self, path: Path, *, flush_every: float | None = None) -> None:
        self.path = path
        self._flush_every = FLUSH_SECONDS if flush_every is None else flush_every
        self._flushed = time.monotonic()
        self._lock = threading.Lock()
        self._error: OSError | None = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._file: IO[str] = path.open("a", encoding="utf-8", newline="\n")
        except OSError as exc:
            raise OutputError(
                f"cannot open the span file {path}: {exc.strerror or exc}",
                hint="choose a writable folder with --output-dir",
            ) from exc

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Write ``spans``, one line each (flushed when the last flush is old enough)."""
        written = self.write_json([span_to_json(span) for span in spans])
        return SpanExportResult.SUCCESS if written else SpanExportResult.FAILURE

    def write_json(self, spans: Sequence[Mapping[str, Any]]) -> bool:
        """Write spans already in their JSON form (see :func:`span_to_json`), one line each;
        False when the file is closed or a write failed (remembered for :meth:`problem`)."""
        with self._lock:
            if self._file.closed or self._error is not None:
                return False
            try:
                for span in spans:
                    self._file.write(json.dumps(span, ensure_ascii=False) + "\n")
                now = time.monotonic()
                if now - self._flushed >= self._flush_every:
                    self._file.flush()
                    self._flushed = now
            except OSError as exc:
                self._error = exc
                return False
        return True

    def shutdown(self) -> None:
        """Close the file (safe to call twice)."""
        with self._lock:
            if not self._file.closed:
                try:
                    self._file.close()
                except OSError as exc:
                    self._error = self._error or exc

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Flush the spans written so far to the file."""
        with self._lock:
            if self._file.closed or self._error is not None:
                return self._error is None
            try:
                self._file.flush()
            except OSError as exc:
                self._error = exc
                return False
            self._flushed = time.monotonic()
        return True

    def begin_closing(self, deadline: float) -> None:
        """Spans are written as they end: nothing waits (shutdown flushes the rest)."""

    def problem(self) -> OutputError | None:
        """The first write error, as an :class:`OutputError` naming the file."""
        if self._error is None:
            return None
        return OutputError(
            f"cannot write the span file {self.path}: {self._error.strerror or self._error}",
            hint="check free disk space and permissions of the run folder",
        )


def _random_bits(bits: int) -> int:
    """A random non-zero id of ``bits`` bits (as the SDK's random id generator makes)."""
    value = random.getrandbits(bits)
    while not value:
        value = random.getrandbits(bits)
    return value


class FileSpan(trace.Span):
    """A span of a run traced to the span file: it holds what :func:`span_to_json` writes
    and writes it, in that form, when it ends. The SDK's spans do the same with about three
    times the work (attribute limits, span processors, a second conversion), which a run
    pays several times per trial.

    Args:
        sink: The span file.
        name: The span's name.
        context: Its identity.
        parent: Its parent's identity (None for a root span).
        kind: Its kind.
        attributes: Its attributes (copied).
        links: Links to other spans.
        start_time: When it started (ns since the epoch).
    """

    def __init__(
        self,
        sink: JsonLinesSpanExporter,
        name: str,
        context: trace.SpanContext,
        parent: trace.SpanContext | None,
        kind: trace.SpanKind,
        attributes: Mapping[str, Any] | None,
        links: Sequence[trace.Link],
        start_time: int,
    ) -> None:
        self._sink = sink
        self._name = name
        self._context = context
        self._parent = parent
        self._kind = kind
        self._attributes: dict[str, Any] = dict(attributes or {})
        self._links = list(links)
        self._events: list[dict[str, Any]] = []
        self._status = trace.Status(trace.StatusCode.UNSET)
        self._start_time = start_time
        self._ended = False

    def get_span_context(self) -> trace.SpanContext:
        """The span's identity."""
        return self._context

    def is_recording(self) -> bool:
        """True until the span ends."""
        return not self._ended

    def set_attribute(self, key: str, value: Any) -> None:
        """Set one attribute (ignored once the span ended)."""
        if not self._ended:
            self._attributes[key] = value

    def set_attributes(self, attributes: Mapping[str, Any]) -> None:
        """Set attributes (ignored once the span ended)."""
        if not self._ended:
            self._attributes.update(attributes)

    def add_event(self, name: str, attributes: Any = None, timestamp: int | None = None) -> None:
        """Record an event at ``timestamp`` (default now)."""
        if not self._ended:
            self._events.append(
                {
                    "name": name,
                    "timeUnixNano": timestamp if timestamp is not None else time.time_ns(),
                    "attributes": dict(attributes or {}),
                }
            )

    def update_name(self, name: str) -> None:
        """Rename the span."""
        if not self._ended:
            self._name = name

    def set_status(
        self, status: trace.Status | trace.StatusCode, description: str | None = None
    ) -> None:
        """Set the status, as the SDK does: an ``OK`` status is final."""
        if self._ended or self._status.status_code is trace.StatusCode.OK:
            return
        if isinstance(status, trace.Status):
            self._status = status
        else:
            self._status = trace.Status(status, description)

    def record_exception(
        self,
        exception: BaseException,
        attributes: Any = None,
        timestamp: int | None = None,
        escaped: bool = False,
    ) -> None:
        """Record ``exception`` as an ``exception`` event."""
        self.add_event(
            "exception",
            {
                "exception.type": type(exception).__name__,
                "exception.message": str(exception),
                "exception.escaped": str(escaped),
                **dict(attributes or {}),
            },
            timestamp,
        )

    def end(self, end_time: int | None = None) -> None:
        """End the span and write it (a second call does nothing)."""
        if self._ended:
            return
        self._ended = True
        self._sink.write_json([self._json(end_time if end_time is not None else time.time_ns())])

    def _json(self, end_time: int) -> dict[str, Any]:
        return _span_json(
            name=self._name,
            context=self._context,
            parent=self._parent,
            kind=self._kind,
            start_time=self._start_time,
            end_time=end_time,
            status=self._status,
            attributes=self._attributes,
            links=self._links,
            events=self._events,
        )


class FileTracer(trace.Tracer):
    """Starts :class:`FileSpan` spans that write themselves to ``sink`` when they end.

    Args:
        sink: The span file.
    """

    def __init__(self, sink: JsonLinesSpanExporter) -> None:
        self.sink = sink

    def start_span(
        self,
        name: str,
        context: Context | None = None,
        kind: trace.SpanKind = trace.SpanKind.INTERNAL,
        attributes: Any = None,
        links: Sequence[trace.Link] | None = None,
        start_time: int | None = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
    ) -> trace.Span:
        """A span under the span of ``context`` (default: the current one), or a root span
        of a new trace when there is none."""
        parent = trace.get_current_span(context).get_span_context()
        parent_context = parent if parent.is_valid else None
        own = trace.SpanContext(
            trace_id=parent.trace_id if parent_context is not None else _random_bits(128),
            span_id=_random_bits(64),
            is_remote=False,
            trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED),
        )
        return FileSpan(
            self.sink,
            name,
            own,
            parent_context,
            kind,
            attributes,
            links or (),
            start_time if start_time is not None else time.time_ns(),
        )

    @contextlib.contextmanager
    def start_as_current_span(  # type: ignore[override]  # the API's own decorator is private
        self,
        name: str,
        *args: Any,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
        end_on_exit: bool = True,
        **kwargs: Any,
    ) -> Iterator[trace.Span]:
        """Start a span (arguments as :meth:`start_span`) and make it the current one
        inside the ``with`` block."""
        span = self.start_span(name, *args, **kwargs)
        with trace.use_span(
            span,
            end_on_exit=end_on_exit,
            record_exception=record_exception,
            set_status_on_exception=set_status_on_exception,
        ) as current:
            yield current


class OtlpSpanExporter(SpanExporter):
    """Sends spans to an OTLP/HTTP collector and counts the spans it failed to deliver.

    Once the run has ended (:meth:`begin_closing`) a batch is sent only before the deadline
    and only when the batch before it was delivered: an unreachable collector costs at most
    one export timeout, not one per batch left.

    Args:
        url: The collector's traces URL (``.../v1/traces``).
        timeout: Seconds one export may take, retries included.
    """

    def __init__(self, url: str, timeout: float) -> None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        self.url = url
        self._exporter = OTLPSpanExporter(endpoint=url, timeout=timeout)
        self._lock = threading.Lock()
        self._deadline: float | None = None
        self._failed = 0
        self._sent = 0
        self._last_failed = False
        self._error: Exception | None = None

    def _may_send(self) -> bool:
        with self._lock:
            if self._deadline is None:
                return True
            return not self._last_failed and time.monotonic() < self._deadline

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Send one batch (or drop it when the closing deadline or an earlier failure says
        so), counting what was not delivered."""
        result = SpanExportResult.FAILURE
        if self._may_send():
            try:
                result = self._exporter.export(spans)
            except Exception as exc:  # the exporter's own errors: count, never raise
                with self._lock:
                    self._error = exc
        with self._lock:
            self._last_failed = result != SpanExportResult.SUCCESS
            if self._last_failed:
                self._failed += len(spans)
            else:
                self._sent += len(spans)
        return result

    def shutdown(self) -> None:
        """Close the exporter (pending retries are abandoned)."""
        self._exporter.shutdown()  # type: ignore[no-untyped-call]

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Nothing is buffered here (the batch processor holds pending spans)."""
        return True

    def begin_closing(self, deadline: float) -> None:
        """From now on, send only before ``deadline`` and after a delivered batch."""
        with self._lock:
            self._deadline = deadline

    def problem(self) -> OutputError | None:
        """How many spans were not delivered, as an :class:`OutputError` naming the URL."""
        with self._lock:
            failed, sent, error = self._failed, self._sent, self._error
        if not failed:
            return None
        cause = f" ({type(error).__name__}: {error})" if error is not None else ""
        return OutputError(
            f"trace export to {self.url} failed: {failed} of {failed + sent} span(s) were "
            f"not delivered{cause}",
            hint="check that the OTLP/HTTP collector is running and reachable "
            "(the run's results are not affected)",
        )


@dataclass
class SpanPipeline:
    """The tracer of one run and where its spans go.

    Attributes:
        provider: The run's own SDK tracer provider (never the global one) when spans go
            to a collector; None for the span file, whose tracer writes spans itself
            (:class:`FileTracer`).
        tracer: The tracer that starts the run's spans.
        exporter: The span file or collector exporter.
        exporter_name: ``jsonl`` or ``otlp``, as written to ``otel-context.json``.
    """

    provider: TracerProvider | None
    tracer: trace.Tracer
    exporter: WatchedExporter
    exporter_name: str

    def close(self, timeout: float) -> OutputError | None:
        """Send what is pending, then shut the pipeline down.

        Batches are sent until ``timeout`` seconds from now and only while the batch before
        was delivered; a send already under way may take up to its own export timeout.
        Spans not sent are dropped and counted.

        Returns:
            What went wrong while exporting, None when every span was delivered.
        """
        self.exporter.begin_closing(time.monotonic() + timeout)
        try:
            if self.provider is not None:
                self.provider.force_flush()
                self.provider.shutdown()
            elif isinstance(self.exporter, JsonLinesSpanExporter):
                self.exporter.force_flush()
                self.exporter.shutdown()
        except Exception as exc:
            return OutputError(f"trace export failed: {type(exc).__name__}: {exc}")
        return self.exporter.problem()


def open_pipeline(spans_file: Path | None, endpoint: str | None, timeout: float) -> SpanPipeline:
    """A tracer provider sending to ``endpoint`` (OTLP/HTTP) if given, else to ``spans_file``.

    Args:
        spans_file: Where spans are appended without an endpoint.
        endpoint: The collector's base URL (``/v1/traces`` is added to a bare one).
        timeout: Seconds one export to the collector may take, retries included.

    Raises:
        OutputError: The span file cannot be opened.
        ValueError: Neither a span file nor an endpoint was given.
    """
    if endpoint:
        exporter = OtlpSpanExporter(otlp_traces_url(endpoint), timeout)
        resource = Resource.create({"service.name": "vally", "service.version": __version__})
        provider = TracerProvider(resource=resource)
        provider.add_span_processor(BatchSpanProcessor(exporter))
        return SpanPipeline(
            provider=provider,
            tracer=provider.get_tracer("vally", __version__),
            exporter=exporter,
            exporter_name="otlp",
        )
    if spans_file is None:
        raise ValueError("a span file or an endpoint is needed")
    sink = JsonLinesSpanExporter(spans_file)
    return SpanPipeline(
        provider=None, tracer=FileTracer(sink), exporter=sink, exporter_name="jsonl"
    )
