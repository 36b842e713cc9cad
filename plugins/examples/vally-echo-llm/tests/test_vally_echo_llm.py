"""Tests of the example LLM provider (public vally API only)."""

from __future__ import annotations

import asyncio

from vally_echo_llm import EchoLLMProvider

from vally import ChatMessage, ChatRequest
from vally.plugins.session import Session


def test_echoes_the_last_user_message() -> None:
    request = ChatRequest(
        model="m",
        messages=[
            ChatMessage(role="system", content="be brief"),
            ChatMessage("user", "hi"),
            ChatMessage("assistant", "hello"),
            ChatMessage("user", "say it again"),
        ],
    )
    response = asyncio.run(EchoLLMProvider().chat(request))
    assert response.message.content == "Echo: say it again"
    assert response.model == "m"
    assert (response.input_tokens, response.output_tokens) == (7, 4)


def test_the_prefix_is_configurable() -> None:
    config = EchoLLMProvider.Config.model_validate({"prefix": "> "})
    request = ChatRequest(model="m", messages=[ChatMessage("user", "hi")])
    response = asyncio.run(EchoLLMProvider(config).chat(request))
    assert response.message.content == "> hi"


def test_installed_entry_point_resolves_to_this_class() -> None:
    name = EchoLLMProvider.metadata.name
    assert Session(environ={}).plugin_class("llm_provider", name) is EchoLLMProvider
