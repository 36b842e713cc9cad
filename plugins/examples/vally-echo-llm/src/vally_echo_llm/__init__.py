"""An example third-party vally LLM provider: an offline stand-in that answers every
request with the last user message.

Replace :meth:`EchoLLMProvider.chat` with a call to your model's API; raise
``vally.LLMError`` with ``retryable=True`` for timeouts, 429 and 5xx (and an
``error_class`` such as ``timeout``).
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from vally import ChatMessage, ChatRequest, ChatResponse, PluginMetadata, StrictConfig

__all__ = ["EchoConfig", "EchoLLMProvider"]


class EchoConfig(StrictConfig):
    """Options of the ``echo`` provider (``.vally.yaml`` ``llm:``)."""

    prefix: str = Field(default="Echo: ", description="Text put before the echoed message.")


class EchoLLMProvider:
    """Answers every request with the last user message, prefixed."""

    metadata: ClassVar[PluginMetadata] = PluginMetadata(
        name="echo",
        kind="llm_provider",
        description="An offline provider that echoes the last user message.",
    )
    Config: ClassVar[type[EchoConfig]] = EchoConfig

    def __init__(self, config: EchoConfig | None = None) -> None:
        self.config = config if config is not None else EchoConfig()

    async def chat(self, request: ChatRequest) -> ChatResponse:
        """Answer with the last user message; token counts are words."""
        last = next((m.content for m in reversed(request.messages) if m.role == "user"), "")
        text = self.config.prefix + (last or "")
        return ChatResponse(
            message=ChatMessage(role="assistant", content=text),
            finish_reason="stop",
            input_tokens=sum(len((m.content or "").split()) for m in request.messages),
            output_tokens=len(text.split()),
            model=request.model,
        )

    async def aclose(self) -> None:
        """Nothing to close."""
