"""The ``openai`` LLM provider: any server speaking the OpenAI Chat Completions protocol.

Works with OpenAI itself and with OpenAI-compatible servers (vLLM, Ollama, LM Studio,
llama.cpp, LiteLLM, ...). Settings come from ``.vally.yaml`` ``llm:`` (see
:func:`vally.engine.trials.llm_config.provider_config_from_settings`) or the environment:

* base URL: ``base_url``, else ``OPENAI_BASE_URL``, else ``https://api.openai.com/v1``;
* API key: the variable named by ``api_key_env`` (default ``OPENAI_API_KEY``); without one no
  ``Authorization`` header is sent (local servers rarely need it).

One provider instance holds one ``httpx.AsyncClient`` (one connection pool, at most
``max_concurrency`` connections) and an ``asyncio.Semaphore`` capping requests in flight, so
hundreds of concurrent trials share a handful of connections.

Failures are classified (:class:`vally.errors.LLMError`): connection errors, timeouts, HTTP
408, 429 and 5xx are retryable and retried with exponential backoff and jitter, honouring
``Retry-After`` / ``retry-after-ms``, for at most ``max_retries`` retries after the first
attempt; other statuses and malformed responses are terminal. Messages name the model, the
status and the server's error text, never the API key.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import math
import os
import random
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field, ValidationInfo, field_validator

from vally import (
    ChatMessage,
    ChatRequest,
    ChatResponse,
    LLMError,
    PluginMetadata,
    StrictConfig,
    ToolCall,
    loads_bounded,
    parse_duration,
)

if TYPE_CHECKING:
    import httpx

logger = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_TIMEOUT = 120.0
"""Seconds per attempt when neither the config nor the request sets a timeout."""
BASE_URL_ENV = "OPENAI_BASE_URL"
_ERROR_TEXT_LIMIT = 600

_sleep = asyncio.sleep
"""The sleep used between attempts (a module attribute so tests can record delays)."""


def _seconds(value: Any) -> Any:
    """Accept seconds as a number or a duration string with a unit (``30s``, ``2m``)."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return parse_duration(value)
        except Exception as exc:
            raise ValueError(getattr(exc, "message", str(exc))) from None
    return value


