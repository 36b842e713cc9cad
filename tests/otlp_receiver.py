"""OTLP/HTTP endpoints on 127.0.0.1 for the tracing tests: a receiver that decodes every
export request, a collector that never answers, and a port where nothing listens."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Receiver:
    """An OTLP/HTTP traces receiver on 127.0.0.1 that decodes every export request.

    Use it as a context manager (``with Receiver() as receiver: ...``), or call
    :meth:`start` and :meth:`stop`. ``spans`` holds the decoded protobuf spans and ``paths``
    the request paths, in arrival order.
    """

    def __init__(self) -> None:
        self.spans: list[Any] = []
        self.paths: list[str] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
                    ExportTraceServiceRequest,
                    ExportTraceServiceResponse,
                )

                body = self.rfile.read(int(self.headers["Content-Length"]))
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                with receiver._lock:
                    receiver.paths.append(self.path)
                    for resource_spans in request.resource_spans:
                        for scope in resource_spans.scope_spans:
                            receiver.spans.extend(scope.spans)
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """The receiver's base URL (exporters add ``/v1/traces``)."""
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def attributes(self, span: Any) -> dict[str, Any]:
        """A decoded span's attributes as a plain dict."""
        return protobuf_attributes(span.attributes)

    def named(self, name: str) -> list[Any]:
        """The received spans called ``name``."""
        with self._lock:
            return [s for s in self.spans if s.name == name]

    def start(self) -> None:
        """Serve requests from a background thread."""
        self.thread.start()

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> Receiver:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def protobuf_attributes(items: Any) -> dict[str, Any]:
    """OTLP ``KeyValue`` attributes (of a span or a link) as a plain dict."""
    out = {}
    for item in items:
        value = item.value
        out[item.key] = getattr(value, value.WhichOneof("value"))
    return out


@contextlib.contextmanager
def silent_collector() -> Iterator[str]:
    """The base URL of a collector that accepts connections and never answers."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


def unused_port_url() -> str:
    """The base URL of a port on 127.0.0.1 where nothing listens (connections are
    refused)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"
