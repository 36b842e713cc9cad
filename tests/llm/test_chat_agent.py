from __future__ import annotations

import asyncio
import hashlib
import importlib.metadata
import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from tests.llm.chat_server import ChatServer, Received, Reply, completion, error, tool_call
from tests.llm.support import make_provider, open_sandbox, run
from vally.contracts.llm import LLMProvider
from vally.contracts.protocols import ExecutorOptions, GradeContext, Sandbox, SkillRef
from vally.errors import ExecutionError, LLMError
from vally.models.spec import Constraints, GraderConfig, Stimulus, Turn
from vally.models.trajectory import Trajectory
from vally.plugins.capabilities import needs_llm, supports_turns
from vally.plugins.registry import Registry
from vally_backends.local import LocalSandbox
from vally_builtin.executors.chat_agent import ChatAgentExecutor

SYSTEM_MD = (
    Path(__file__).parents[2] / "plugins/builtin/vally_builtin/executors/chat_agent_system.md"
)


def stimulus(prompt: str = "Create hello.txt saying hello", **kw: Any) -> Stimulus:
    return Stimulus(name="s1", prompt=prompt, **kw)


async def run_agent(
    provider: LLMProvider | None,
    sandbox: Sandbox,
    stim: Stimulus,
    *,
    constraints: Constraints | None = None,
    skills: tuple[SkillRef, ...] = (),
    config: dict[str, Any] | None = None,
    model: str | None = "test-model",
    **options: Any,
) -> Trajectory:
    executor = ChatAgentExecutor(ChatAgentExecutor.Config.model_validate(config or {}))
    opts = ExecutorOptions(
        model=model,
        timeout=60.0,
        skills=skills,
        constraints=constraints or Constraints(),
        llm=provider,
        **options,
    )
    return await executor.execute(stim, sandbox, opts)


def in_trial(tmp_path: Path, body: Callable[[LocalSandbox], Awaitable[Any]]) -> Any:
    """Open a real local sandbox, run ``body`` with it, always close it."""

    async def go() -> Any:
        sandbox = await open_sandbox(tmp_path)
        try:
            return await body(sandbox)
        finally:
            await sandbox.close()

    return run(go())


async def grade(
    grader_type: str, config: dict[str, Any], traj: Trajectory, sandbox: Sandbox
) -> Any:
    """Grade with the installed grader plugin of that name."""
    cls = Registry("grader").get(grader_type).cls
    grader = cls(cls.Config.model_validate(config))
    entry = GraderConfig(type=grader_type, config=config)
    return await grader.grade(
        GradeContext(trajectory=traj, stimulus=traj.stimulus, grader=entry, sandbox=sandbox)
    )


def types(traj: Trajectory) -> list[str]:
    return [e.type for e in traj.events]


def test_entry_point_is_registered() -> None:
    eps = {ep.name: ep.value for ep in importlib.metadata.entry_points(group="vally.executors")}
    assert eps["chat-agent"] == "vally_builtin.executors.chat_agent:ChatAgentExecutor"
    assert Registry("executor").get("chat-agent").cls is ChatAgentExecutor
    assert supports_turns(ChatAgentExecutor) is True
    assert needs_llm(ChatAgentExecutor) is True


# --------------------------------------------------------------------------- a full run