def parse_retry_after(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds to wait according to a response's headers, or None when they do not say.

    Reads ``retry-after-ms`` (milliseconds, sent by OpenAI) first, then ``Retry-After`` as
    a number of seconds or as an HTTP date. Negative values and dates in the past count as
    zero; unreadable values are ignored.
    """
    lowered = {k.lower(): v for k, v in headers.items()}
    millis = lowered.get("retry-after-ms")
    if millis is not None:
        try:
            value = float(millis) / 1000.0
            if math.isfinite(value):
                return max(0.0, value)
        except ValueError:
            pass
    raw = lowered.get("retry-after")
    if raw is None:
        return None
    raw = raw.strip()
    try:
        value = float(raw)
        return max(0.0, value) if math.isfinite(value) else None
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    current = time.time() if now is None else now
    return max(0.0, when.timestamp() - current)


def _redact(text: str, secret: str | None) -> str:
    if secret and len(secret) >= 4:
        text = text.replace(secret, "[REDACTED]")
    return text


def _server_error_text(response: httpx.Response) -> str:
    """The error text a server sent: ``error.message`` of a JSON body, else the raw body."""
    body = response.text
    try:
        data = loads_bounded(body)
    except ValueError:  # not JSON, or nested too deep
        data = None
    if isinstance(data, dict):
        err = data.get("error")
        if isinstance(err, dict) and err.get("message"):
            text = str(err["message"])
            if err.get("type") or err.get("code"):
                extra = ", ".join(
                    f"{k}={err[k]}" for k in ("type", "code") if err.get(k) is not None
                )
                text = f"{text} ({extra})"
            return text[:_ERROR_TEXT_LIMIT]
        if isinstance(err, str):
            return err[:_ERROR_TEXT_LIMIT]
        if data.get("message"):
            return str(data["message"])[:_ERROR_TEXT_LIMIT]
    text = " ".join(body.split())
    if len(text) > _ERROR_TEXT_LIMIT:
        text = text[:_ERROR_TEXT_LIMIT] + "..."
    return text or "(empty body)"


def _status_class(status: int) -> tuple[bool, str]:
    """(retryable, error_class) for an HTTP error status."""
    if status == 429:
        return True, "rate_limit"
    if status == 408:
        return True, "timeout"
    if status >= 500:
        return True, "server"
    if status in (401, 403):
        return False, "auth"
    if status == 404:
        return False, "model_unavailable"
    return False, "bad_request"


def message_to_wire(message: ChatMessage) -> dict[str, Any]:
    """A :class:`ChatMessage` as a Chat Completions ``messages[]`` item."""
    wire: dict[str, Any] = {"role": message.role}
    if message.role == "assistant" and message.tool_calls:
        wire["content"] = message.content
        wire["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call in message.tool_calls
        ]
    else:
        wire["content"] = message.content if message.content is not None else ""
    if message.tool_call_id is not None:
        wire["tool_call_id"] = message.tool_call_id
    if message.name is not None:
        wire["name"] = message.name
    return wire


class OpenAIProvider:
    """An OpenAI-compatible Chat Completions client with retries and a concurrency cap.

    Build it with a validated :class:`OpenAIProvider.Config`; the HTTP client is created on
    the first call (inside the running event loop) and released by :meth:`aclose`.
    """

    metadata: ClassVar[PluginMetadata] = PluginMetadata(
        name="openai",
        kind="llm_provider",
        description="Any OpenAI-compatible Chat Completions server (OpenAI, vLLM, Ollama, ...)",
    )

    class Config(StrictConfig):
        """Connection settings; the first seven mirror ``.vally.yaml`` ``llm:``.

        Attributes:
            base_url: Server root including the version path (``http://host:8000/v1``).
                None: ``OPENAI_BASE_URL``, else the OpenAI API.
            api_key_env: Name of the environment variable holding the API key.
            timeout: Default seconds per attempt (a number, or a duration like ``2m``;
                None means the default, 120 seconds).
            max_retries: Retries after the first attempt for retryable failures.
            max_concurrency: Requests in flight at once, and size of the connection pool.
            headers: Extra HTTP headers sent with every request.
            backoff_base: Delay in seconds before the first retry; doubles every retry.
            backoff_max: Upper bound in seconds of one backoff delay.
            retry_after_max: Upper bound in seconds of a server-requested ``Retry-After``.
            max_tokens_field: Body field carrying ``ChatRequest.max_tokens``
                (``max_completion_tokens`` for OpenAI reasoning models).
            trust_env: Honour ``HTTPS_PROXY`` / ``NO_PROXY`` / ``SSL_CERT_FILE`` from the
                environment, as other HTTP clients do.
        """

        base_url: str | None = None
        api_key_env: str = "OPENAI_API_KEY"
        timeout: float = Field(default=DEFAULT_TIMEOUT, gt=0)
        max_retries: int = Field(default=4, ge=0)
        max_concurrency: int = Field(default=16, ge=1)
        headers: dict[str, str] = Field(default_factory=dict)
        backoff_base: float = Field(default=1.0, ge=0)
        backoff_max: float = Field(default=30.0, ge=0)
        retry_after_max: float = Field(default=120.0, ge=0)
        max_tokens_field: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"
        trust_env: bool = True

        @field_validator("timeout", "backoff_base", "backoff_max", "retry_after_max", mode="before")
        @classmethod
        def _durations(cls, value: Any, info: ValidationInfo) -> Any:
            if value is None and info.field_name == "timeout":
                return DEFAULT_TIMEOUT  # None means the default
            return _seconds(value)

    def __init__(self, config: OpenAIProvider.Config | None = None) -> None:
        self.config = config if config is not None else self.Config()
        self._client: httpx.AsyncClient | None = None
        self._semaphore: asyncio.Semaphore | None = None
        self._api_key: str | None = None

    # ------------------------------------------------------------------ settings

    @property
    def base_url(self) -> str:
        """The resolved server root (config, then ``OPENAI_BASE_URL``, then OpenAI)."""
        url = self.config.base_url or os.environ.get(BASE_URL_ENV) or DEFAULT_BASE_URL
        return url.rstrip("/")

    def _key(self) -> str | None:
        value = os.environ.get(self.config.api_key_env)
        return value.strip() if value and value.strip() else None

    def _ensure_client(self) -> httpx.AsyncClient:
        if self._client is None:
            import httpx

            self._api_key = self._key()
            headers = {"Content-Type": "application/json", "Accept": "application/json"}
            headers.update(self.config.headers)
            if self._api_key:
                headers["Authorization"] = f"Bearer {self._api_key}"
            cap = self.config.max_concurrency
            self._client = httpx.AsyncClient(
                base_url=self.base_url,
                headers=headers,
                limits=httpx.Limits(max_connections=cap, max_keepalive_connections=cap),
                timeout=httpx.Timeout(self.config.timeout),
                trust_env=self.config.trust_env,
            )
            self._semaphore = asyncio.Semaphore(cap)
        return self._client

    # ------------------------------------------------------------------ requests

    def build_body(self, request: ChatRequest) -> dict[str, Any]:
        """The JSON body of a Chat Completions request."""
        body: dict[str, Any] = {
            "model": request.model,
            "messages": [message_to_wire(m) for m in request.messages],
        }
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": dict(tool.parameters),
                    },
                }
                for tool in request.tools
            ]
        if request.reasoning_effort:
            body["reasoning_effort"] = request.reasoning_effort
        if request.response_format is not None:
            body["response_format"] = dict(request.response_format)
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.max_tokens is not None:
            body[self.config.max_tokens_field] = request.max_tokens
        return body

    async def chat(self, request: ChatRequest) -> ChatResponse:
        """Send one Chat Completions request, retrying retryable failures.

        Raises:
            LLMError: The last failure when retries are exhausted (``retryable=True``), or
                the first terminal failure (``retryable=False``).
        """
        if not request.model:
            raise LLMError(
                "no model given for the LLM call; set the eval's 'model' or pass --model",
                retryable=False,
                error_class="bad_request",
            )
        client = self._ensure_client()
        body = self.build_body(request)
        attempts = self.config.max_retries + 1
        for attempt in range(1, attempts + 1):
            try:
                return await self._attempt(client, request, body)
            except LLMError as exc:
                if not exc.retryable or attempt >= attempts:
                    if exc.retryable and attempts > 1:
                        exc.message = f"{exc.message} (gave up after {attempts} attempts)"
                        exc.args = (exc.render(),)
                    raise
                delay = self._delay(attempt, exc.retry_after)
                logger.warning(
                    "model %r: %s; retrying in %.2fs (attempt %d of %d)",
                    request.model,
                    exc.error_class,
                    delay,
                    attempt + 1,
                    attempts,
                )
                await _sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        """Seconds before attempt ``attempt + 1``: ``Retry-After`` when the server sent one,
        else exponential backoff with equal jitter (half fixed, half random)."""
        if retry_after is not None:
            return min(retry_after, self.config.retry_after_max)
        ceiling = min(self.config.backoff_max, self.config.backoff_base * 2.0 ** (attempt - 1))
        return ceiling / 2 + random.uniform(0, ceiling / 2)

    async def _attempt(
        self, client: httpx.AsyncClient, request: ChatRequest, body: dict[str, Any]
    ) -> ChatResponse:
        import httpx

        assert self._semaphore is not None
        timeout = request.timeout if request.timeout is not None else self.config.timeout
        model = request.model
        where = f"{self.base_url}/chat/completions"
        async with self._semaphore:
            try:
                async with asyncio.timeout(timeout):
                    response = await client.post(
                        "/chat/completions",
                        json=body,
                        timeout=httpx.Timeout(timeout),
                    )
            except (TimeoutError, httpx.TimeoutException):
                raise LLMError(
                    f"model {model!r}: no answer from {where} within {timeout}s",
                    retryable=True,
                    error_class="timeout",
                    model=model,
                ) from None
            except httpx.TransportError as exc:
                detail = _redact(str(exc) or type(exc).__name__, self._api_key)
                raise LLMError(
                    f"model {model!r}: cannot reach {where}: {detail}",
                    retryable=True,
                    error_class="connection",
                    model=model,
                ) from None
        if response.status_code >= 400:
            retryable, error_class = _status_class(response.status_code)
            text = _redact(_server_error_text(response), self._api_key)
            hint = ""
            if error_class == "auth":
                hint = f"; check the API key in ${self.config.api_key_env}"
            elif error_class == "model_unavailable":
                hint = "; check the model name and the base URL"
            raise LLMError(
                f"model {model!r}: HTTP {response.status_code} from {where}: {text}{hint}",
                retryable=retryable,
                error_class=error_class,
                status=response.status_code,
                model=model,
                retry_after=parse_retry_after(response.headers) if retryable else None,
            )
        return self._parse(response, model, where)

    def _parse(self, response: httpx.Response, model: str, where: str) -> ChatResponse:
        def malformed(why: str) -> LLMError:
            return LLMError(
                f"model {model!r}: malformed response from {where} "
                f"(HTTP {response.status_code}): {why}",
                retryable=False,
                error_class="malformed",
                status=response.status_code,
                model=model,
            )

        try:
            data = response.json()
        except ValueError:
            snippet = " ".join(response.text.split())[:200]
            raise malformed(f"body is not JSON: {snippet!r}") from None
        if not isinstance(data, dict):
            raise malformed("body is not a JSON object")
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise malformed("no 'choices' in the body")
        message = choices[0].get("message")
        if not isinstance(message, dict):
            raise malformed("choices[0] has no 'message' object")
        content = message.get("content")
        if content is not None and not isinstance(content, str):
            if isinstance(content, list):  # content parts
                content = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
            else:
                raise malformed("message.content is neither text nor null")
        calls: list[ToolCall] = []
        raw_calls = message.get("tool_calls") or []
        if not isinstance(raw_calls, list):
            raise malformed("message.tool_calls is not a list")
        for index, raw in enumerate(raw_calls):
            function = raw.get("function") if isinstance(raw, dict) else None
            if not isinstance(function, dict) or not isinstance(function.get("name"), str):
                raise malformed(f"tool_calls[{index}] has no function name")
            arguments = function.get("arguments")
            if arguments is None:
                arguments = ""
            elif not isinstance(arguments, str):
                arguments = json.dumps(arguments)  # some servers send an object
            call_id = raw.get("id") or f"call_{index}"
            calls.append(ToolCall(id=str(call_id), name=function["name"], arguments=arguments))
        raw_usage = data.get("usage")
        usage: dict[str, Any] = raw_usage if isinstance(raw_usage, dict) else {}
        details = usage.get("prompt_tokens_details")
        cached = details.get("cached_tokens") if isinstance(details, dict) else None

        def count(value: Any) -> int:
            # A count that is not a finite number >= 0 (NaN, Infinity, -1) is unknown: 0.
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                return 0
            return int(value) if math.isfinite(value) and value >= 0 else 0

        return ChatResponse(
            message=ChatMessage(role="assistant", content=content, tool_calls=tuple(calls)),
            finish_reason=choices[0].get("finish_reason"),
            input_tokens=count(usage.get("prompt_tokens")),
            output_tokens=count(usage.get("completion_tokens")),
            cache_read_tokens=count(cached),
            model=data.get("model") if isinstance(data.get("model"), str) else model,
        )

    async def aclose(self) -> None:
        """Close the connection pool. Best effort; the provider can be used again after."""
        client, self._client = self._client, None
        self._semaphore = None
        if client is not None:
            try:
                await client.aclose()
            except Exception:  # pragma: no cover - best effort
                logger.debug("closing the LLM client failed", exc_info=True)
