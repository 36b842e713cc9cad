"""Checking the comparison judge before any pair is judged.

``vally compare`` judges every pair through one model. When that model is not configured,
or its server refuses or cannot be reached, every pair would fail the same way, one after
the other. :func:`resolve_judge_model` and :func:`check_judge` turn both cases into one
error raised before the first pair: the first names the flag and the ``.vally.yaml`` key
to set (standalone compare inherits no judge setting from an eval spec), the second sends
one cheap request (a minimal chat with a small ``max_tokens``) and explains what failed,
where and what to do.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from vally import ConfigError, LLMError

if TYPE_CHECKING:
    from vally import LLMProvider, LLMSettings

PREFLIGHT_MAX_TOKENS = 16
"""Tokens the pre-flight request lets the judge answer with."""

PREFLIGHT_PROMPT = "Reply with the single word OK."
"""What the pre-flight request asks."""


def resolve_judge_model(
    flag: str | None, project_model: str | None, *, spec_model: str | None = None
) -> str:
    """The judge model: ``--judge-model``, then ``.vally.yaml`` ``defaults.judge_model``,
    then ``EVAL_JUDGE_MODEL``. Standalone compare never takes the ``--eval-spec`` file's
    ``judge_model`` (``spec_model``, named only in the error).

    Raises:
        ConfigError: None of them is set; the message names where to set one, and says
            that the ``--eval-spec`` file's ``judge_model`` is not inherited when it has one.
    """
    model = flag or project_model or os.environ.get("EVAL_JUDGE_MODEL")
    if model:
        return model
    hint = (
        "pass --judge-model MODEL, set 'defaults: {judge_model: MODEL}' in .vally.yaml "
        "or set EVAL_JUDGE_MODEL"
    )
    if spec_model:
        hint += (
            f" (vally compare does not inherit the --eval-spec file's judge_model "
            f"{spec_model!r}: pass --judge-model {spec_model} to use it)"
        )
    raise ConfigError("no judge model for the comparison", hint=hint)


def _hint(exc: LLMError, url: str, settings: LLMSettings) -> str:
    """What to do about a failed pre-flight request, by the kind of failure."""
    if exc.error_class == "auth":
        return (
            f"check the API key in ${settings.api_key_env} (.vally.yaml llm.api_key_env "
            "names the variable)"
        )
    if exc.error_class == "model_unavailable":
        return f"check that {url} serves the model, or pass another --judge-model"
    if exc.error_class in ("connection", "timeout"):
        return (
            f"check that the server at {url} is running and reachable; set llm.base_url "
            "in .vally.yaml (or OPENAI_BASE_URL) to the judge's server, and llm.timeout "
            "to wait longer"
        )
    return f"check the judge's server at {url} and the .vally.yaml llm: settings"


async def check_judge(
    llm: LLMProvider, model: str, settings: LLMSettings, *, timeout: float | None = None
) -> None:
    """Send one minimal chat request to the judge's provider; return when it answers.

    The provider retries retryable failures itself (``llm.max_retries``); a request that
    the server rejects as malformed is sent once more without ``max_tokens``, which some
    models do not accept.

    Raises:
        LLMError: The request failed; the message names the URL and the model, the hint
            says what to do.
    """
    from vally import ChatMessage, ChatRequest

    messages = (
        ChatMessage(role="system", content="This is a connection check."),
        ChatMessage(role="user", content=PREFLIGHT_PROMPT),
    )
    url = str(getattr(llm, "base_url", None) or settings.base_url or "the judge's provider")
    request = ChatRequest(
        model=model, messages=messages, max_tokens=PREFLIGHT_MAX_TOKENS, timeout=timeout
    )
    try:
        try:
            await llm.chat(request)
        except LLMError as exc:
            if exc.error_class != "bad_request":
                raise
            await llm.chat(ChatRequest(model=model, messages=messages, timeout=timeout))
    except LLMError as exc:
        raise LLMError(
            f"the comparison judge (model {model!r} at {url}) failed a check request "
            f"before any pair was judged: {exc.message}",
            retryable=exc.retryable,
            error_class=exc.error_class,
            status=exc.status,
            model=model,
            hint=_hint(exc, url, settings),
        ) from exc
