"""Half-sent requests are dropped: a real server (uvicorn with vally's deadlines) on
127.0.0.1, and raw sockets that send part of a request head, part of a body, nothing, or a
head one byte at a time, or read nothing of a large answer. Each test waits for the
server's own deadline, with a generous bound; nothing here is timed by a sleep."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.history.serving import Served
from tests.history.synth import RunSpec, write_run

pytest.importorskip("uvicorn")

from vally_serve.api import create_app
from vally_serve.deadlines import Deadlines
from vally_serve.ingest import ingest
from vally_serve.server import bind, server_for
from vally_serve.store import open_store

DEADLINES = Deadlines(head=1.0, body=1.0, send=1.0, keep_alive=60)
"""Short deadlines; keep-alive is long, so it never closes a connection first."""
BOUND = 15.0
"""How long past its deadline a connection may stay open (a busy machine is slow)."""
HEAD = b"GET /api/metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n"


@pytest.fixture(scope="module")
def address(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    """A server in a thread over a store of 2,000 outcomes, with :data:`DEADLINES`."""
    root = tmp_path_factory.mktemp("deadlines")
    run = write_run(
        root / "run",
        RunSpec(run_id="big", stimuli=100, models=("a", "b"), trials=10, trial_dirs=False),
    )
    store = open_store(str(root / "h.db"))
    ingest(store, [run])
    sock = bind("127.0.0.1", 0)
    server = server_for(create_app(store), DEADLINES)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.started
    yield sock.getsockname()[:2]
    server.should_exit = True
    thread.join(timeout=30)
    store.close()


def connect(address: tuple[str, int]) -> socket.socket:
    client = socket.create_connection(address, timeout=DEADLINES.head + BOUND)
    return client


def read_until_closed(client: socket.socket) -> bytes:
    """Everything the server sends until it closes (a socket timeout fails the test); a
    reset (the server closed with requests of ours unread) is a close too."""
    received = b""
    while True:
        try:
            chunk = client.recv(65536)
        except ConnectionResetError:
            return received
        if not chunk:
            return received
        received += chunk


def assert_dropped(
    client: socket.socket, deadline: float, started: float, *, earliest: float | None = None
) -> bytes:
    """Read until the server closes ``client``; it must close between ``earliest``
    (default: most of ``deadline``) and ``deadline + BOUND`` seconds after ``started``."""
    try:
        received = read_until_closed(client)
    except TimeoutError:
        pytest.fail(f"the connection was still open {deadline + BOUND:.0f} s later")
    finally:
        client.close()
    elapsed = time.monotonic() - started
    low = deadline * 0.9 if earliest is None else earliest
    assert low <= elapsed <= deadline + BOUND, elapsed
    return received


def test_a_whole_request_is_answered(address: tuple[str, int]) -> None:
    with connect(address) as client:
        client.sendall(HEAD + b"Connection: close\r\n\r\n")
        assert read_until_closed(client).startswith(b"HTTP/1.1 200 ")


def test_a_half_sent_head_is_answered_408_and_closed(address: tuple[str, int]) -> None:
    started = time.monotonic()
    client = connect(address)
    client.sendall(HEAD)  # no blank line: the head never ends
    received = assert_dropped(client, DEADLINES.head, started)
    assert received.startswith(b"HTTP/1.1 408 ")


def test_a_silent_connection_is_closed(address: tuple[str, int]) -> None:
    started = time.monotonic()
    assert_dropped(connect(address), DEADLINES.head, started)


def test_a_head_sent_byte_by_byte_is_not_given_more_time(address: tuple[str, int]) -> None:
    started = time.monotonic()
    client = connect(address)
    closed = False
    for byte in HEAD * 20:  # takes longer than the deadline
        try:
            client.send(bytes([byte]))
        except OSError:
            closed = True
            break
        time.sleep(0.05)  # the trickle itself; the assertion below waits for the server
        if time.monotonic() - started > DEADLINES.head + BOUND:
            break
    if not closed:
        assert_dropped(client, DEADLINES.head, started)
    else:
        client.close()
        assert time.monotonic() - started <= DEADLINES.head + BOUND


def test_a_half_sent_body_is_closed(address: tuple[str, int]) -> None:
    client = connect(address)
    client.sendall(HEAD + b"Content-Length: 1000\r\n\r\n" + b"x" * 10)
    started = time.monotonic()
    received = assert_dropped(client, DEADLINES.body, started)
    assert received.startswith(b"HTTP/1.1 ")  # answered (a GET needs no body), then dropped


def test_many_half_sent_requests_are_all_dropped(address: tuple[str, int]) -> None:
    started = time.monotonic()
    clients = []
    for _ in range(300):
        client = connect(address)
        client.sendall(HEAD)
        clients.append(client)
    for client in clients:
        assert_dropped(client, DEADLINES.head, started, earliest=0.0)
    with connect(address) as fresh:  # and the server still answers
        fresh.sendall(HEAD + b"Connection: close\r\n\r\n")
        assert read_until_closed(fresh).startswith(b"HTTP/1.1 200 ")


def test_a_client_that_reads_nothing_of_a_large_answer_is_dropped(
    address: tuple[str, int],
) -> None:
    client = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    client.settimeout(DEADLINES.send + BOUND)
    client.connect(address)
    request = b"GET /api/outcomes?limit=500 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    for _ in range(20):  # pipelined: far more than the buffers on both sides hold
        client.sendall(request)
    started = time.monotonic()
    time.sleep(DEADLINES.send + 2)  # a client that reads nothing for longer than allowed
    try:
        read_until_closed(client)
    except TimeoutError:
        pytest.fail("the connection of a client that reads nothing stayed open")
    finally:
        client.close()
    assert time.monotonic() - started <= DEADLINES.send + 2 + BOUND


def test_vally_serve_drops_a_half_sent_request(tmp_path: Path) -> None:
    """The command itself serves with the default deadlines."""
    run = write_run(tmp_path / "run", RunSpec(run_id="r", stimuli=1, models=("m",), trials=1))
    with Served(str(run), cwd=tmp_path) as served:
        host, port = served.url.removeprefix("http://").rstrip("/").rsplit(":", 1)
        started = time.monotonic()
        client = socket.create_connection((host, int(port)), timeout=Deadlines().head + BOUND)
        client.sendall(HEAD)
        received = assert_dropped(client, Deadlines().head, started)
        assert received.startswith(b"HTTP/1.1 408 ")
        served.stop()
