"""Finding the real agent CLIs (installed by ``scripts/install-agent-clis.sh``) and running
``vally eval`` with them offline, next to a scripted model server.

Tests that need a CLI or a network namespace skip with the reason when it is missing,
unless ``VALLY_REQUIRE_AGENT_CLIS=1`` (CI), which makes them fail instead.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sys
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.agents.loopback import run_offline
from tests.agents.netns import require_namespace, require_or_skip

DIR_ENV = "VALLY_AGENT_CLIS_DIR"
DEFAULT_PREFIX = Path.home() / ".cache" / "vally" / "agent-clis"


def find_cli(name: str) -> str | None:
    """The path of the ``name`` program: in the install script's folder, else on PATH."""
    prefix = Path(os.environ.get(DIR_ENV) or DEFAULT_PREFIX)
    candidate = prefix / "node_modules" / ".bin" / name
    if candidate.exists():
        return str(candidate)
    return shutil.which(name)


def require_cli(name: str) -> str:
    """The CLI's path; skips (or fails under ``VALLY_REQUIRE_AGENT_CLIS=1``) when it or a
    loopback-only network namespace is missing."""
    path = find_cli(name)
    if path is None:
        require_or_skip(f"{name} is not installed (run scripts/install-agent-clis.sh)")
    require_namespace()
    assert path is not None
    return path


@dataclass
class EvalRun:
    """One offline ``vally eval``: its exit code, output, trial records, the requests the
    model server received and the CLI's raw event stream (the trial's ``events.jsonl``)."""

    returncode: int
    stdout: str
    stderr: str
    records: list[dict[str, Any]]
    requests: list[dict[str, Any]]
    raw_events: list[dict[str, Any]]

    @property
    def trajectory(self) -> dict[str, Any]:
        """The trajectory of the only trial."""
        assert len(self.records) == 1, self.stderr[-3000:]
        trajectory = self.records[0]["trajectory"]
        assert trajectory is not None, self.records[0]["error"]
        return dict(trajectory)


def run_eval(
    server: str, steps: list[Any], spec: str, folder: Path, *, model: str, home: Path
) -> EvalRun:
    """Write ``spec`` as ``eval.yaml`` in ``folder`` and run ``vally eval`` on it offline
    (``${BASE_URL}`` in the spec is the model server's URL). ``HOME`` is ``home``."""
    (folder / "eval.yaml").write_text(spec)
    out = folder / "results"
    run = run_offline(
        server,
        steps,
        [
            sys.executable,
            "-m",
            "vally",
            "eval",
            "-e",
            str(folder / "eval.yaml"),
            "--output-dir",
            str(out),
            "--workers",
            "1",
            "-p",
            "BASE_URL=__BASE_URL__",
        ],
        env={"HOME": str(home)},
        folder=folder,
        model=model,
    )
    records: list[dict[str, Any]] = []
    for results in out.glob("*/results.jsonl"):
        records += [json.loads(line) for line in results.read_text().splitlines() if line]
    raw: list[dict[str, Any]] = []
    for log in out.glob("*/**/trial-*/events.jsonl"):
        raw += [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    return EvalRun(run.returncode, run.stdout, run.stderr, records, run.requests, raw)


GREET_SKILL = """---
name: greet
description: Greets the user in the house style. Use when asked to greet someone.
---
Greet with "Ahoy!".
"""
"""The skill the CLI tests install as ``skills/greet``."""


def run_cli_case(
    cli: str,
    server: str,
    steps: Sequence[Any],
    spec: Callable[[str, str], str],
    folder: Path,
    *,
    model: str,
) -> tuple[dict[str, Any], EvalRun, str]:
    """Run one scripted trial of the ``cli`` agent offline: ``spec(program, marker)`` is the
    eval (``marker`` a fresh id to find its processes by), ``skills/greet`` and an empty
    ``HOME`` are in ``folder``. Returns the trajectory, the run and the marker."""
    program = require_cli(cli)
    (folder / "skills" / "greet").mkdir(parents=True)
    (folder / "skills" / "greet" / "SKILL.md").write_text(GREET_SKILL)
    (folder / "home").mkdir()
    marker = uuid.uuid4().hex
    run = run_eval(
        server, list(steps), spec(program, marker), folder, model=model, home=folder / "home"
    )
    return run.trajectory, run, marker


def steps_by_turn(steps: Sequence[Any], turn_steps: Sequence[int]) -> list[list[Any]]:
    """The scripted ``steps`` split into turns of ``turn_steps`` model calls each."""
    turns, first = [], 0
    for count in turn_steps:
        turns.append(list(steps[first : first + count]))
        first += count
    return turns


def by_turn(events: list[dict[str, Any]], kind: str) -> dict[int, list[dict[str, Any]]]:
    """The ``data`` of each event of type ``kind``, grouped by turn."""
    grouped: dict[int, list[dict[str, Any]]] = {}
    for event in events:
        if event["type"] == kind:
            grouped.setdefault(event["turn"], []).append(event["data"])
    return grouped


def reap_leftovers(marker: str) -> list[str]:
    """Kill every running process whose command line or environment holds ``marker``;
    return their command lines (empty when none was left)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
            environ = (proc / "environ").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline or marker.encode() in environ:
            found.append(cmdline.replace(b"\0", b" ").decode(errors="replace"))
            with contextlib.suppress(OSError):
                os.kill(int(proc.name), signal.SIGKILL)
    return found
