from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.llm.chat_server import ChatServer


@pytest.fixture
def chat_server() -> Iterator[ChatServer]:
    """A scripted Chat Completions server on 127.0.0.1, stopped after the test."""
    with ChatServer() as server:
        yield server
