"""The MCP stdio transport over a sandbox :class:`vally.contracts.protocols.Process`.

``mcp.client.stdio.stdio_client`` starts a subprocess on the host itself; vally starts stdio
servers through the trial's sandbox instead (``Sandbox.spawn``: a subprocess in the
workspace for ``local``, ``docker exec -i`` for ``docker``). :func:`process_transport` mirrors
``stdio_client``: it yields the ``(read_stream, write_stream)`` pair of ``SessionMessage``
objects that ``mcp.ClientSession`` reads and writes, with newline-delimited JSON-RPC on the
process's stdout and stdin.

When the server's stdout ends (it exited or crashed), the read stream closes and the session
fails every pending and later request with ``CONNECTION_CLOSED`` instead of waiting forever.
Leaving the context stops the process (``Process.terminate``), shielded from cancellation.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator

import anyio
import anyio.lowlevel
import mcp_types
from mcp.client._transport import TransportStreams
from mcp.shared.message import SessionMessage

from vally import Process

logger = logging.getLogger(__name__)


def _parse(line: bytes) -> SessionMessage | Exception:
    """One stdout line as a message, or the parse error (the session surfaces it)."""
    try:
        message = mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValueError as exc:
        return exc
    return SessionMessage(message)


@contextlib.asynccontextmanager
async def process_transport(
    process: Process, problems: list[str] | None = None
) -> AsyncIterator[TransportStreams]:
    """Connect to an MCP server running as ``process`` over its stdin/stdout.

    The process is terminated when the context exits, whatever happened inside.

    Args:
        process: The server's process in the sandbox.
        problems: When given, why the connection broke is appended to it (e.g. a message
            line too long for the backend), for error messages.
    """
    notes = problems if problems is not None else []
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)

    async def stdout_reader() -> None:
        async with read_writer:
            while True:
                try:
                    line = await process.readline()
                except Exception as exc:  # the backend lost the process or the line
                    logger.debug("reading the MCP server's stdout failed: %s", exc)
                    notes.append(f"reading its stdout failed ({type(exc).__name__}: {exc})")
                    return
                if not line:
                    return  # end of stream: the server exited
                if not line.strip():
                    continue
                try:
                    await read_writer.send(_parse(line))
                except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                    return

    async def stdin_writer() -> None:
        try:
            async with write_reader:
                async for message in write_reader:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await process.write(data.encode("utf-8") + b"\n")
        except Exception as exc:  # a dead server cannot take input
            logger.debug("writing to the MCP server's stdin failed: %s", exc)
            notes.append(f"writing to its stdin failed ({type(exc).__name__}: {exc})")
            # Close the read side so the session sees the connection end.
            await read_writer.aclose()

    async with anyio.create_task_group() as tg:
        tg.start_soon(stdout_reader)
        tg.start_soon(stdin_writer)
        try:
            yield read_stream, write_stream
        finally:
            with anyio.CancelScope(shield=True):
                for stream in (read_stream, write_stream):
                    await stream.aclose()
                with contextlib.suppress(Exception):
                    await process.terminate()
            tg.cancel_scope.cancel()
    await anyio.lowlevel.cancel_shielded_checkpoint()
