"""The LLM provider contract and the values passed across it: chat messages, tool specs and
calls, requests and responses. Judges and LLM executors call a provider; the kernel builds
it from ``.vally.yaml``'s ``llm:`` settings."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Protocol

from pydantic import BaseModel

from vally.contracts.metadata import PluginMetadata


@dataclass(frozen=True)
class ToolSpec:
    """A function tool offered to a model: name, description, JSON Schema of arguments."""

    name: str
    description: str
    parameters: Mapping[str, Any]


@dataclass(frozen=True)
class ToolCall:
    """A tool call the model asked for. ``arguments`` is the raw JSON text."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class ChatMessage:
    """One message of a conversation, in Chat Completions terms."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None


@dataclass(frozen=True)
class ChatRequest:
    """A model call."""

    model: str
    messages: Sequence[ChatMessage]
    tools: Sequence[ToolSpec] = ()
    reasoning_effort: str | None = None
    response_format: Mapping[str, Any] | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    timeout: float | None = None


@dataclass(frozen=True)
class ChatResponse:
    """A model's answer with its usage."""

    message: ChatMessage
    finish_reason: str | None
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    model: str | None = None


class LLMProvider(Protocol):
    """A model client. Failures raise :class:`~vally.errors.LLMError` with ``retryable``
    set for connection errors, timeouts, 429 and 5xx; providers retry those themselves
    within their configured attempts before raising."""

    metadata: ClassVar[PluginMetadata]
    Config: ClassVar[type[BaseModel]]

    async def chat(self, request: ChatRequest) -> ChatResponse:
        """Send one Chat Completions request and return the answer."""

    async def aclose(self) -> None:
        """Close connections. Best effort."""
