"""The chat-agent with real MCP servers (stdio through a real local sandbox, and streamable
HTTP on 127.0.0.1), a scripted Chat Completions server as the model."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.llm.chat_server import ChatServer, Received, Reply, completion, tool_call
from tests.llm.support import make_provider, open_sandbox, run
from tests.mcp.support import BROKEN, NOTES, SILENT, http_notes_server, run_agent, stdio
from vally.contracts.protocols import GradeContext, Sandbox
from vally.errors import SetupError
from vally.models.spec import GraderConfig, McpServerConfig
from vally.models.trajectory import Trajectory
from vally.plugins.registry import Registry


def _script(*calls: tuple[str, dict[str, Any]], final: str = "Done.") -> Any:
    """A model that makes ``calls`` one per turn, then answers ``final``."""

    def agent(request: Received) -> Reply:
        done = sum(1 for m in request.messages if m["role"] == "tool")
        if done < len(calls):
            name, args = calls[done]
            return completion(None, [tool_call(name, args)])
        return completion(final)

    return agent


async def _grade(config: dict[str, Any], traj: Trajectory, sandbox: Sandbox) -> Any:
    cls = Registry("grader").get("tool-calls").cls
    grader = cls(cls.Config.model_validate(config))
    return await grader.grade(
        GradeContext(
            trajectory=traj,
            stimulus=traj.stimulus,
            grader=GraderConfig(type="tool-calls", config=config),
            sandbox=sandbox,
        )
    )


def _events(traj: Trajectory, kind: str) -> list[Any]:
    return [e.data for e in traj.events if e.type == kind]


def _offered(request: Received) -> list[str]:
    return [t["function"]["name"] for t in request.body.get("tools", [])]


# --------------------------------------------------------------------------- stdio


def test_stdio_tool_is_offered_called_recorded_and_graded(
    chat_server: ChatServer, tmp_path: Path
) -> None:
    chat_server.default = _script(
        ("notes__lookup", {"key": "alpha"}), ("notes__where", {}), final="alpha is first."
    )
    logs = tmp_path / "logs"

    async def go() -> tuple[Trajectory, str, list[Any]]:
        sandbox = await open_sandbox(tmp_path)
        try:
            traj = await run_agent(
                make_provider(chat_server),
                sandbox,
                {"notes": stdio(env={"NOTES_TAG": "from-server"})},
                session_log_dir=logs,
                env={"TRIAL_VAR": "1"},
            )
            where = next(
                e.data.result
                for e in traj.events
                if e.type == "tool_result" and e.data.tool_name == "notes__where"
            )
            with pytest.raises(ProcessLookupError):  # stopped by the executor
                os.kill(int(where.rsplit("pid=", 1)[1]), 0)
            required = await _grade({"required": ["^notes__lookup$"]}, traj, sandbox)
            forbidden = await _grade({"disallowed": [{"name": "^notes__"}]}, traj, sandbox)
            return traj, sandbox.workdir, [required, forbidden]
        finally:
            await sandbox.close()

    traj, workdir, (required, forbidden) = run(go())
    assert traj.end_reason == "completed"
    assert traj.output == "alpha is first."
    # Offered beside the built-in tools, prefixed by the server.
    offered = _offered(chat_server.requests[0])
    assert {"read_file", "write_file", "run_command", "list_files"} <= set(offered)
    assert {"notes__lookup", "notes__add", "notes__where", "notes__crash"} <= set(offered)
    assert all(re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", name) for name in offered)
    lookup = next(
        t for t in chat_server.requests[0].body["tools"] if t["function"]["name"] == "notes__lookup"
    )
    assert lookup["function"]["parameters"]["required"] == ["key"]
    # Recorded with the server's name.
    calls = _events(traj, "tool_call")
    results = _events(traj, "tool_result")
    assert [(c.tool_name, c.server, c.arguments) for c in calls] == [
        ("notes__lookup", "notes", {"key": "alpha"}),
        ("notes__where", "notes", {}),
    ]
    assert [(r.server, r.success) for r in results] == [("notes", True), ("notes", True)]
    assert results[0].result == "first letter"
    # The model got the result back.
    assert chat_server.requests[1].messages[-1]["content"] == "first letter"
    # The server ran in the workspace with the server's env.
    where = results[1].result
    assert f"cwd={workdir} " in where
    assert "tag=from-server" in where
    # tool-calls graders see the MCP calls.
    assert required.passed is True
    assert forbidden.passed is False
    assert traj.metadata.extra["mcp_tools"]["notes"] == [
        "lookup",
        "add",
        "where",
        "fail",
        "blob",
        "crash",
    ]
    assert "notes server: starting" in (logs / "mcp-notes.stderr.log").read_text()


def test_tools_allow_list_limits_what_the_model_sees(
    chat_server: ChatServer, tmp_path: Path
) -> None:
    chat_server.default = _script(("notes__add", {"a": 1, "b": 2}))

    async def go() -> Trajectory:
        sandbox = await open_sandbox(tmp_path)
        try:
            return await run_agent(
                make_provider(chat_server), sandbox, {"notes": stdio(tools=["lookup"])}
            )
        finally:
            await sandbox.close()

    traj = run(go())
    offered = _offered(chat_server.requests[0])
    assert [n for n in offered if n.startswith("notes__")] == ["notes__lookup"]
    [result] = _events(traj, "tool_result")
    assert result.success is False
    assert "unknown tool 'notes__add'" in result.result


def test_error_results_of_a_tool_reach_the_model(chat_server: ChatServer, tmp_path: Path) -> None:
    chat_server.default = _script(("notes__fail", {}), ("notes__add", {"a": "x"}))

    async def go() -> Trajectory:
        sandbox = await open_sandbox(tmp_path)
        try:
            return await run_agent(make_provider(chat_server), sandbox, {"notes": stdio()})
        finally:
            await sandbox.close()

    traj = run(go())
    fail, bad_args = _events(traj, "tool_result")
    assert (fail.success, fail.server) == (False, "notes")
    assert "fail" in fail.result
    assert bad_args.success is False
    assert traj.end_reason == "completed"


def test_server_crashing_mid_trial_gives_error_results_and_the_trial_completes(
    chat_server: ChatServer, tmp_path: Path
) -> None:
    chat_server.default = _script(
        ("notes__add", {"a": 2, "b": 3}),
        ("notes__crash", {}),
        ("notes__add", {"a": 1, "b": 1}),
        final="The notes server is gone.",
    )

    async def go() -> Trajectory:
        sandbox = await open_sandbox(tmp_path)
        try:
            return await run_agent(make_provider(chat_server), sandbox, {"notes": stdio()})
        finally:
            await sandbox.close()

    started = time.monotonic()
    traj = run(go())
    assert time.monotonic() - started < 30
    ok, crashed, after = _events(traj, "tool_result")
    assert (ok.success, ok.result) == (True, "5")
    assert crashed.success is False and after.success is False
    assert "closed the connection" in crashed.result
    assert "crashing on purpose" in crashed.result  # the stderr tail
    assert "closed the connection" in after.result
    # The model saw the error, and the trial ended normally.
    assert "closed the connection" in chat_server.requests[2].messages[-1]["content"]
    assert traj.end_reason == "completed"
    assert traj.output == "The notes server is gone."


def test_server_that_never_answers_initialize_is_a_setup_error_bounded_by_timeout(
    chat_server: ChatServer, tmp_path: Path
) -> None:
    async def go() -> None:
        sandbox = await open_sandbox(tmp_path)
        try:
            await run_agent(
                make_provider(chat_server), sandbox, {"stuck": stdio(SILENT, timeout="1s")}
            )
        finally:
            await sandbox.close()

    started = time.monotonic()
    with pytest.raises(SetupError) as info:
        run(go())
    assert time.monotonic() - started < 15
    message = info.value.message
    assert "MCP server 'stuck'" in message
    assert "did not answer initialize within 1s" in message
    assert "silent server: waiting forever" in message
    assert chat_server.requests == []  # the model was never called


def test_server_failing_at_start_is_a_setup_error_with_its_stderr(
    chat_server: ChatServer, tmp_path: Path
) -> None:
    async def go() -> None:
        sandbox = await open_sandbox(tmp_path)
        try:
            await run_agent(
                make_provider(chat_server),
                sandbox,
                {"notes": stdio(), "db": stdio(BROKEN, timeout="10s")},
            )
        finally:
            await sandbox.close()

    with pytest.raises(SetupError) as info:
        run(go())
    assert "MCP server 'db'" in info.value.message
    assert "DATABASE_URL is not set" in info.value.message


def test_missing_command_and_unknown_allowed_tool_are_setup_errors(
    chat_server: ChatServer, tmp_path: Path
) -> None:
    async def attempt(servers: dict[str, McpServerConfig]) -> str:
        sandbox = await open_sandbox(tmp_path)
        try:
            await run_agent(make_provider(chat_server), sandbox, servers)
        except SetupError as exc:
            return exc.message
        finally:
            await sandbox.close()
        raise AssertionError("no SetupError")

    missing = run(attempt({"x": McpServerConfig(command="no-such-mcp-server-cmd", timeout="5s")}))
    assert "no-such-mcp-server-cmd" in missing and "not found" in missing
    unknown = run(attempt({"notes": stdio(tools=["lookup", "nope"])}))
    assert "'nope'" in unknown and "lookup" in unknown


# --------------------------------------------------------------------------- http


def test_streamable_http_server_with_headers(chat_server: ChatServer, tmp_path: Path) -> None:
    chat_server.default = _script(("web__lookup", {"key": "answer"}), final="42")
    with http_notes_server() as server:

        async def go(headers: dict[str, str]) -> Trajectory:
            sandbox = await open_sandbox(tmp_path)
            try:
                config = McpServerConfig(
                    type="http", url=server.url, headers=headers, timeout="10s"
                )
                return await run_agent(make_provider(chat_server), sandbox, {"web": config})
            finally:
                await sandbox.close()

        traj = run(go({"Authorization": f"Bearer {server.token}"}))
        with pytest.raises(SetupError) as info:
            run(go({"Authorization": "Bearer wrong"}))
    [call] = _events(traj, "tool_call")
    [result] = _events(traj, "tool_result")
    assert (call.tool_name, call.server) == ("web__lookup", "web")
    assert (result.success, result.result, result.server) == (True, "42", "web")
    assert "MCP server 'web' at http://127.0.0.1:" in info.value.message


def test_http_server_unreachable_or_dying_mid_trial(
    chat_server: ChatServer, tmp_path: Path
) -> None:
    with http_notes_server() as server:
        url = server.url
        bearer = {"Authorization": f"Bearer {server.token}"}

        def agent(request: Received) -> Reply:
            done = sum(1 for m in request.messages if m["role"] == "tool")
            if done == 0:
                return completion(None, [tool_call("web__add", {"a": 1, "b": 2})])
            if done == 1:
                server.process.kill()  # the server dies between two calls
                server.process.wait()
                return completion(None, [tool_call("web__add", {"a": 3, "b": 4})])
            return completion("The web server went away.")

        chat_server.default = agent

        async def go(config: McpServerConfig) -> Trajectory:
            sandbox = await open_sandbox(tmp_path)
            try:
                return await run_agent(make_provider(chat_server), sandbox, {"web": config})
            finally:
                await sandbox.close()

        started = time.monotonic()
        traj = run(go(McpServerConfig(type="http", url=url, headers=bearer, timeout="10s")))
        assert time.monotonic() - started < 30
    first, second = _events(traj, "tool_result")
    assert (first.success, first.result) == (True, "3")
    assert second.success is False and "MCP server 'web' failed on 'add'" in second.result
    assert traj.end_reason == "completed"
    assert traj.output == "The web server went away."
    # Nothing listens there any more: a clean setup error, not a hang or a cancellation.
    with pytest.raises(SetupError) as info:
        run(go(McpServerConfig(type="http", url=url, timeout="5s")))
    assert "failed to start" in info.value.message
    assert "url' and 'headers'" in (info.value.hint or "")


# --------------------------------------------------------------------------- packaging


def test_mcp_is_imported_only_when_a_trial_declares_servers() -> None:
    code = (
        "import sys\n"
        "import vally_builtin.executors.chat_agent, vally_builtin.executors.command\n"
        "import vally_builtin.mcp\n"
        "print(json.dumps(sorted(m for m in sys.modules if m == 'mcp' or m.startswith('mcp.'))))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", "import json\n" + code],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert json.loads(proc.stdout) == []


# --------------------------------------------------------------------------- stopping


def _pid_recording_server() -> McpServerConfig:
    """The notes server, started by a shell that first writes its pid to ``server.pid``."""
    script = f'echo $$ > server.pid; exec "{sys.executable}" "{NOTES}"'
    return McpServerConfig(command="sh", args=["-c", script])


@pytest.mark.parametrize("how", ["trial-timeout", "cancelled"])
def test_servers_are_stopped_when_the_trial_is_cut_short(
    chat_server: ChatServer, tmp_path: Path, how: str
) -> None:
    # The model never answers in time: the trial is cut short while the MCP server runs.
    chat_server.default = Reply(body=completion("late").body, delay=60.0)

    async def model_was_asked() -> None:
        while not chat_server.requests:
            await asyncio.sleep(0.02)

    async def go() -> tuple[str, int]:
        sandbox = await open_sandbox(tmp_path)
        try:
            agent = asyncio.ensure_future(
                run_agent(
                    make_provider(chat_server, timeout=120.0),
                    sandbox,
                    {"notes": _pid_recording_server()},
                    timeout=8.0 if how == "trial-timeout" else 120.0,
                )
            )
            # The server is up once the model is asked (the tools are listed first).
            await asyncio.wait_for(model_was_asked(), 60.0)
            if how == "trial-timeout":
                outcome = (await agent).end_reason
            else:
                agent.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await agent
                outcome = "cancelled"
            pid = int((await sandbox.read_file("server.pid")).decode())
            # Stopped by the executor itself, before the sandbox closes.
            with pytest.raises(ProcessLookupError):
                os.kill(pid, 0)
            return outcome, pid
        finally:
            await sandbox.close()

    outcome, pid = run(go())
    assert outcome == ("timeout" if how == "trial-timeout" else "cancelled")
    assert len(chat_server.requests) == 1  # the server was up and the model was being asked
    assert pid > 0


def test_a_tool_result_longer_than_64_kib(chat_server: ChatServer, tmp_path: Path) -> None:
    chat_server.default = _script(
        ("notes__blob", {"size": 200_000}), ("notes__add", {"a": 1, "b": 1})
    )

    async def go() -> Trajectory:
        sandbox = await open_sandbox(tmp_path)
        try:
            return await run_agent(
                make_provider(chat_server), sandbox, {"notes": stdio()}, session_log_dir=None
            )
        finally:
            await sandbox.close()

    blob, add = _events(run(go()), "tool_result")
    assert blob.success is True
    assert blob.result.startswith("x" * 1000)  # capped by tool_output_limit, not lost
    assert (add.success, add.result) == (True, "2")
