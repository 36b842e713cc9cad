from __future__ import annotations

import asyncio
import email.utils
import importlib.metadata
import time

import pytest
from pydantic import ValidationError

from tests.llm.chat_server import ChatServer, Reply, completion, error, tool_call
from tests.llm.support import TEST_KEY, make_provider, run
from vally.contracts.llm import ChatMessage, ChatRequest, ToolCall, ToolSpec
from vally.engine.trials.llm_config import provider_config_from_settings
from vally.errors import LLMError
from vally.models.project import LLMSettings, ProjectConfig
from vally.plugins.registry import Registry
from vally_builtin.llm import openai as openai_mod
from vally_builtin.llm.openai import OpenAIProvider, parse_retry_after


def _request(model: str = "test-model", **kw: object) -> ChatRequest:
    return ChatRequest(model=model, messages=[ChatMessage(role="user", content="hi")], **kw)  # type: ignore[arg-type]


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Record backoff delays instead of waiting them out."""
    recorded: list[float] = []

    async def fake_sleep(delay: float) -> None:
        recorded.append(delay)

    monkeypatch.setattr(openai_mod, "_sleep", fake_sleep)
    return recorded


# --------------------------------------------------------------------------- plugin wiring


def test_entry_point_resolves_to_the_provider() -> None:
    eps = importlib.metadata.entry_points(group="vally.llm_providers")
    assert {ep.name: ep.value for ep in eps}["openai"] == "vally_builtin.llm.openai:OpenAIProvider"
    registration = Registry("llm_provider").get("openai")
    assert registration.cls is OpenAIProvider


def test_project_settings_become_a_valid_config() -> None:
    project = ProjectConfig.model_validate(
        {
            "llm": {
                "base_url": "http://127.0.0.1:9/v1",
                "api_key_env": "MY_KEY",
                "timeout": "90s",
                "max_retries": 7,
                "max_concurrency": 3,
                "headers": {"X-Team": "evals"},
            }
        }
    )
    data = provider_config_from_settings(project.llm)
    assert "provider" not in data
    config = OpenAIProvider.Config.model_validate(data)
    assert config.base_url == "http://127.0.0.1:9/v1"
    assert config.api_key_env == "MY_KEY"
    assert config.timeout == 90.0
    assert (config.max_retries, config.max_concurrency) == (7, 3)
    assert config.headers == {"X-Team": "evals"}
    # unset values fall back to the provider's defaults
    defaults = OpenAIProvider.Config.model_validate(provider_config_from_settings(LLMSettings()))
    assert defaults.base_url is None and defaults.timeout == 120.0


def test_plain_settings_dump_is_accepted_too() -> None:
    """``settings.model_dump(exclude={"provider"})`` works as well (durations as strings)."""
    for settings, timeout in ((LLMSettings(), 120.0), (LLMSettings(timeout="90s"), 90.0)):
        dumped = settings.model_dump(exclude={"provider"})
        assert OpenAIProvider.Config.model_validate(dumped).timeout == timeout


def test_config_is_strict_and_reads_durations() -> None:
    assert OpenAIProvider.Config.model_validate({"timeout": "2m"}).timeout == 120.0
    with pytest.raises(ValidationError, match="unit suffix"):
        OpenAIProvider.Config.model_validate({"backoff_base": "5"})
    with pytest.raises(ValidationError, match="Extra inputs"):
        OpenAIProvider.Config.model_validate({"base_ur": "x"})


# --------------------------------------------------------------------------- happy path


def test_request_body_and_response_parsing(chat_server: ChatServer) -> None:
    chat_server.enqueue(
        completion(
            "thinking aloud",
            [tool_call("read_file", {"path": "a.txt"}, "call_1")],
            model="served-model",
            prompt_tokens=120,
            completion_tokens=7,
            cached_tokens=100,
        )
    )
    provider = make_provider(chat_server, headers={"X-Extra": "yes"})

    async def go() -> object:
        try:
            return await provider.chat(
                ChatRequest(
                    model="test-model",
                    messages=[
                        ChatMessage(role="system", content="sys"),
                        ChatMessage(role="user", content="do it"),
                        ChatMessage(
                            role="assistant",
                            content=None,
                            tool_calls=(ToolCall("c0", "list_files", '{"path": "."}'),),
                        ),
                        ChatMessage(role="tool", content="a.txt", tool_call_id="c0"),
                    ],
                    tools=[ToolSpec("read_file", "Read a file", {"type": "object"})],
                    reasoning_effort="high",
                    response_format={"type": "json_object"},
                    temperature=0.2,
                    max_tokens=64,
                )
            )
        finally:
            await provider.aclose()

    response = run(go())
    [received] = chat_server.requests
    body = received.body
    assert received.path == "/v1/chat/completions"
    assert received.headers["x-extra"] == "yes"
    assert "authorization" not in received.headers  # no key configured
    assert body["model"] == "test-model"
    assert body["reasoning_effort"] == "high"
    assert body["response_format"] == {"type": "json_object"}
    assert body["temperature"] == 0.2 and body["max_tokens"] == 64
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "read_file",
                "description": "Read a file",
                "parameters": {"type": "object"},
            },
        }
    ]
    assert body["messages"][2] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "c0",
                "type": "function",
                "function": {"name": "list_files", "arguments": '{"path": "."}'},
            }
        ],
    }
    assert body["messages"][3] == {"role": "tool", "content": "a.txt", "tool_call_id": "c0"}
    assert response.message.content == "thinking aloud"  # type: ignore[attr-defined]
    assert response.message.tool_calls == (  # type: ignore[attr-defined]
        ToolCall("call_1", "read_file", '{"path": "a.txt"}'),
    )
    assert response.finish_reason == "tool_calls"  # type: ignore[attr-defined]
    assert (response.input_tokens, response.output_tokens, response.cache_read_tokens) == (  # type: ignore[attr-defined]
        120,
        7,
        100,
    )
    assert response.model == "served-model"  # type: ignore[attr-defined]


def test_base_url_and_key_from_environment(
    chat_server: ChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", chat_server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    chat_server.enqueue(completion("ok"))
    provider = OpenAIProvider()  # nothing configured: everything from the environment

    async def go() -> str | None:
        try:
            return (await provider.chat(_request())).message.content
        finally:
            await provider.aclose()

    assert run(go()) == "ok"
    assert chat_server.requests[0].headers["authorization"] == f"Bearer {TEST_KEY}"


def test_custom_key_variable(chat_server: ChatServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_LLM_KEY", "other-key-123")
    chat_server.enqueue(completion("ok"))
    provider = make_provider(chat_server, api_key_env="MY_LLM_KEY")

    async def go() -> None:
        try:
            await provider.chat(_request())
        finally:
            await provider.aclose()

    run(go())
    assert chat_server.requests[0].headers["authorization"] == "Bearer other-key-123"


# --------------------------------------------------------------------------- failures


def test_429_with_retry_after_then_success(chat_server: ChatServer, sleeps: list[float]) -> None:
    chat_server.enqueue(
        error(429, "slow down", headers={"Retry-After": "7"}),
        completion("finally"),
    )
    provider = make_provider(chat_server)

    async def go() -> str | None:
        try:
            return (await provider.chat(_request())).message.content
        finally:
            await provider.aclose()

    assert run(go()) == "finally"
    assert len(chat_server.requests) == 2
    assert sleeps == [7.0]  # the server's Retry-After, not the millisecond backoff


def test_retry_after_as_http_date(chat_server: ChatServer, sleeps: list[float]) -> None:
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    chat_server.enqueue(error(503, "overloaded", headers={"Retry-After": when}), completion("ok"))
    provider = make_provider(chat_server)

    async def go() -> None:
        try:
            await provider.chat(_request())
        finally:
            await provider.aclose()

    run(go())
    assert len(sleeps) == 1 and 25 <= sleeps[0] <= 30


def test_parse_retry_after_forms() -> None:
    now = 1_700_000_000.0
    date = email.utils.formatdate(now + 12, usegmt=True)
    assert parse_retry_after({"Retry-After": "3"}, now=now) == 3.0
    assert parse_retry_after({"retry-after": date}, now=now) == pytest.approx(12.0)
    assert parse_retry_after({"Retry-After": email.utils.formatdate(now - 50)}, now=now) == 0.0
    assert parse_retry_after({"retry-after-ms": "250", "Retry-After": "9"}, now=now) == 0.25
    assert parse_retry_after({"Retry-After": "soon"}, now=now) is None
    assert parse_retry_after({}, now=now) is None


def test_backoff_grows_exponentially_with_jitter(
    chat_server: ChatServer, sleeps: list[float]
) -> None:
    chat_server.default = error(502, "bad gateway")
    provider = make_provider(chat_server, max_retries=4, backoff_base=1.0, backoff_max=5.0)

    async def go() -> LLMError:
        try:
            with pytest.raises(LLMError) as info:
                await provider.chat(_request())
            return info.value
        finally:
            await provider.aclose()

    exc = run(go())
    assert exc.retryable and exc.error_class == "server" and exc.status == 502
    assert len(chat_server.requests) == 5
    ceilings = [1.0, 2.0, 4.0, 5.0]  # doubles, capped by backoff_max
    assert len(sleeps) == 4
    for delay, ceiling in zip(sleeps, ceilings, strict=True):
        assert ceiling / 2 <= delay <= ceiling


def test_500_storm_exhausts_retries(chat_server: ChatServer) -> None:
    chat_server.default = error(500, "internal meltdown")
    provider = make_provider(chat_server, max_retries=3)

    async def go() -> LLMError:
        try:
            with pytest.raises(LLMError) as info:
                await provider.chat(_request("storm-model"))
            return info.value
        finally:
            await provider.aclose()

    exc = run(go())
    assert len(chat_server.requests) == 4  # first attempt + 3 retries
    assert exc.retryable is True and exc.error_class == "server"
    assert "storm-model" in exc.message and "500" in exc.message
    assert "internal meltdown" in exc.message and "4 attempts" in exc.message


@pytest.mark.parametrize(
    ("status", "error_class"),
    [(400, "bad_request"), (401, "auth"), (403, "auth"), (404, "model_unavailable")],
)
def test_client_errors_are_terminal(
    chat_server: ChatServer, monkeypatch: pytest.MonkeyPatch, status: int, error_class: str
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    # servers sometimes echo the key back; it must never reach the message
    chat_server.default = error(status, f"Incorrect API key provided: {TEST_KEY}. Go away.")
    provider = make_provider(chat_server, max_retries=3)

    async def go() -> LLMError:
        try:
            with pytest.raises(LLMError) as info:
                await provider.chat(_request("gpt-test"))
            return info.value
        finally:
            await provider.aclose()

    exc = run(go())
    assert len(chat_server.requests) == 1  # no retry
    assert exc.retryable is False and exc.error_class == error_class and exc.status == status
    assert "'gpt-test'" in exc.message and f"HTTP {status}" in exc.message
    assert "Incorrect API key provided" in exc.message
    assert TEST_KEY not in str(exc) and TEST_KEY not in exc.message
    assert chat_server.requests[0].headers["authorization"] == f"Bearer {TEST_KEY}"


@pytest.mark.parametrize(
    "reply",
    [
        Reply(status=200, body="<html>not json</html>"),
        Reply(status=200, body={"id": "x", "choices": []}),
        Reply(status=200, body={"choices": [{"message": "text"}]}),
        Reply(status=200, body={"choices": [{"message": {"tool_calls": [{"function": {}}]}}]}),
    ],
)
def test_malformed_responses_are_terminal(chat_server: ChatServer, reply: Reply) -> None:
    chat_server.default = reply
    provider = make_provider(chat_server, max_retries=3)

    async def go() -> LLMError:
        try:
            with pytest.raises(LLMError) as info:
                await provider.chat(_request())
            return info.value
        finally:
            await provider.aclose()

    exc = run(go())
    assert len(chat_server.requests) == 1
    assert exc.retryable is False and exc.error_class == "malformed"
    assert "test-model" in exc.message and "malformed" in exc.message


def test_timeout_is_retryable_then_raised(chat_server: ChatServer) -> None:
    chat_server.default = Reply(body={"never": "read"}, delay=2.0)
    provider = make_provider(chat_server, max_retries=1, timeout=0.1)

    async def go() -> LLMError:
        try:
            with pytest.raises(LLMError) as info:
                await provider.chat(_request())
            return info.value
        finally:
            await provider.aclose()

    exc = run(go())
    assert exc.retryable is True and exc.error_class == "timeout"
    assert len(chat_server.requests) == 2
    assert "0.1s" in exc.message


def test_request_timeout_overrides_default(chat_server: ChatServer) -> None:
    chat_server.enqueue(Reply(body={}, delay=2.0))
    provider = make_provider(chat_server, max_retries=0, timeout=30.0)

    async def go() -> LLMError:
        try:
            with pytest.raises(LLMError) as info:
                await provider.chat(_request(timeout=0.05))
            return info.value
        finally:
            await provider.aclose()

    start = time.monotonic()
    exc = run(go())
    assert exc.error_class == "timeout"
    assert time.monotonic() - start < 1.5


def test_connection_refused_is_retryable() -> None:
    import socket

    with socket.socket() as sock:  # find a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    provider = OpenAIProvider(
        OpenAIProvider.Config(
            base_url=f"http://127.0.0.1:{port}/v1", max_retries=2, backoff_base=0.001
        )
    )

    async def go() -> LLMError:
        try:
            with pytest.raises(LLMError) as info:
                await provider.chat(_request())
            return info.value
        finally:
            await provider.aclose()

    exc = run(go())
    assert exc.retryable is True and exc.error_class == "connection"
    assert "3 attempts" in exc.message and f"127.0.0.1:{port}" in exc.message


# --------------------------------------------------------------------------- concurrency


def test_concurrency_cap_and_shared_pool(chat_server: ChatServer) -> None:
    cap, total = 3, 12
    chat_server.default = completion("ok")
    chat_server.gate = cap  # hold each request until `cap` are in flight ...
    chat_server.gate_timeout = 2.0
    chat_server.hold = 0.05  # ... and a little longer, so extra ones would be seen
    provider = make_provider(chat_server, max_concurrency=cap)

    async def go() -> list[str | None]:
        try:
            results = await asyncio.gather(*(provider.chat(_request()) for _ in range(total)))
            return [r.message.content for r in results]
        finally:
            await provider.aclose()

    assert run(go()) == ["ok"] * total
    assert len(chat_server.requests) == total
    assert chat_server.max_in_flight == cap
    assert len(chat_server.connections) <= cap  # one pool, reused connections


def test_without_cap_requests_overlap(chat_server: ChatServer) -> None:
    """The gate really detects overlap: a larger cap lets more requests in at once."""
    chat_server.default = completion("ok")
    chat_server.gate = 6
    chat_server.gate_timeout = 2.0
    provider = make_provider(chat_server, max_concurrency=6)

    async def go() -> None:
        try:
            await asyncio.gather(*(provider.chat(_request()) for _ in range(6)))
        finally:
            await provider.aclose()

    run(go())
    assert chat_server.max_in_flight == 6


@pytest.mark.parametrize("count", ["NaN", "Infinity", "-1", "1e400"])
def test_usage_that_is_not_a_count_reads_as_unknown(chat_server: ChatServer, count: str) -> None:
    # Sent as raw JSON text: Python's json module reads NaN and Infinity (issue 17, case 13).
    body = (
        '{"model": "m", "choices": [{"message": {"role": "assistant", "content": "ok"}, '
        f'"finish_reason": "stop"}}], "usage": {{"prompt_tokens": {count}, '
        f'"completion_tokens": {count}}}}}'
    )
    chat_server.enqueue(Reply(body=body, headers={"Content-Type": "application/json"}))
    provider = make_provider(chat_server)

    async def go() -> object:
        try:
            return await provider.chat(
                ChatRequest(model="m", messages=[ChatMessage(role="user", content="hi")])
            )
        finally:
            await provider.aclose()

    response = run(go())
    assert response.message.content == "ok"  # type: ignore[attr-defined]
    assert response.input_tokens == 0 and response.output_tokens == 0  # type: ignore[attr-defined]


def test_an_error_body_nested_too_deep_is_shown_as_its_text() -> None:
    import httpx

    deep = "[" * 100_000 + "]" * 100_000
    response = httpx.Response(500, text=deep)
    assert openai_mod._server_error_text(response).startswith("[[[")  # not a RecursionError
    shaped = httpx.Response(400, json={"error": {"message": "bad model"}})
    assert "bad model" in openai_mod._server_error_text(shaped)
