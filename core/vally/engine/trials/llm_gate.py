"""An LLM provider whose calls share a cluster-wide concurrency cap.

On a node of a distributed run, each worker process builds its own LLM provider, whose own
``max_concurrency`` caps only that process. :class:`GatedLLM` wraps it so that every
``chat`` call first takes a permit from the run's :class:`~vally.contracts.protocols.LLMGate`
(one for the whole cluster, given by the runner), keeping the project's
``llm.max_concurrency`` for the run as a whole.
"""

from __future__ import annotations

import asyncio
from typing import Any

from vally.contracts.llm import ChatRequest, ChatResponse, LLMProvider
from vally.contracts.protocols import LLMGate


class GatedLLM:
    """``inner`` with each ``chat`` call holding one of ``limit`` permits of ``gate``.

    Args:
        inner: The provider making the calls.
        gate: The run's shared permits.
        limit: The cap (the project's ``llm.max_concurrency``).
    """

    def __init__(self, inner: LLMProvider, gate: LLMGate, limit: int) -> None:
        self.inner = inner
        self.gate = gate
        self.limit = limit
        self.metadata = inner.metadata
        self.Config = inner.Config

    async def chat(self, request: ChatRequest) -> ChatResponse:
        """Send ``request`` through the inner provider once a permit is free."""
        await self.gate.acquire(self.limit)
        try:
            return await self.inner.chat(request)
        finally:
            await asyncio.shield(self.gate.release())

    async def aclose(self) -> None:
        """Close the inner provider."""
        await self.inner.aclose()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
