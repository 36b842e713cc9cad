"""Model prices: the built-in list-price table and the lookup that turns tokens into money.

Prices are US dollars per million tokens. The built-in table holds the providers' published
list prices as of :data:`PRICES_AS_OF` (sources: :data:`PRICE_SOURCES`); ``.vally.yaml``
``prices:`` adds models or overrides entries, keyed the same way::

    prices:
      my-finetune: {input: 3.0, output: 15.0, cache_read: 0.3}

A model name is looked up as written, then without a provider prefix (``openai/gpt-4o`` ->
``gpt-4o``), then by the longest table key it starts with (``claude-sonnet-4-20250514`` ->
``claude-sonnet-4``). A model found nowhere has no price: its cost is unknown (``null``),
never zero.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import Field

from vally.models.base import SpecModel

PRICES_AS_OF = "2025-08-01"
"""The date of the built-in list prices."""

PRICE_SOURCES = ("https://www.anthropic.com/pricing", "https://openai.com/api/pricing/")
"""Where the built-in list prices were read."""


class ModelPrice(SpecModel):
    """The price of one model, in US dollars per million tokens.

    Attributes:
        input: Price of a million prompt tokens.
        output: Price of a million completion tokens.
        cache_read: Price of a million prompt tokens served from the provider's cache
            (default: the ``input`` price).
    """

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cache_read: float | None = Field(default=None, ge=0)

    def cost(self, input_tokens: int, output_tokens: int, cache_read_tokens: int = 0) -> float:
        """The cost in US dollars; ``cache_read_tokens`` are part of ``input_tokens``."""
        cached = min(max(cache_read_tokens, 0), input_tokens)
        cache_rate = self.input if self.cache_read is None else self.cache_read
        dollars = (input_tokens - cached) * self.input + cached * cache_rate
        return (dollars + output_tokens * self.output) / 1_000_000


def _price(input: float, output: float, cache_read: float) -> ModelPrice:
    return ModelPrice(input=input, output=output, cache_read=cache_read)


BUILTIN_PRICES: dict[str, ModelPrice] = {
    "claude-opus-4": _price(15.0, 75.0, 1.5),
    "claude-opus-4-1": _price(15.0, 75.0, 1.5),
    "claude-sonnet-4": _price(3.0, 15.0, 0.3),
    "claude-3-7-sonnet": _price(3.0, 15.0, 0.3),
    "claude-3-5-sonnet": _price(3.0, 15.0, 0.3),
    "claude-3-5-haiku": _price(0.8, 4.0, 0.08),
    "claude-3-haiku": _price(0.25, 1.25, 0.03),
    "gpt-5": _price(1.25, 10.0, 0.125),
    "gpt-5-mini": _price(0.25, 2.0, 0.025),
    "gpt-5-nano": _price(0.05, 0.4, 0.005),
    "gpt-4.1": _price(2.0, 8.0, 0.5),
    "gpt-4.1-mini": _price(0.4, 1.6, 0.1),
    "gpt-4.1-nano": _price(0.1, 0.4, 0.025),
    "gpt-4o": _price(2.5, 10.0, 1.25),
    "gpt-4o-mini": _price(0.15, 0.6, 0.075),
    "o3": _price(2.0, 8.0, 0.5),
    "o3-mini": _price(1.1, 4.4, 0.55),
    "o4-mini": _price(1.1, 4.4, 0.275),
}
"""List prices (USD per million tokens) as of :data:`PRICES_AS_OF`."""


class PriceTable:
    """Looks up a model's price: the project's ``prices:`` first, then the built-in table.

    Args:
        overrides: The project's prices by model name (they win over built-in entries).
        builtin: The built-in table (default :data:`BUILTIN_PRICES`).
    """

    def __init__(
        self,
        overrides: Mapping[str, ModelPrice] | None = None,
        builtin: Mapping[str, ModelPrice] | None = None,
    ) -> None:
        self.prices = {**(BUILTIN_PRICES if builtin is None else builtin), **(overrides or {})}

    def get(self, model: str | None) -> ModelPrice | None:
        """The price of ``model``, or None when no entry matches it."""
        if not model:
            return None
        for name in dict.fromkeys((model, model.rsplit("/", 1)[-1])):
            if name in self.prices:
                return self.prices[name]
            matches = [key for key in self.prices if name.startswith(key + "-")]
            if matches:
                return self.prices[max(matches, key=len)]
        return None
