"""Serving the app: bind the socket first (so a taken or invalid port is a clear error
before anything starts), then run uvicorn on it until interrupted, with deadlines on every
phase of a connection (:mod:`.deadlines`) and a bound on the size of a request head."""

from __future__ import annotations

import socket
from typing import Any

from vally import ConfigError
from vally_serve.deadlines import MAX_HEAD_BYTES, Deadlines

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 3200


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host``:``port`` (port 0: any free port).

    Raises:
        ConfigError: The port is out of range, taken, or the host is not an address here.
    """
    if not 0 <= port <= 65535:
        raise ConfigError(f"--port {port} is not a TCP port", hint="use 1..65535 (0: any free)")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise ConfigError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}",
            hint="pick another --port, or stop what uses it",
        ) from exc
    return sock


def url_of(sock: socket.socket) -> str:
    """The http URL the socket serves (``[::1]`` style for IPv6)."""
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/"


def server_for(app: Any, deadlines: Deadlines | None = None) -> Any:
    """The uvicorn server of ``app`` (its ``run(sockets=[sock])`` serves until stopped)."""
    import uvicorn

    from vally_serve.deadlines import protocol_with

    limits = deadlines or Deadlines()
    config = uvicorn.Config(
        app,
        log_level="warning",
        lifespan="off",
        access_log=False,
        http=protocol_with(limits),
        timeout_keep_alive=limits.keep_alive,
        h11_max_incomplete_event_size=MAX_HEAD_BYTES,
        server_header=False,
    )
    return uvicorn.Server(config)


def run(app: Any, sock: socket.socket, deadlines: Deadlines | None = None) -> None:
    """Serve ``app`` on ``sock`` until Ctrl-C or SIGTERM."""
    server_for(app, deadlines).run(sockets=[sock])
