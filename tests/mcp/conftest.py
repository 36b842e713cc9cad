from __future__ import annotations

from tests.llm.conftest import _clean_llm_env, chat_server

__all__ = ["_clean_llm_env", "chat_server"]
