"""Turning ``.vally.yaml`` ``llm:`` settings into an LLM provider's config.

The kernel never imports a provider: it looks the provider up by name in the
``vally.llm_providers`` group (``settings.provider``, ``openai`` by default) and validates
the dict built here with that provider's ``Config``::

    settings = project.llm
    cls = session.registry("llm_provider").get(settings.provider).cls
    provider = cls(cls.Config.model_validate(provider_config_from_settings(settings)))
    ...
    await provider.aclose()

Every provider's ``Config`` should therefore accept the keys of :class:`LLMSettings` other
than ``provider``: ``base_url``, ``api_key_env``, ``timeout`` (seconds, a float),
``max_retries``, ``max_concurrency`` and ``headers``. Keys whose setting is unset (None) are
left out, so the provider's own defaults apply.
"""

from __future__ import annotations

from typing import Any

from vally.models.project import LLMSettings


def provider_config_from_settings(settings: LLMSettings) -> dict[str, Any]:
    """The config dict for ``settings.provider`` built from project LLM settings.

    ``timeout`` is given in seconds (a float); ``headers`` is copied; unset values are
    omitted.

    Example:
        >>> provider_config_from_settings(LLMSettings(base_url="http://localhost:11434/v1"))
        ... # doctest: +NORMALIZE_WHITESPACE
        {'base_url': 'http://localhost:11434/v1', 'api_key_env': 'OPENAI_API_KEY',
         'max_retries': 4, 'max_concurrency': 16, 'headers': {}}
    """
    config: dict[str, Any] = {
        "base_url": settings.base_url,
        "api_key_env": settings.api_key_env,
        "timeout": settings.timeout,
        "max_retries": settings.max_retries,
        "max_concurrency": settings.max_concurrency,
        "headers": dict(settings.headers),
    }
    return {key: value for key, value in config.items() if value is not None}