def test_writes_a_file_and_file_contains_passes(chat_server: ChatServer, tmp_path: Path) -> None:
    chat_server.enqueue(
        completion(
            "I will write the file.",
            [tool_call("write_file", {"path": "hello.txt", "content": "hello world\n"}, "c1")],
            prompt_tokens=50,
            completion_tokens=10,
            cached_tokens=20,
        ),
        completion("Done: hello.txt now says hello.", prompt_tokens=70, completion_tokens=8),
    )
    provider = make_provider(chat_server)

    async def body(sandbox: LocalSandbox) -> tuple[Trajectory, Any, Any, bytes]:
        try:
            traj = await run_agent(provider, sandbox, stimulus())
        finally:
            await provider.aclose()
        passed = await grade(
            "file-contains", {"path": "hello.txt", "value": "hello world"}, traj, sandbox
        )
        failed = await grade(
            "file-contains", {"path": "hello.txt", "value": "goodbye"}, traj, sandbox
        )
        return traj, passed, failed, await sandbox.read_file("hello.txt")

    traj, passed, failed, content = in_trial(tmp_path, body)
    assert content == b"hello world\n"
    assert passed.passed is True and failed.passed is False
    assert traj.end_reason == "completed"
    assert traj.output == "Done: hello.txt now says hello."
    assert types(traj) == [
        "user_message",
        "turn_start",
        "token_usage",
        "assistant_message",
        "tool_call",
        "tool_result",
        "turn_end",
        "turn_start",
        "token_usage",
        "assistant_message",
        "turn_end",
    ]
    call = traj.events[4].data
    assert call.tool_name == "write_file" and call.tool_call_id == "c1"  # type: ignore[union-attr]
    assert call.arguments == {"path": "hello.txt", "content": "hello world\n"}  # type: ignore[union-attr]
    assert traj.events[5].data.success is True  # type: ignore[union-attr]
    m = traj.metrics
    assert m.token_usage.input_tokens == 120 and m.token_usage.output_tokens == 18
    assert m.token_usage.cache_read_tokens == 20 and m.token_usage.call_count == 2
    assert m.tool_call_count == 1 and m.turn_count == 2
    assert traj.metadata.executor == "chat-agent" and traj.metadata.model == "test-model"
    expected_sha = hashlib.sha256(SYSTEM_MD.read_bytes()).hexdigest()
    assert traj.metadata.extra["harness_sha256"] == expected_sha
    # the second request continues the conversation with the tool result
    first, second = chat_server.requests
    system = first.messages[0]
    assert system["role"] == "system" and traj.work_dir in system["content"]
    assert "load_skill" not in {t["function"]["name"] for t in first.body["tools"]}
    assert second.messages[-1]["role"] == "tool"
    assert second.messages[-1]["tool_call_id"] == "c1"
    assert "wrote 12 bytes to hello.txt" in second.messages[-1]["content"]


def test_run_command_and_read_file_in_the_sandbox(chat_server: ChatServer, tmp_path: Path) -> None:
    lines = "".join(f"line {i}\n" for i in range(1, 11))
    chat_server.enqueue(
        completion(
            None,
            [
                tool_call(
                    "run_command",
                    {"command": "printf '%s' \"$PWD\" > where.txt; echo out; echo err >&2"},
                ),
                tool_call("write_file", {"path": "sub/lines.txt", "content": lines}),
                tool_call("read_file", {"path": "sub/lines.txt", "offset": 3, "limit": 2}),
                tool_call("run_command", {"command": "exit 3"}),
                tool_call("list_files", {}),
            ],
        ),
        completion("all done"),
    )
    provider = make_provider(chat_server)

    async def body(sandbox: LocalSandbox) -> tuple[Trajectory, str]:
        try:
            traj = await run_agent(provider, sandbox, stimulus())
        finally:
            await provider.aclose()
        return traj, (await sandbox.read_file("where.txt")).decode()

    traj, where = in_trial(tmp_path, body)
    results = [e.data for e in traj.events if e.type == "tool_result"]
    calls = [e.data for e in traj.events if e.type == "tool_call"]
    assert where == traj.work_dir  # the command ran in the workspace
    assert results[0].success and "exit code: 0" in results[0].result and "out" in results[0].result
    assert "err" in results[0].result
    assert results[2].result.startswith("line 3\nline 4\n")
    assert "offset=5" in results[2].result
    assert results[3].success is False and "exit code: 3" in results[3].result
    assert results[4].result.splitlines() == ["sub/lines.txt", "where.txt"]
    assert len({c.batch_id for c in calls}) == 1 and calls[0].batch_id
    assert traj.metrics.tool_call_breakdown == {
        "run_command": 2,
        "write_file": 1,
        "read_file": 1,
        "list_files": 1,
    }


