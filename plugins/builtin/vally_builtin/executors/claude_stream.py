"""The adapter for Claude Code's ``claude -p --output-format stream-json --verbose``.

Lines: ``system`` (``init`` carries ``session_id`` and ``model``), ``assistant``
(``message.content`` blocks ``text``, ``thinking``, ``tool_use``; ``message.usage``),
``user`` (``tool_result`` blocks) and the final ``result`` line.

Token usage. Claude Code writes one ``assistant`` line per content block, each repeating
the usage of the *start* of the model's answer, where ``output_tokens`` is always 1. So one
``token_usage`` event is kept per message id (one model call, with its true input and cache
counts), and the ``result`` line, which holds the true totals of the CLI run, corrects them:
per model of ``model_usage_since_last_result`` (else the run's ``usage``), the difference
between the CLI's totals and the calls seen goes to that model's last call, or to one new
event when the stream showed no call of that model (a helper or sub-agent model). The
totals of a turn therefore equal the CLI's own; the split of output tokens between the
calls of one turn is not in the stream. Messages of the ``<synthetic>`` model (Claude
Code's own text after an API error, with zero usage) are not model calls.

The result line also gives the turn's ``extra``: ``costUsd``, ``agentTurns``
(``num_turns``), ``durationMs``, ``durationApiMs``, ``modelUsage`` (per model, this run
only: ``inputTokens``, ``outputTokens``, ``cacheReadInputTokens``,
``cacheCreationInputTokens``, ``costUSD``), ``resultSubtype``, ``terminalReason`` and
``apiErrorStatus``; ``system`` ``api_retry`` notices (a failed model request Claude Code
retries) go to ``warnings``. On
``--resume`` Claude Code's ``total_cost_usd`` and ``modelUsage`` are session totals; the
per-run values are used instead so that turns add up. ``is_error`` makes the end reason
``max_turns`` (subtype ``error_max_turns``) or ``error`` (with a fatal error event).
"""

from __future__ import annotations

from typing import Any

from vally import TokenUsageData, TokenUsageEvent, TrajectoryRecorder, last_assistant_text

from .stream_base import StreamResult, objects, text_of

SYNTHETIC_MODEL = "<synthetic>"
"""The model name Claude Code gives the messages it writes itself."""

_MODEL_USAGE_KEYS = (
    "inputTokens",
    "outputTokens",
    "cacheReadInputTokens",
    "cacheCreationInputTokens",
    "costUSD",
)
"""The counts of a model's entry in the result line's per-run usage, kept in ``extra``;
the first four are its input, output, cache-read and cache-write tokens."""

_API_USAGE_KEYS = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
)
"""The token counts of an API ``usage`` object (``assistant`` lines, the run's ``usage``):
input, output, cache read and cache write."""


def _token_usage(
    usage: dict[str, Any],
    model: str | None,
    recorder: TrajectoryRecorder,
    keys: tuple[str, str, str, str] = _API_USAGE_KEYS,
) -> TokenUsageData:
    """The token usage of ``usage``, whose input, output, cache-read and cache-write counts
    are under ``keys`` (by default the API's spelling); a count that is not a whole number
    >= 0 is recorded as an error of the trajectory and counted as 0."""
    input_key, output_key, cache_read_key, cache_write_key = keys
    counts = recorder.checked_token_counts(
        {key: usage.get(key) for key in keys},
        source=f"the usage of model {model}" if model else "the usage",
    )
    cache_read, cache_write = counts[cache_read_key], counts[cache_write_key]
    # Claude's input tokens exclude cached tokens; ours include them.
    return TokenUsageData(
        input_tokens=counts[input_key] + cache_read + cache_write,
        output_tokens=counts[output_key],
        cache_read_tokens=cache_read,
        cache_write_tokens=cache_write,
        model=model,
    )


