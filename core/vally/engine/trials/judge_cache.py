"""The judge cache: LLM-judge answers kept on disk, so judging the same evidence again
costs nothing.

Each judge request is keyed by the sha256 of what decides its answer: the provider's name
and where it is (its endpoint URL), the model, every message (the prompt, and with tool
delivery the evidence each read returned), the tools offered, the reasoning effort, the
response format, the temperature and the token limit, and the digest of the evidence the
judge may read (:func:`judging_evidence`): with tool delivery the first request names only
the task, the rubric and file paths, so a judge that answers without reading must not get
the verdict it gave on other content. Nothing else enters the key: no timestamps, no
temp-folder paths (the judges name evidence by paths relative to their evidence folder),
not the timeout. A hit returns the stored answer exactly as the provider gave it (content,
tool calls, finish reason, token counts), so a cached verdict is byte-identical to the
original one.

Entries are files ``<cache>/judge/<key[:2]>/<key>.json`` written to a temp file and renamed
into place, so processes sharing the folder never read half an entry. An entry is
validated like an answer (:func:`read_entry`): one that is unreadable, of the wrong shape,
too deep, or with token counts that are not whole non-negative numbers is a miss, and the
provider's new answer is written over it. The folder is ``.vally.yaml`` ``paths.cache`` (relative to
the project), else ``$XDG_CACHE_HOME/vally``, else ``~/.cache/vally``.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel

from vally.contracts.llm import ChatMessage, ChatRequest, ChatResponse, LLMProvider, ToolCall
from vally.contracts.metadata import PluginMetadata
from vally.engine.records.run_folder import write_text_atomic
from vally.models.jsontext import JsonTooDeepError, loads_bounded
from vally.models.pricing import PriceTable
from vally.models.project import ProjectConfig
from vally.models.usage import JudgeCacheCounts

CACHE_FORMAT = 2
"""Version of the key and entry format; a change starts a new cache."""

JUDGE_FOLDER = "judge"

_BYPASS: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "vally_judge_cache_bypass", default=False
)


_EVIDENCE: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "vally_judge_cache_evidence", default=None
)

_COUNTS: contextvars.ContextVar[JudgeCacheCounts | None] = contextvars.ContextVar(
    "vally_judge_cache_counts", default=None
)


@contextlib.contextmanager
def counting(counts: JudgeCacheCounts) -> Iterator[JudgeCacheCounts]:
    """Within this block (and the tasks started in it), add the cache's hits and misses to
    ``counts`` too (one trial's grading)."""
    token = _COUNTS.set(counts)
    try:
        yield counts
    finally:
        _COUNTS.reset(token)


@contextlib.contextmanager
def bypass_cache() -> Iterator[None]:
    """Within this block (and the tasks started in it) judge requests go to the provider,
    neither read from nor written to the cache: for measuring the judge's own variance
    (``vally compare --rejudge``)."""
    token = _BYPASS.set(True)
    try:
        yield
    finally:
        _BYPASS.reset(token)


@contextlib.contextmanager
def judging_evidence(digest: str) -> Iterator[None]:
    """Within this block (and the tasks started in it), key judge requests on ``digest`` too:
    a digest of all the evidence the judge may read (every file offered and its content).
    A judge that gets its evidence through tools calls this around its requests."""
    token = _EVIDENCE.set(digest)
    try:
        yield
    finally:
        _EVIDENCE.reset(token)


def cache_root(project: ProjectConfig | None, project_root: Path | None) -> Path:
    """The cache folder: ``paths.cache`` of ``.vally.yaml``, else the user's (XDG)."""
    configured = project.paths.cache if project is not None else None
    if configured:
        path = Path(configured).expanduser()
        return path if path.is_absolute() else (project_root or Path.cwd()) / path
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
    return base / "vally"


def request_key(
    provider: str,
    request: ChatRequest,
    *,
    endpoint: str | None = None,
    evidence: str | None = None,
) -> str:
    """The cache key of ``request`` sent to ``provider`` at ``endpoint`` with the evidence of
    digest ``evidence`` readable (hex sha256)."""
    document = {
        "format": CACHE_FORMAT,
        "provider": provider,
        "endpoint": endpoint,
        "evidence": evidence,
        "model": request.model,
        "messages": [asdict(m) for m in request.messages],
        "tools": [asdict(t) for t in request.tools],
        "reasoningEffort": request.reasoning_effort,
        "responseFormat": request.response_format,
        "temperature": request.temperature,
        "maxTokens": request.max_tokens,
    }
    text = json.dumps(document, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _response_json(response: ChatResponse) -> dict[str, Any]:
    return asdict(response)


ENTRY_BYTES = 16 * 1024 * 1024
"""An entry larger than this is not read (a miss)."""

_MESSAGE_TEXT = ("content", "tool_call_id", "name")


def _text_or_none(value: Any) -> bool:
    return value is None or isinstance(value, str)


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"a token count must be a whole number >= 0, got {value!r}")
    return value


def _tool_call(data: Any) -> ToolCall:
    if not isinstance(data, dict) or set(data) != {"id", "name", "arguments"}:
        raise ValueError("a tool call must have id, name and arguments")
    if not all(isinstance(data[k], str) for k in ("id", "name", "arguments")):
        raise ValueError("a tool call's id, name and arguments must be text")
    return ToolCall(id=data["id"], name=data["name"], arguments=data["arguments"])


def _response_from(data: Any) -> ChatResponse:
    """The answer stored in an entry, validated like a provider's answer.

    Raises:
        ValueError: The entry is not an answer (wrong shape, type or token count).
    """
    message = data.get("message") if isinstance(data, dict) else None
    if not isinstance(message, dict) or message.get("role") not in {
        "system",
        "user",
        "assistant",
        "tool",
    }:
        raise ValueError("the entry holds no message with a known role")
    if not all(_text_or_none(message.get(k)) for k in _MESSAGE_TEXT):
        raise ValueError("a message's content, tool_call_id and name must be text or null")
    calls = message.get("tool_calls", [])
    if not isinstance(calls, list):
        raise ValueError("tool_calls must be a list")
    if not _text_or_none(data.get("finish_reason")) or not _text_or_none(data.get("model")):
        raise ValueError("finish_reason and model must be text or null")
    return ChatResponse(
        message=ChatMessage(
            role=message["role"],
            content=message.get("content"),
            tool_calls=tuple(_tool_call(call) for call in calls),
            tool_call_id=message.get("tool_call_id"),
            name=message.get("name"),
        ),
        finish_reason=data.get("finish_reason"),
        input_tokens=_count(data.get("input_tokens", 0)),
        output_tokens=_count(data.get("output_tokens", 0)),
        cache_read_tokens=_count(data.get("cache_read_tokens", 0)),
        model=data.get("model"),
    )


def read_entry(text: str, key: str) -> ChatResponse | None:
    """The answer of the entry ``text`` stored under ``key``, or None when it is not one:
    not JSON, nested too deep, another key's entry, or an answer of the wrong shape."""
    try:
        data = loads_bounded(text)
        if not isinstance(data, dict) or data.get("key") != key:
            return None
        return _response_from(data.get("response"))
    except (ValueError, TypeError, RecursionError, JsonTooDeepError):
        return None


@dataclass
class JudgeCache:
    """The judge entries under ``root``, with the hits and misses of this process.

    Attributes:
        root: The cache folder (entries go to its ``judge`` folder).
        hits: Requests answered from the cache.
        misses: Requests sent to the provider (and stored).
    """

    root: Path
    hits: int = 0
    misses: int = 0

    @property
    def folder(self) -> Path:
        """Where the judge entries are."""
        return self.root / JUDGE_FOLDER

    def _path(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key}.json"

    def get(self, key: str) -> ChatResponse | None:
        """The stored answer of ``key``, or None (missing, unreadable, too large or not a
        valid answer: see :func:`read_entry`)."""
        path = self._path(key)
        try:
            if path.stat().st_size > ENTRY_BYTES:
                return None
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None
        return read_entry(text, key)

    def put(self, key: str, response: ChatResponse) -> None:
        """Store ``response`` under ``key`` (atomically; a failed write is only a miss
        next time)."""
        entry = {"key": key, "response": _response_json(response)}
        with contextlib.suppress(OSError):
            write_text_atomic(self._path(key), json.dumps(entry, ensure_ascii=False))

    def summary(self) -> str:
        """``judge cache: 3 hits, 1 miss (<folder>)``."""
        misses = f"{self.misses} miss{'' if self.misses == 1 else 'es'}"
        hits = f"{self.hits} hit{'' if self.hits == 1 else 's'}"
        return f"judge cache: {hits}, {misses} ({self.folder})"


@dataclass
class UsageMeter:
    """The token usage of the answers a provider gave (cached answers included)."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    by_model: dict[str, list[int]] = field(default_factory=dict)

    def add(self, request: ChatRequest, response: ChatResponse) -> None:
        """Count one answer."""
        self.calls += 1
        self.input_tokens += response.input_tokens
        self.output_tokens += response.output_tokens
        self.cache_read_tokens += response.cache_read_tokens
        counts = self.by_model.setdefault(request.model, [0, 0, 0])
        counts[0] += response.input_tokens
        counts[1] += response.output_tokens
        counts[2] += response.cache_read_tokens


@dataclass(frozen=True)
class JudgeSpend:
    """What a stretch of judging used: calls, tokens, their cost, and the cache's part.

    Attributes:
        calls: Judge answers (cached ones included).
        input_tokens: Prompt tokens of those answers.
        output_tokens: Completion tokens.
        cache_read_tokens: Prompt tokens the provider served from its own cache.
        cost_usd: Their cost at the price table (None when a judge model has no price).
        cache_hits: Answers taken from the judge cache (None with ``--no-cache``).
        cache_misses: Answers the provider gave (None with ``--no-cache``).
    """

    calls: int
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cost_usd: float | None
    cache_hits: int | None
    cache_misses: int | None

    def to_json(self) -> dict[str, Any]:
        """The camelCase form written in comparison records."""
        return {
            "calls": self.calls,
            "inputTokens": self.input_tokens,
            "outputTokens": self.output_tokens,
            "cacheReadTokens": self.cache_read_tokens,
            "costUsd": self.cost_usd,
            "cacheHits": self.cache_hits,
            "cacheMisses": self.cache_misses,
        }

    def tokens_line(self) -> str:
        """``Judge tokens: 120 in / 30 out (4 calls) · cost $0.0012``."""
        cost = "unknown" if self.cost_usd is None else f"${self.cost_usd:,.4f}"
        return (
            f"Judge tokens: {self.input_tokens:,} in / {self.output_tokens:,} out "
            f"({self.calls:,} calls) · cost {cost}"
        )


class CachedJudge:
    """An :class:`~vally.contracts.llm.LLMProvider` answering from a
    :class:`JudgeCache` when it can and from ``inner`` otherwise, metering every answer.

    Args:
        inner: The provider that really calls the model.
        cache: The cache; None sends every request (``--no-cache``) and only meters.
        provider: The provider's name (part of the key).
    """

    metadata: ClassVar[PluginMetadata] = PluginMetadata(
        name="judge-cache",
        kind="llm_provider",
        description="Answers judge requests from the judge cache, else from the provider.",
    )
    Config: ClassVar[type[BaseModel]] = BaseModel

    def __init__(self, inner: LLMProvider, cache: JudgeCache | None, provider: str) -> None:
        self.inner = inner
        self.cache = cache
        self.provider = provider
        self.meter = UsageMeter()

    @property
    def base_url(self) -> Any:
        """The inner provider's URL (named in connection errors)."""
        return getattr(self.inner, "base_url", None)

    async def chat(self, request: ChatRequest) -> ChatResponse:
        """The cached answer of ``request``, else the inner provider's (then stored)."""
        cache = None if _BYPASS.get() else self.cache
        key = ""
        if cache is not None:
            endpoint = self.base_url
            key = request_key(
                self.provider,
                request,
                endpoint=None if endpoint is None else str(endpoint),
                evidence=_EVIDENCE.get(),
            )
        response = cache.get(key) if cache is not None else None
        counts = _COUNTS.get()
        if cache is not None and response is not None:
            cache.hits += 1
            if counts is not None:
                counts.hits += 1
        else:
            response = await self.inner.chat(request)
            if cache is not None:
                cache.misses += 1
                cache.put(key, response)
                if counts is not None:
                    counts.misses += 1
        self.meter.add(request, response)
        return response

    def checkpoint(self) -> tuple[UsageMeter, int, int]:
        """The meter and cache counts now, to measure a stretch of judging from."""
        meter = self.meter
        copy = UsageMeter(
            meter.calls,
            meter.input_tokens,
            meter.output_tokens,
            meter.cache_read_tokens,
            {model: list(counts) for model, counts in meter.by_model.items()},
        )
        cache = self.cache
        return copy, cache.hits if cache else 0, cache.misses if cache else 0

    def spend_since(self, mark: tuple[UsageMeter, int, int], prices: PriceTable) -> JudgeSpend:
        """What was judged since ``mark`` (a :meth:`checkpoint`), priced with ``prices``."""
        before, hits, misses = mark
        now = self.meter
        cost: float | None = 0.0
        for model, counts in now.by_model.items():
            old = before.by_model.get(model, [0, 0, 0])
            delta = [counts[i] - old[i] for i in range(3)]
            if not any(delta):
                continue
            price = prices.get(model)
            if price is None or cost is None:
                cost = None
                continue
            cost += price.cost(delta[0], delta[1], delta[2])
        cache = self.cache
        return JudgeSpend(
            calls=now.calls - before.calls,
            input_tokens=now.input_tokens - before.input_tokens,
            output_tokens=now.output_tokens - before.output_tokens,
            cache_read_tokens=now.cache_read_tokens - before.cache_read_tokens,
            cost_usd=cost,
            cache_hits=cache.hits - hits if cache else None,
            cache_misses=cache.misses - misses if cache else None,
        )

    async def aclose(self) -> None:
        """Close the inner provider."""
        await self.inner.aclose()