def test_paths_outside_the_workspace_are_refused(chat_server: ChatServer, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    chat_server.enqueue(
        completion(
            None,
            [
                tool_call("read_file", {"path": "../outside.txt"}),
                tool_call("write_file", {"path": str(outside), "content": "x"}),
                tool_call("read_file", {"path": "missing.txt"}),
            ],
        ),
        completion("ok"),
    )
    provider = make_provider(chat_server)

    async def body(sandbox: LocalSandbox) -> Trajectory:
        try:
            return await run_agent(provider, sandbox, stimulus())
        finally:
            await provider.aclose()

    traj = in_trial(tmp_path, body)
    results = [e.data for e in traj.events if e.type == "tool_result"]
    assert [r.success for r in results] == [False, False, False]
    assert "leaves the workspace" in results[0].result
    assert "outside the workspace" in results[1].result
    assert "no file 'missing.txt'" in results[2].result
    assert not outside.exists()


# --------------------------------------------------------------------------- skills


def test_skill_loaded_progressively(chat_server: ChatServer, tmp_path: Path) -> None:
    chat_server.enqueue(
        completion(None, [tool_call("load_skill", {"name": "nope"})]),
        completion(None, [tool_call("load_skill", {"name": "greeter"})]),
        completion("Greeted as the skill says."),
    )
    provider = make_provider(chat_server)
    skill_md = (
        "---\nname: greeter\ndescription: How to greet users\n---\n\n"
        "# Greeting\nAlways say HOWDY-42.\n"
    )

    async def body(sandbox: LocalSandbox) -> tuple[Trajectory, Any, Any]:
        await sandbox.write_file(".skills/greeter/SKILL.md", skill_md.encode())
        ref = SkillRef(
            name="greeter",
            description="How to greet users",
            host_path=tmp_path / "unused",
            sandbox_path=f"{sandbox.workdir}/.skills/greeter",
        )
        try:
            traj = await run_agent(provider, sandbox, stimulus("greet me"), skills=(ref,))
        finally:
            await provider.aclose()
        ok = await grade("skill-invocation", {"required": ["greeter"]}, traj, sandbox)
        bad = await grade("skill-invocation", {"required": ["other"]}, traj, sandbox)
        return traj, ok, bad

    traj, ok, bad = in_trial(tmp_path, body)
    assert ok.passed is True and bad.passed is False
    system = chat_server.requests[0].messages[0]["content"]
    assert "`greeter`: How to greet users" in system
    assert "HOWDY-42" not in system  # only the description up front
    assert "load_skill" in {t["function"]["name"] for t in chat_server.requests[0].body["tools"]}
    results = [e.data for e in traj.events if e.type == "tool_result"]
    assert results[0].success is False and "available skills: greeter" in results[0].result
    assert results[1].success is True and "Always say HOWDY-42." in results[1].result
    assert "description:" not in results[1].result  # frontmatter stripped
    assert [e.data.skill_name for e in traj.events if e.type == "skill_activation"] == ["greeter"]
    assert traj.metrics.skill_activation_breakdown == {"greeter": 1}
    assert traj.metadata.skills_loaded == ["greeter"]


# --------------------------------------------------------------------------- turns


def test_turns_share_one_conversation(chat_server: ChatServer, tmp_path: Path) -> None:
    chat_server.enqueue(completion("first answer"), completion("second answer"))
    provider = make_provider(chat_server)
    stim = Stimulus(name="mt", turns=[Turn(prompt="one"), Turn(prompt="two")])

    async def body(sandbox: LocalSandbox) -> Trajectory:
        try:
            return await run_agent(provider, sandbox, stim)
        finally:
            await provider.aclose()

    traj = in_trial(tmp_path, body)
    second = chat_server.requests[1].messages
    assert [(m["role"], m["content"]) for m in second[1:]] == [
        ("user", "one"),
        ("assistant", "first answer"),
        ("user", "two"),
    ]
    assert [
        (e.type, e.turn) for e in traj.events if e.type in ("user_message", "assistant_message")
    ] == [
        ("user_message", 0),
        ("assistant_message", 0),
        ("user_message", 1),
        ("assistant_message", 1),
    ]
    assert traj.for_turn(1).output == "second answer"


# --------------------------------------------------------------------------- failures


def test_malformed_tool_arguments_get_a_recoverable_error(
    chat_server: ChatServer, tmp_path: Path
) -> None:
    chat_server.enqueue(
        completion(None, [tool_call("write_file", '{"path": "a.txt", "content": ', "bad1")]),
        completion(None, [tool_call("write_file", {"path": "a.txt", "text": "hi"}, "bad2")]),
        completion(None, [tool_call("frobnicate", {}, "bad3")]),
        completion(None, [tool_call("write_file", {"path": "a.txt", "content": "hi"}, "good")]),
        completion("recovered"),
    )
    provider = make_provider(chat_server)

    async def body(sandbox: LocalSandbox) -> tuple[Trajectory, bytes]:
        try:
            traj = await run_agent(provider, sandbox, stimulus())
        finally:
            await provider.aclose()
        return traj, await sandbox.read_file("a.txt")

    traj, content = in_trial(tmp_path, body)
    assert content == b"hi"
    assert traj.end_reason == "completed" and traj.output == "recovered"
    results = {e.data.tool_call_id: e.data for e in traj.events if e.type == "tool_result"}
    assert results["bad1"].success is False and "not valid JSON" in results["bad1"].result
    assert results["bad2"].success is False
    assert "content: Field required" in results["bad2"].result
    assert "text: Extra inputs" in results["bad2"].result
    assert (
        results["bad3"].success is False and "unknown tool 'frobnicate'" in results["bad3"].result
    )
    assert results["good"].success is True
    calls = {e.data.tool_call_id: e.data for e in traj.events if e.type == "tool_call"}
    assert calls["bad1"].arguments == '{"path": "a.txt", "content": '  # kept raw
    # the model saw each error as the tool's answer
    tool_msg = chat_server.requests[1].messages[-1]
    assert tool_msg["role"] == "tool" and tool_msg["tool_call_id"] == "bad1"
    assert tool_msg["content"].startswith("error: ")


def test_500_storm_is_an_executor_error_of_that_trial_only(
    chat_server: ChatServer, tmp_path: Path
) -> None:
    def responder(request: Received) -> Reply:
        if request.model == "storm-model":
            return error(500, "upstream exploded")
        return completion("fine")

    chat_server.default = responder
    provider = make_provider(chat_server, max_retries=2)

    async def trial(name: str, model: str) -> Trajectory:
        sandbox = await open_sandbox(tmp_path, name)
        try:
            return await run_agent(provider, sandbox, stimulus(), model=model)
        finally:
            await sandbox.close()

    async def go() -> list[Any]:
        try:
            return await asyncio.gather(
                trial("a", "storm-model"), trial("b", "good-model"), return_exceptions=True
            )
        finally:
            await provider.aclose()

    storm, good = run(go())
    assert isinstance(storm, ExecutionError)
    assert isinstance(storm.__cause__, LLMError) and storm.__cause__.retryable is True
    assert "storm-model" in storm.message and "500" in storm.message
    assert "upstream exploded" in storm.message and "retries exhausted" in storm.message
    assert len(chat_server.requests_for("storm-model")) == 3
    assert isinstance(good, Trajectory) and good.end_reason == "completed"
    assert good.output == "fine"


def test_401_is_terminal_and_hides_the_key(
    chat_server: ChatServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-live-TOPSECRET-987654"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    chat_server.default = error(401, f"Incorrect API key provided: {secret}")
    provider = make_provider(chat_server, max_retries=3)

    async def body(sandbox: LocalSandbox) -> ExecutionError:
        try:
            with pytest.raises(ExecutionError) as info:
                await run_agent(provider, sandbox, stimulus(), model="gpt-x")
            return info.value
        finally:
            await provider.aclose()

    exc = in_trial(tmp_path, body)
    assert len(chat_server.requests) == 1
    assert isinstance(exc.__cause__, LLMError) and exc.__cause__.retryable is False
    assert "'gpt-x'" in str(exc) and "HTTP 401" in str(exc)
    assert secret not in str(exc) and secret not in str(exc.__cause__)


def test_missing_provider_or_model_says_how_to_configure(tmp_path: Path) -> None:
    async def body(sandbox: LocalSandbox) -> tuple[ExecutionError, ExecutionError]:
        with pytest.raises(ExecutionError) as no_llm:
            await run_agent(None, sandbox, stimulus())
        provider = make_provider_unused()
        with pytest.raises(ExecutionError) as no_model:
            await run_agent(provider, sandbox, stimulus(), model=None)
        return no_llm.value, no_model.value

    no_llm, no_model = in_trial(tmp_path, body)
    assert "llm:" in str(no_llm) and "OPENAI_BASE_URL" in str(no_llm)
    assert "--model" in str(no_model)


def make_provider_unused() -> LLMProvider:
    from vally_builtin.llm.openai import OpenAIProvider

    return OpenAIProvider(OpenAIProvider.Config(base_url="http://127.0.0.1:9/v1"))


# --------------------------------------------------------------------------- constraints


def _looping(server: ChatServer, **usage: int) -> None:
    """A model that never stops calling tools."""
    server.default = lambda _req: completion(
        "again", [tool_call("list_files", {"path": "."})], **usage
    )


def test_max_turns_stops_a_model_that_never_stops(chat_server: ChatServer, tmp_path: Path) -> None:
    _looping(chat_server)
    provider = make_provider(chat_server)

    async def body(sandbox: LocalSandbox) -> Trajectory:
        try:
            return await run_agent(
                provider, sandbox, stimulus(), constraints=Constraints(max_turns=3)
            )
        finally:
            await provider.aclose()

    traj = in_trial(tmp_path, body)
    assert traj.end_reason == "max_turns"
    assert "max_turns of 3" in (traj.end_detail or "")
    assert len(chat_server.requests) == 3
    assert traj.metrics.turn_count == 3 and traj.metrics.token_usage.call_count == 3
    assert traj.events[-1].type == "error" and traj.events[-1].data.fatal is True  # type: ignore[union-attr]


def test_max_steps_safety_cap(chat_server: ChatServer, tmp_path: Path) -> None:
    _looping(chat_server)
    provider = make_provider(chat_server)

    async def body(sandbox: LocalSandbox) -> Trajectory:
        try:
            return await run_agent(provider, sandbox, stimulus(), config={"max_steps": 2})
        finally:
            await provider.aclose()

    traj = in_trial(tmp_path, body)
    assert traj.end_reason == "max_turns" and "max_steps" in (traj.end_detail or "")
    assert len(chat_server.requests) == 2


def test_max_tool_calls(chat_server: ChatServer, tmp_path: Path) -> None:
    chat_server.default = lambda _req: completion(
        None, [tool_call("list_files", {}), tool_call("list_files", {})]
    )
    provider = make_provider(chat_server)

    async def body(sandbox: LocalSandbox) -> Trajectory:
        try:
            return await run_agent(
                provider, sandbox, stimulus(), constraints=Constraints(max_tool_calls=3)
            )
        finally:
            await provider.aclose()

    traj = in_trial(tmp_path, body)
    assert traj.end_reason == "max_tool_calls"
    assert types(traj).count("turn_start") == types(traj).count("turn_end") == 2
    assert types(traj)[-2:] == ["turn_end", "error"]
    assert traj.metrics.tool_call_count == 3
    assert len([e for e in traj.events if e.type == "tool_result"]) == 3
    assert len(chat_server.requests) == 2


def test_max_tokens(chat_server: ChatServer, tmp_path: Path) -> None:
    _looping(chat_server, prompt_tokens=80, completion_tokens=20)
    provider = make_provider(chat_server)

    async def body(sandbox: LocalSandbox) -> Trajectory:
        try:
            return await run_agent(
                provider, sandbox, stimulus(), constraints=Constraints(max_tokens=250)
            )
        finally:
            await provider.aclose()

    traj = in_trial(tmp_path, body)
    assert traj.end_reason == "max_tokens"
    assert len(chat_server.requests) == 3  # 100, 200, 300 > 250
    assert traj.metrics.token_usage.total_tokens == 300


def test_max_duration_stops_a_running_command(chat_server: ChatServer, tmp_path: Path) -> None:
    chat_server.enqueue(
        completion(None, [tool_call("run_command", {"command": "sleep 30"}, "slow")])
    )
    provider = make_provider(chat_server)

    async def body(sandbox: LocalSandbox) -> Trajectory:
        try:
            return await run_agent(
                provider, sandbox, stimulus(), constraints=Constraints(max_duration="300ms")
            )
        finally:
            await provider.aclose()

    start = time.monotonic()
    traj = in_trial(tmp_path, body)
    assert time.monotonic() - start < 10
    assert traj.end_reason == "max_duration"
    result = next(e.data for e in traj.events if e.type == "tool_result")
    assert result.tool_call_id == "slow" and result.success is False
    assert "interrupted" in result.result


def test_stimulus_constraints_apply_when_options_have_none(
    chat_server: ChatServer, tmp_path: Path
) -> None:
    _looping(chat_server)
    provider = make_provider(chat_server)

    async def body(sandbox: LocalSandbox) -> Trajectory:
        try:
            return await run_agent(
                provider, sandbox, stimulus(constraints=Constraints(max_turns=1))
            )
        finally:
            await provider.aclose()

    traj = in_trial(tmp_path, body)
    assert traj.end_reason == "max_turns" and len(chat_server.requests) == 1


# --------------------------------------------------------------------------- config


def test_system_prompt_override_and_session_log(chat_server: ChatServer, tmp_path: Path) -> None:
    prompt_file = tmp_path / "spec" / "prompt.md"
    prompt_file.parent.mkdir()
    prompt_file.write_text("Custom harness in {{workdir}}.{{skills}}")
    chat_server.enqueue(completion("hi"))
    provider = make_provider(chat_server)
    logs = tmp_path / "logs"

    async def body(sandbox: LocalSandbox) -> Trajectory:
        try:
            return await run_agent(
                provider,
                sandbox,
                stimulus(),
                config={"system_prompt_file": "prompt.md", "temperature": 0.3},
                spec_dir=prompt_file.parent,
                session_log_dir=logs,
                reasoning_effort="low",
            )
        finally:
            await provider.aclose()

    traj = in_trial(tmp_path, body)
    request = chat_server.requests[0]
    assert request.messages[0]["content"] == f"Custom harness in {traj.work_dir}."
    assert request.body["temperature"] == 0.3 and request.body["reasoning_effort"] == "low"
    assert (
        traj.metadata.extra["harness_sha256"]
        == hashlib.sha256(prompt_file.read_bytes()).hexdigest()
    )
    lines = (logs / "events.jsonl").read_text().splitlines()
    assert [json.loads(line)["type"] for line in lines] == [e.type for e in traj.events]


def test_missing_system_prompt_file_is_an_execution_error(
    chat_server: ChatServer, tmp_path: Path
) -> None:
    provider = make_provider(chat_server)

    async def body(sandbox: LocalSandbox) -> ExecutionError:
        try:
            with pytest.raises(ExecutionError) as info:
                await run_agent(
                    provider,
                    sandbox,
                    stimulus(),
                    config={"system_prompt_file": "nope.md"},
                    spec_dir=tmp_path,
                )
            return info.value
        finally:
            await provider.aclose()

    exc = in_trial(tmp_path, body)
    assert "nope.md" in str(exc)
    assert chat_server.requests == []


def test_long_tool_output_is_cut_for_the_model(chat_server: ChatServer, tmp_path: Path) -> None:
    chat_server.enqueue(
        completion(None, [tool_call("run_command", {"command": "yes abcdefgh | head -c 5000"})]),
        completion("ok"),
    )
    provider = make_provider(chat_server)

    async def body(sandbox: LocalSandbox) -> Trajectory:
        try:
            return await run_agent(provider, sandbox, stimulus(), config={"tool_output_limit": 300})
        finally:
            await provider.aclose()

    traj = in_trial(tmp_path, body)
    sent = chat_server.requests[1].messages[-1]["content"]
    assert len(sent) < 400 and "more characters cut" in sent
    assert next(e.data for e in traj.events if e.type == "tool_result").result == sent
