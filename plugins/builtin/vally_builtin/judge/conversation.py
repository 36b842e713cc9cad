"""The judge's conversation: read evidence through tools, then answer with one JSON object.

The answer is requested with a ``response_format`` JSON schema; a server that rejects it
(HTTP 400 naming ``response_format``) is asked again without it, and the text answer is then
parsed leniently (the first balanced ``{...}`` object in the text). An answer that is not
valid after two reminders raises a terminal :class:`GradingError`; model failures raise the
provider's :class:`LLMError` unchanged, so retry decisions see its ``retryable`` flag.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from vally import (
    ChatMessage,
    ChatRequest,
    GradingError,
    JudgeSettings,
    LLMError,
    LLMProvider,
    ToolCall,
    ToolSpec,
    judging_evidence,
    loads_bounded,
)
from vally_builtin.judge.evidence import TOOLS, EvidenceReader

REMINDERS = 2


@dataclass(frozen=True)
class JudgeAnswer:
    """The parsed JSON answer, how many evidence reads it took and the judge's token usage
    over every call of the conversation."""

    data: dict[str, Any]
    reads: int
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0

    def usage(self) -> dict[str, int]:
        """The usage as graders report it in their metadata (``judgeUsage``)."""
        return {
            "calls": self.calls,
            "inputTokens": self.input_tokens,
            "outputTokens": self.output_tokens,
            "cacheReadTokens": self.cache_read_tokens,
        }


def extract_json(text: str) -> dict[str, Any] | None:
    """The first JSON object found in ``text`` (fenced or bare), or None."""
    text = text.strip()
    try:
        value = loads_bounded(text)
        return value if isinstance(value, dict) else None
    except ValueError:  # not JSON as a whole (or nested too deeply)
        pass
    start = text.find("{")
    while start >= 0:
        depth = 0
        in_string = False
        escaped = False
        for index in range(start, len(text)):
            char = text[index]
            if in_string:
                if escaped:
                    escaped = False
                elif char == "\\":
                    escaped = True
                elif char == '"':
                    in_string = False
            elif char == '"':
                in_string = True
            elif char == "{":
                depth += 1
            elif char == "}":
                depth -= 1
                if depth == 0:
                    try:
                        value = loads_bounded(text[start : index + 1])
                    except ValueError:
                        break
                    return value if isinstance(value, dict) else None
        start = text.find("{", start + 1)
    return None


def _require_judge(llm: LLMProvider | None, judge: JudgeSettings) -> tuple[LLMProvider, str]:
    """The provider and the judge model, once both are configured.

    Raises:
        GradingError: Either is missing (the message says how to configure it).
    """
    if llm is None:
        raise GradingError(
            "the LLM judge needs a model provider; set 'llm:' in .vally.yaml or "
            "OPENAI_BASE_URL / OPENAI_API_KEY"
        )
    if not judge.model:
        raise GradingError(
            "no judge model: set the grader's 'model', --judge-model, 'judge_model' in the "
            "spec's defaults, or EVAL_JUDGE_MODEL"
        )
    return llm, judge.model


def _tool_reply(call: ToolCall, reader: EvidenceReader | None) -> ChatMessage:
    """The tool message answering one of the judge's tool calls (an evidence read, or an
    error the judge sees)."""
    try:
        arguments = loads_bounded(call.arguments or "{}")
        if not isinstance(arguments, dict):
            raise ValueError("arguments must be a JSON object")
    except ValueError as exc:
        ok, text = False, f"invalid arguments: {exc}"
    else:
        if reader is None:
            ok, text = False, "no tools are available; answer with the JSON object"
        else:
            ok, text = reader.call(call.name, arguments)
    return ChatMessage(
        role="tool", tool_call_id=call.id, name=call.name, content=text if ok else f"error: {text}"
    )


async def converse(
    llm: LLMProvider | None,
    judge: JudgeSettings,
    *,
    system: str,
    prompt: str,
    schema: Mapping[str, Any],
    validate: Callable[[dict[str, Any]], str | None],
    reader: EvidenceReader | None,
) -> JudgeAnswer:
    """Run the judge until it gives a valid answer.

    With tool delivery its requests are keyed in the judge cache on the digest of the
    evidence it may read as well (``vally.judging_evidence``): the first request names only
    file paths, so two runs' evidence must not share an answer.

    Args:
        llm: The provider; None raises a GradingError explaining how to configure one.
        judge: Model, reasoning effort and per-turn timeout.
        system: The system prompt.
        prompt: The first user message (task, rubric, instructions, file paths).
        schema: JSON schema of the answer (sent as ``response_format``).
        validate: Returns an error text for an invalid answer, None for a valid one.
        reader: Evidence tools; None for inline delivery (no tools offered).
    """
    provider, model = _require_judge(llm, judge)
    evidence = reader.digest() if reader is not None else None
    tools: tuple[ToolSpec, ...] = TOOLS if reader is not None else ()
    messages: list[ChatMessage] = [
        ChatMessage(role="system", content=system),
        ChatMessage(role="user", content=prompt),
    ]
    response_format: Mapping[str, Any] | None = {
        "type": "json_schema",
        "json_schema": {"name": "verdict", "schema": dict(schema), "strict": False},
    }
    reminders = 0
    steps = 0
    used = [0, 0, 0, 0]  # calls, input, output, cache-read tokens
    max_steps = (reader.budget if reader else 0) + 8
    while True:
        steps += 1
        if steps > max_steps:
            raise GradingError(f"the judge did not answer within {max_steps} steps")
        request = ChatRequest(
            model=model,
            messages=list(messages),
            tools=tools,
            reasoning_effort=judge.reasoning_effort,
            response_format=response_format,
            temperature=0.0,
            timeout=judge.timeout,
        )
        try:
            with judging_evidence(evidence) if evidence else contextlib.nullcontext():
                response = await provider.chat(request)
        except LLMError as exc:
            if response_format is not None and exc.status == 400 and "response_format" in str(exc):
                response_format = None
                continue
            raise
        used = [
            used[0] + 1,
            used[1] + response.input_tokens,
            used[2] + response.output_tokens,
            used[3] + response.cache_read_tokens,
        ]
        message = response.message
        messages.append(message)
        if message.tool_calls:
            messages.extend(_tool_reply(call, reader) for call in message.tool_calls)
            continue
        data = extract_json(message.content or "")
        problem = "the answer is not a JSON object" if data is None else validate(data)
        if problem is None and data is not None:
            return JudgeAnswer(data, reader.reads if reader else 0, *used)
        if reminders >= REMINDERS:
            shown = (message.content or "")[:200]
            raise GradingError(f"the judge's answer could not be used ({problem}): {shown!r}")
        reminders += 1
        messages.append(
            ChatMessage(
                role="user",
                content=f"Your answer could not be used: {problem}. Reply with only the JSON "
                f"object, matching this schema: {json.dumps(dict(schema))}",
            )
        )
