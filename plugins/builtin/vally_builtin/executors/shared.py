"""Small pieces the built-in agent executors share: the trial's limits, the trajectory's
metadata, an early stop of the agent and the best-effort session log."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import IO, Any

from vally import (
    Constraints,
    EndReason,
    ExecutorMetadata,
    ExecutorOptions,
    Stimulus,
    TrajectoryMetadata,
    TrajectoryRecorder,
)


class AgentStop(Exception):
    """A constraint (or a failure the agent reported) ended the agent.

    Args:
        reason: The trajectory's end reason.
        detail: Why it stopped, for ``end_detail`` and the fatal event.
    """

    def __init__(self, reason: EndReason, detail: str) -> None:
        super().__init__(detail)
        self.reason: EndReason = reason
        self.detail = detail

    @classmethod
    def max_turns(cls, limit: int) -> AgentStop:
        """The stop of an agent that used up its ``max_turns`` of model calls."""
        return cls(
            "max_turns",
            f"stopped: max_turns of {limit} model calls reached before the agent finished",
        )


async def run_prompts(
    recorder: TrajectoryRecorder,
    prompts: Sequence[str],
    send: Callable[[str], Awaitable[None]],
    *,
    deadline: tuple[float | None, EndReason],
    on_stop: Callable[[str], Awaitable[None] | None],
    on_timeout: Callable[[str], None],
    start: Callable[[], Awaitable[None]] | None = None,
) -> tuple[EndReason, str | None]:
    """Send every prompt (after ``start``) within the ``deadline``'s seconds (None: no
    limit); return the end reason and its detail.

    An :class:`AgentStop` calls ``on_stop`` with its detail; running out of time calls
    ``on_timeout`` with ``stopped: <max_duration | trial timeout> of <seconds>s reached``
    and ends with the ``deadline``'s end reason. Either way a fatal error event records why
    the agent stopped.
    """
    seconds, reason = deadline
    try:
        async with asyncio.timeout(seconds) as scope:
            if start is not None:
                await start()
            for index, prompt in enumerate(prompts):
                recorder.turn = index
                await send(prompt)
    except AgentStop as stop:
        stopping = on_stop(stop.detail)
        if stopping is not None:
            await stopping
        recorder.error(stop.detail, code=stop.reason, fatal=True)
        return stop.reason, stop.detail
    except TimeoutError:
        if not scope.expired():
            raise
        what = "max_duration" if reason == "max_duration" else "trial timeout"
        detail = f"stopped: {what} of {seconds:g}s reached"
        on_timeout(detail)
        recorder.error(detail, code=reason, fatal=True)
        return reason, detail
    return "completed", None


def trial_constraints(options: ExecutorOptions, stimulus: Stimulus) -> Constraints:
    """The limits a trial runs under: the run's, else the stimulus's own."""
    constraints = options.constraints
    if constraints.is_empty() and stimulus.constraints is not None:
        constraints = stimulus.constraints
    return constraints


def run_metadata(
    metadata: ExecutorMetadata,
    options: ExecutorOptions,
    *,
    model: str | None,
    session_id: str | None,
    extra: dict[str, Any],
) -> TrajectoryMetadata:
    """The trajectory metadata of an executor's run: model, executor name, the skills it
    was given, its session and what else it records."""
    return TrajectoryMetadata(
        model=model,
        executor=metadata.name,
        skills_loaded=[s.name for s in options.skills],
        session_id=session_id,
        extra=extra,
    )


class SessionLog:
    """A JSON-lines file in the trial's session-log folder, written best effort: a file
    that cannot be opened or written is given up silently."""

    def __init__(self) -> None:
        self._fh: IO[str] | None = None

    def open(self, folder: Path | None, name: str, mode: str = "a") -> None:
        """Start writing ``folder/name`` (``mode`` ``a`` appends, ``w`` starts afresh);
        without a folder nothing is written."""
        if folder is not None:
            try:
                folder.mkdir(parents=True, exist_ok=True)
                self._fh = (folder / name).open(mode, encoding="utf-8")
            except OSError:
                self._fh = None

    def write_line(self, text: str) -> None:
        """Append ``text`` and a newline (unless it ends with one), and flush."""
        if self._fh is not None:
            try:
                self._fh.write(text if text.endswith("\n") else text + "\n")
                self._fh.flush()
            except (OSError, ValueError):
                self._fh = None

    def write_json(self, value: Any) -> None:
        """Append ``value`` as one JSON line (anything JSON cannot hold as its ``str``)."""
        if self._fh is not None:
            try:
                text = json.dumps(value, ensure_ascii=False, default=str)
            except ValueError:
                self._fh = None
                return
            self.write_line(text)

    def close(self) -> None:
        """Close the file."""
        if self._fh is not None:
            with contextlib.suppress(OSError):
                self._fh.close()
            self._fh = None
