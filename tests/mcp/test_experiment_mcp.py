"""Experiments whose variants differ only in ``environment.mcpServers``.

The example ``examples/mcp`` (the glossary server, with and without) is resolved with
:func:`vally.engine.planning.variants.resolve_experiment` and each variant runs the chat-agent
against the
scripted model; then the same experiment runs through the real ``vally experiment run``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.llm.chat_server import ChatServer, Received, Reply, completion, tool_call
from tests.llm.support import make_provider, open_sandbox, run
from tests.mcp.test_chat_agent_mcp import _grade
from vally.contracts.protocols import ExecutorOptions
from vally.engine.planning.variants import resolve_experiment
from vally.engine.trials.workspace import prepare_workspace
from vally.errors import ConfigError
from vally.models.experiment import ExperimentFile
from vally.models.project import ProjectConfig
from vally.models.trajectory import Trajectory
from vally.specs.environments import resolve_environment
from vally.specs.loading import load_eval_file, load_experiment_file
from vally_builtin.executors.chat_agent import ChatAgentExecutor

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mcp"


def _model(request: Received) -> Reply:
    """Looks the quoted term up when a glossary tool is offered, else gives up."""
    offered = {t["function"]["name"] for t in request.body.get("tools", [])}
    last = request.messages[-1]
    if last["role"] == "tool":
        return completion(f"The glossary says: {last['content']}")
    if "glossary__define" in offered:
        term = last["content"].split("'")[1]
        return completion(None, [tool_call("glossary__define", {"term": term})])
    return completion("I have no glossary tool.")


def test_variants_differing_only_in_mcp_servers_resolve_and_run_per_variant(
    chat_server: ChatServer, tmp_path: Path
) -> None:
    chat_server.default = _model
    project = ProjectConfig()
    experiment = load_experiment_file(EXAMPLE / "experiment.yaml", project=project)
    loaded = load_eval_file(EXAMPLE / "eval.yaml", project=project)
    resolved = resolve_experiment(experiment, [loaded])  # the drift check passes
    assert resolved.variants == ("without-glossary", "with-glossary")
    assert len({r.eval_hash for r in resolved.evals}) == 1

    async def trial(variant_eval: Any) -> tuple[Trajectory, bool]:
        stimulus = variant_eval.loaded.spec.stimuli[0]
        env = resolve_environment(variant_eval.loaded, stimulus, project)
        sandbox = await open_sandbox(tmp_path)
        try:
            await prepare_workspace(sandbox, env, setup_timeout=30)
            servers = {k: v for k, v in env.mcpServers.items() if v is not None}
            executor = ChatAgentExecutor(ChatAgentExecutor.Config())
            options = ExecutorOptions(
                model="test-model",
                timeout=60,
                mcp_servers=servers,
                llm=make_provider(chat_server),
                env=env.env,
            )
            traj = await executor.execute(stimulus, sandbox, options)
            graded = await _grade({"required": ["^glossary__define$"]}, traj, sandbox)
            return traj, graded.passed
        finally:
            await sandbox.close()

    results = {r.variant: run(trial(r)) for r in resolved.evals}
    without, passed_without = results["without-glossary"]
    with_server, passed_with = results["with-glossary"]
    assert (passed_without, passed_with) == (False, True)
    assert without.output == "I have no glossary tool."
    assert "sequence of events" in with_server.output
    [call] = [e.data for e in with_server.events if e.type == "tool_call"]
    assert (call.tool_name, call.server, call.arguments) == (
        "glossary__define",
        "glossary",
        {"term": "trajectory"},
    )


def test_a_variant_changing_more_than_mcp_servers_is_drift() -> None:
    project = ProjectConfig()
    loaded = load_eval_file(EXAMPLE / "eval.yaml", project=project)
    experiment = ExperimentFile.model_validate(
        {
            "name": "drifty",
            "evals": ["eval.yaml"],
            "vary": ["/environment/mcpServers"],
            "baseline": "a",
            "variants": {
                "a": {},
                "b": {
                    "environment": {
                        "mcpServers": {"glossary": {"args": ["other.py"]}},
                        "env": {"X": "1"},
                    }
                },
            },
        }
    )
    with pytest.raises(ConfigError, match="/environment/env"):
        resolve_experiment(experiment, [loaded])


def test_vally_experiment_run_on_the_example(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "vally",
            "experiment",
            "run",
            str(EXAMPLE / "experiment.yaml"),
            "--output-dir",
            str(tmp_path / "out"),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    per_variant: dict[str, list[dict[str, Any]]] = {}
    for path in (tmp_path / "out").glob("*/*/results.jsonl"):
        per_variant[path.parent.name] = [json.loads(x) for x in path.read_text().splitlines()]
    assert sorted(per_variant) == ["with-glossary", "without-glossary"]
    assert [r["gradeResult"]["passed"] for r in per_variant["without-glossary"]] == [False] * 2
    assert [r["gradeResult"]["passed"] for r in per_variant["with-glossary"]] == [True] * 2
    calls = [
        e["data"]
        for r in per_variant["with-glossary"]
        for e in r["trajectory"]["events"]
        if e["type"] == "tool_call"
    ]
    assert {(c["toolName"], c["server"]) for c in calls} == {("glossary__define", "glossary")}
