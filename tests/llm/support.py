"""Helpers shared by the LLM tests: providers pointed at the test server, sandboxes."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from tests.llm.chat_server import ChatServer
from vally.contracts.protocols import TrialContext, TrialKey
from vally.models.spec import EnvironmentConfig
from vally_backends.local import LocalBackend, LocalSandbox
from vally_builtin.llm.openai import OpenAIProvider

T = TypeVar("T")

TEST_KEY = "sk-test-SECRET-0123456789abcdef"


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion in a fresh event loop."""
    return asyncio.run(coro)


def make_provider(server: ChatServer, **overrides: Any) -> OpenAIProvider:
    """A provider pointed at the test server with millisecond backoff."""
    config: dict[str, Any] = {
        "base_url": server.base_url,
        "backoff_base": 0.001,
        "backoff_max": 0.005,
        "timeout": 10.0,
        "max_retries": 2,
    }
    config.update(overrides)
    return OpenAIProvider(OpenAIProvider.Config.model_validate(config))


async def open_sandbox(tmp_path: Path, name: str = "trial") -> LocalSandbox:
    """A real ``local`` backend sandbox for one trial."""
    backend = LocalBackend()
    await backend.start("run-test")
    context = TrialContext(
        key=TrialKey("default", "chat", name, "test-model", 1),
        run_id="run-test",
        environment=EnvironmentConfig(),
        spec_dir=tmp_path,
    )
    return await backend.open(context)
