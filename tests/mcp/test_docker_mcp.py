"""With the ``docker`` backend, stdio MCP servers run inside the trial's container."""

from __future__ import annotations

import socket
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.backends.docker_helpers import busybox_image, docker_api
from tests.llm.chat_server import ChatServer, completion, tool_call
from tests.llm.support import make_provider, run
from tests.mcp.support import SERVERS, run_agent
from vally.contracts.protocols import TrialContext, TrialKey
from vally.errors import SetupError
from vally.models.spec import EnvironmentConfig, McpServerConfig

__all__ = ["busybox_image", "docker_api"]

pytestmark = [pytest.mark.docker]

BOX = McpServerConfig(command="sh", args=["box_server.sh"], env={"BOX_TAG": "boxed"}, timeout="10s")


async def _in_container(image: str, body: Any, **args: Any) -> Any:
    from vally_backends.docker.backend import DockerBackend
    from vally_backends.docker.config import Config

    backend = DockerBackend(Config.model_validate({"image": image, "pull": "never", **args}))
    await backend.start(f"mcp-test-{uuid.uuid4().hex[:12]}")
    try:
        sandbox = await backend.open(
            TrialContext(
                key=TrialKey("default", "mcp", "s1", "m", 1),
                run_id=backend.run_id,
                environment=EnvironmentConfig(),
                spec_dir=Path.cwd(),
            )
        )
        try:
            await sandbox.write_file("box_server.sh", (SERVERS / "box_server.sh").read_bytes())
            return await body(sandbox)
        finally:
            await sandbox.close()
    finally:
        await backend.shutdown()


@pytest.mark.parametrize("read_only", [False, True], ids=["writable", "read-only-root"])
def test_stdio_server_runs_in_the_container(
    chat_server: ChatServer, busybox_image: str, read_only: bool
) -> None:
    chat_server.enqueue(completion(None, [tool_call("box__whereami", {})]), completion("Found it."))

    async def body(sandbox: Any) -> tuple[Any, str, str]:
        traj = await run_agent(make_provider(chat_server), sandbox, {"box": BOX})
        ps = await sandbox.exec(["ps", "-o", "pid,args"], timeout=10)
        assert ps.exit_code == 0 and "ps -o pid,args" in ps.stdout, ps
        return traj, sandbox.workdir, ps.stdout

    traj, workdir, processes = run(_in_container(busybox_image, body, read_only=read_only))
    [result] = [e.data for e in traj.events if e.type == "tool_result"]
    assert (result.success, result.server) == (True, "box")
    assert f"cwd={workdir} " in result.result
    assert "tag=boxed" in result.result
    host = result.result.split("host=")[1].split()[0]
    assert host and host != socket.gethostname()  # the container's host name
    assert "box_server.sh" not in processes  # stopped when the trial ended


def test_server_missing_in_the_container_is_a_setup_error(
    chat_server: ChatServer, busybox_image: str
) -> None:
    async def body(sandbox: Any) -> str:
        try:
            await run_agent(
                make_provider(chat_server),
                sandbox,
                {"gone": McpServerConfig(command="python3", args=["x.py"], timeout="10s")},
            )
        except SetupError as exc:
            return exc.message
        raise AssertionError("no SetupError")

    message = run(_in_container(busybox_image, body))
    assert "MCP server 'gone'" in message
    assert "python3" in message and "not found" in message
    assert chat_server.requests == []