class _ClaudeStream:
    """The state of one Claude Code stream while its lines are read."""

    def __init__(self, turn: int, session: dict[str, Any]) -> None:
        self.result = StreamResult()
        self.recorder = TrajectoryRecorder(turn=turn)
        self.session = session
        self.model: str | None = None
        self.tool_names: dict[str, str] = {}
        self.usage_by_message: dict[str, TokenUsageEvent] = {}
        self.final_text: str | None = None

    def line(self, number: int, obj: dict[str, Any]) -> None:
        """Read one line of the stream."""
        kind = obj.get("type")
        if not isinstance(kind, str):
            return
        if obj.get("session_id") and isinstance(obj.get("session_id"), str):
            self.result.session_id = obj["session_id"]
        if kind == "system":
            if obj.get("subtype") == "init" and obj.get("model"):
                self.model = str(obj["model"])
            elif obj.get("subtype") == "api_retry":
                self.retry(obj)
        elif kind == "assistant":
            self.assistant(number, obj.get("message") or {})
        elif kind == "user":
            content = (obj.get("message") or {}).get("content")
            if isinstance(content, list):
                self.tool_results(content)
        elif kind == "result":
            self.final(obj)

    def retry(self, obj: dict[str, Any]) -> None:
        """An ``api_retry`` notice: a failed model request that Claude Code retries."""
        status = obj.get("error_status")
        cause = f"status {status}" if status is not None else str(obj.get("error") or "error")
        self.result.extra.setdefault("warnings", []).append(
            f"model request failed ({cause}); retry {obj.get('attempt')} of "
            f"{obj.get('max_retries')}"
        )

    def assistant(self, number: int, message: dict[str, Any]) -> None:
        """An assistant message: its content blocks, then its usage (once per message id;
        none for Claude Code's own synthetic messages)."""
        msg_id = str(message.get("id") or f"line-{number}")
        for block in message.get("content") or []:
            if isinstance(block, dict):
                self.content_block(number, msg_id, block)
        usage = message.get("usage")
        model = message.get("model") or self.model
        if isinstance(usage, dict) and model != SYNTHETIC_MODEL:
            data = _token_usage(usage, model, self.recorder)
            if msg_id in self.usage_by_message:
                self.usage_by_message[msg_id].data = data
            else:
                self.usage_by_message[msg_id] = self.recorder.add(TokenUsageEvent(data=data))

    def content_block(self, number: int, msg_id: str, block: dict[str, Any]) -> None:
        """One ``text``, ``thinking`` or ``tool_use`` block of an assistant message."""
        btype = block.get("type")
        if btype == "text" and block.get("text"):
            self.recorder.assistant_message(block["text"])
        elif btype == "thinking" and block.get("thinking"):
            self.recorder.reasoning(block["thinking"])
        elif btype == "tool_use":
            name = str(block.get("name") or "unknown")
            call_id = str(block.get("id") or f"call-{number}")
            self.tool_names[call_id] = name
            args = block.get("input")
            server = None
            if name.startswith("mcp__") and name.count("__") >= 2:
                server = name.split("__")[1]
            arguments = args if isinstance(args, (dict, str)) else {}
            self.recorder.tool_call(name, call_id, arguments, server=server, batch_id=msg_id)
            if name == "Skill" and isinstance(args, dict):
                skill = args.get("skill") or args.get("command") or args.get("name")
                if skill:
                    self.recorder.skill_activation(str(skill))

    def tool_results(self, content: list[Any]) -> None:
        """The ``tool_result`` blocks of a user message."""
        for block in content:
            if not isinstance(block, dict) or block.get("type") != "tool_result":
                continue
            call_id = str(block.get("tool_use_id") or "")
            self.recorder.tool_result(
                self.tool_names.get(call_id, "unknown"),
                call_id,
                text_of(block.get("content")),
                success=not bool(block.get("is_error")),
            )

    def final(self, obj: dict[str, Any]) -> None:
        """The ``result`` line: the answer, the turn's facts and true token totals, and the
        end reason when the run did not succeed."""
        if isinstance(obj.get("result"), str):
            self.final_text = obj["result"]
        self.turn_facts(obj)
        self.reconcile_usage(obj)
        subtype = str(obj.get("subtype") or "")
        if not (obj.get("is_error") or subtype.startswith("error")):
            return
        self.result.is_error = True
        errors = [str(e) for e in obj.get("errors") or [] if e]
        if subtype == "error_max_turns" or obj.get("terminal_reason") == "max_turns":
            self.result.end_reason = "max_turns"
            self.result.end_detail = "; ".join(errors) or "the agent reached its turn limit"
            return
        detail = self.final_text or "; ".join(errors) or subtype or "unknown error"
        self.result.end_reason = "error"
        self.result.end_detail = detail
        self.recorder.error(f"agent reported an error: {detail}", fatal=True)

    def turn_facts(self, obj: dict[str, Any]) -> None:
        """Cost, counts and durations of this CLI run (not of the resumed session)."""
        extra = self.result.extra
        per_run = obj.get("model_usage_since_last_result")
        session_cost = obj.get("total_cost_usd")
        if isinstance(per_run, dict):
            extra["modelUsage"] = {
                str(m): {k: u[k] for k in _MODEL_USAGE_KEYS if isinstance(u.get(k), (int, float))}
                for m, u in per_run.items()
                if isinstance(u, dict)
            }
            extra["costUsd"] = sum(u.get("costUSD", 0) for u in extra["modelUsage"].values())
        elif isinstance(session_cost, (int, float)):
            extra["costUsd"] = session_cost - self.session.get("claudeSessionCost", 0)
        if isinstance(session_cost, (int, float)):
            self.session["claudeSessionCost"] = session_cost
        for key, name in (
            ("num_turns", "agentTurns"),
            ("duration_ms", "durationMs"),
            ("duration_api_ms", "durationApiMs"),
            ("subtype", "resultSubtype"),
            ("terminal_reason", "terminalReason"),
            ("api_error_status", "apiErrorStatus"),
        ):
            if obj.get(key) is not None:
                extra[name] = obj[key]

    def reconcile_usage(self, obj: dict[str, Any]) -> None:
        """Make the turn's token totals, per model, equal the CLI's own."""
        per_run = obj.get("model_usage_since_last_result")
        targets: list[TokenUsageData] = []
        if isinstance(per_run, dict):
            targets = [
                _token_usage(u, str(m), self.recorder, _MODEL_USAGE_KEYS[:4])
                for m, u in per_run.items()
                if isinstance(u, dict)
            ]
        elif isinstance(obj.get("usage"), dict):
            targets = [_token_usage(obj["usage"], self.model, self.recorder)]
        calls = list(self.usage_by_message.values())
        named = {t.model for t in targets}
        # Calls whose model name the CLI's totals spell differently go to an unmatched total.
        strays = [c for c in calls if c.data.model not in named]
        for target in targets:
            mine = [c for c in calls if c.data.model == target.model]
            if not mine and strays:
                mine, strays = strays, []
            if not mine:
                if target.input_tokens or target.output_tokens:
                    self.recorder.add(TokenUsageEvent(data=target))
                continue
            last = mine[-1]
            fields = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")
            fixed = {
                f: max(
                    0,
                    getattr(last.data, f)
                    + getattr(target, f)
                    - sum(getattr(c.data, f) for c in mine),
                )
                for f in fields
            }
            last.data = last.data.model_copy(update=fixed)

    def finish(self) -> StreamResult:
        """The result of the whole stream."""
        self.result.events = self.recorder.events
        final = self.final_text
        self.result.output = final if final is not None else last_assistant_text(self.result.events)
        return self.result


def parse_claude_code_stream(
    text: str, *, turn: int = 0, session: dict[str, Any] | None = None
) -> StreamResult:
    """Parse ``claude -p --output-format stream-json --verbose`` output (see the module
    docs for how usage, cost and errors are read).

    ``session`` carries facts between the turns of one trial (the session's cost so far).
    A ``Skill`` tool call also records a ``skill_activation``; ``mcp__server__tool`` calls
    get their ``server``.
    """
    stream = _ClaudeStream(turn, session if session is not None else {})
    for number, obj in objects(text, stream.recorder):
        stream.line(number, obj)
    return stream.finish()
