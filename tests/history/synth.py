"""Synthetic run folders in the on-disk format of ``vally eval`` / ``vally experiment run``,
for the history tests and the benchmark: any number of evals, stimuli, models, trials and
variants, with pass, fail, errored and ungraded trials, tool calls (some failing), grader
details and token usage, deterministic for a seed.

Every record carries every field of ``TrialResultRecord`` (a test validates them with the
model), so the ingest reads what vally writes.
"""

from __future__ import annotations

import json
import random
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TOOLS = ("read_file", "write_file", "run_shell", "search")


@dataclass
class RunSpec:
    """What to generate."""

    run_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    evals: tuple[str, ...] = ("suite",)
    stimuli: int = 4
    models: tuple[str | None, ...] = ("gpt-a", "gpt-b")
    trials: int = 3
    variants: tuple[str, ...] = ()
    baseline: str | None = None
    experiment: str | None = None
    started: str = "2026-01-15T09:00:00.000Z"
    seed: int = 1
    trial_dirs: bool = True
    pass_bias: dict[str, float] = field(default_factory=dict)  # variant/model -> pass chance


def _event(kind: str, turn: int, data: dict[str, Any], second: int) -> dict[str, Any]:
    return {
        "timestamp": f"2026-01-15T09:00:{second % 60:02d}.000Z",
        "turn": turn,
        "type": kind,
        "data": data,
    }


def _stimulus(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "description": None,
        "prompt": f"Solve task {name}.",
        "turns": None,
        "environment": None,
        "graders": [
            {
                "type": "output-contains",
                "config": {"value": "done"},
                "name": None,
                "turn": None,
                "required": False,
            }
        ],
        "rubric": [],
        "constraints": None,
        "tags": {},
        "artifacts": [],
    }


def _trajectory(
    rng: random.Random, stimulus: dict[str, Any], model: str | None, passed: bool
) -> dict[str, Any]:
    events = [
        _event("user_message", 0, {"content": stimulus["prompt"]}, 0),
        _event("turn_start", 0, {"turnId": "turn-1"}, 0),
        _event("reasoning", 0, {"content": "Let me look at the files first."}, 1),
    ]
    breakdown: dict[str, int] = {}
    for i in range(rng.randint(1, 4)):
        tool = rng.choice(TOOLS)
        breakdown[tool] = breakdown.get(tool, 0) + 1
        call_id = f"call-{i}"
        events.append(
            _event(
                "tool_call",
                0,
                {
                    "toolName": tool,
                    "toolCallId": call_id,
                    "arguments": {"path": f"src/file{i}.py"},
                    "server": None,
                    "batchId": None,
                },
                2 + i,
            )
        )
        ok = rng.random() > 0.15
        events.append(
            _event(
                "tool_result",
                0,
                {
                    "toolName": tool,
                    "toolCallId": call_id,
                    "success": ok,
                    "result": "ok" if ok else "permission denied",
                    "server": None,
                },
                2 + i,
            )
        )
    tokens_in, tokens_out = rng.randint(500, 5000), rng.randint(50, 800)
    events.append(
        _event(
            "token_usage",
            0,
            {
                "inputTokens": tokens_in,
                "outputTokens": tokens_out,
                "model": model,
                "cacheReadTokens": 0,
                "cacheWriteTokens": 0,
            },
            8,
        )
    )
    answer = "done: all tests pass" if passed else "I could not finish"
    events.append(_event("assistant_message", 0, {"content": answer}, 9))
    events.append(_event("turn_end", 0, {"turnId": "turn-1"}, 9))
    return {
        "id": str(uuid.UUID(int=rng.getrandbits(128))),
        "stimulus": stimulus,
        "events": events,
        "metrics": {
            "tokenUsage": {
                "inputTokens": tokens_in,
                "outputTokens": tokens_out,
                "totalTokens": tokens_in + tokens_out,
                "cacheReadTokens": 0,
                "cacheWriteTokens": 0,
                "callCount": 1,
                "byModel": {
                    model or "unknown": {
                        "inputTokens": tokens_in,
                        "outputTokens": tokens_out,
                        "callCount": 1,
                    }
                },
            },
            "wallTimeMs": rng.randint(200, 9000),
            "toolCallCount": sum(breakdown.values()),
            "toolCallBreakdown": breakdown,
            "skillActivationCount": 0,
            "skillActivationBreakdown": {},
            "turnCount": 1,
            "errorCount": 0,
        },
        "output": answer,
        "workDir": "/tmp/ws",
        "metadata": {
            "model": model,
            "executor": "command",
            "skillsLoaded": [],
            "startedAt": None,
            "completedAt": None,
            "sessionId": None,
            "extra": {},
        },
        "workspaceStatus": "local",
        "endReason": "completed",
        "endDetail": None,
        "diff": None,
    }


def trial_record(
    spec: RunSpec,
    rng: random.Random,
    eval_name: str,
    stimulus_name: str,
    model: str | None,
    variant: str | None,
    index: int,
) -> dict[str, Any]:
    """One ``trial-result`` record."""
    stimulus = _stimulus(stimulus_name)
    chance = spec.pass_bias.get(variant or "", spec.pass_bias.get(model or "", 0.6))
    roll = rng.random()
    errored = roll > 0.95
    passed = not errored and rng.random() < chance
    duration = rng.randint(300, 20000)
    grade = (
        None
        if errored
        else {
            "passed": passed,
            "score": 1.0 if passed else rng.choice([0.0, 0.5]),
            "threshold": None,
            "mode": "binary",
            "hasGraders": True,
            "errored": False,
            "details": [
                {
                    "name": "output-contains",
                    "type": "output-contains",
                    "passed": passed,
                    "score": 1.0 if passed else 0.0,
                    "evidence": "found 'done'" if passed else "'done' not in the output",
                    "status": "success",
                    "required": False,
                    "weight": 1.0,
                    "turn": None,
                    "details": [],
                    "metadata": {},
                }
            ],
            "constraintViolations": [],
        }
    )
    parts = [variant] if variant else []
    parts += [eval_name, stimulus_name, model or "default", str(index)]
    block = None
    if variant:
        block = {
            "runId": spec.run_id,
            "experiment": spec.experiment or "exp",
            "variant": variant,
            "evalHash": "e" * 12,
            "configHash": "c" * 12,
            "baseline": spec.baseline,
            "shard": None,
        }
    return {
        "type": "trial-result",
        "schemaVersion": 1,
        "runId": spec.run_id,
        "evalName": eval_name,
        "evalFile": f"evals/{eval_name}/eval.yaml",
        "stimulusName": stimulus_name,
        "stimulus": stimulus,
        "variant": variant,
        "model": model,
        "trialIndex": index,
        "trialId": "/".join(parts),
        "status": "error" if errored else "success",
        "error": {"phase": "execute", "code": "VALLY_TIMEOUT", "message": "agent timed out"}
        if errored
        else None,
        "startedAt": spec.started,
        "completedAt": spec.started,
        "durationMs": duration,
        "tags": {"area": "synthetic"},
        "gradeResult": grade,
        "trajectory": None if errored else _trajectory(rng, stimulus, model, passed),
        "experiment": block,
    }


def _stimulus_summary(trials: list[dict[str, Any]]) -> dict[str, Any]:
    """A ``StimulusSummary`` of one stimulus and model, as ``vally eval`` writes it."""
    graded = [t for t in trials if t["gradeResult"] is not None]
    passed = sum(1 for t in graded if t["gradeResult"]["passed"])
    rate = passed / len(graded) if graded else None
    scores = [t["gradeResult"]["score"] for t in graded]
    return {
        "stimulusName": trials[0]["stimulusName"],
        "model": trials[0]["model"],
        "trials": len(trials),
        "graded": len(graded),
        "passed": passed,
        "errored": len(trials) - len(graded),
        "meanScore": sum(scores) / len(scores) if scores else None,
        "metrics": {
            "perTrialPassRate": rate,
            "passAtK": None if rate is None else float(passed > 0),
            "passAtKNaive": None if rate is None else float(passed > 0),
            "passToTheK": None if rate is None else float(passed == len(graded)),
            "k": len(graded),
        },
        "flaky": 0 < passed < len(graded),
        "hasGraders": True,
        "meanTokens": None,
        "meanTurns": 1.0,
        "meanToolCalls": None,
        "meanWallTimeMs": sum(t["durationMs"] for t in trials) / len(trials),
        "totalErrors": len(trials) - len(graded),
    }


def _summary(
    spec: RunSpec,
    eval_name: str,
    variant: str | None,
    stimuli: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    block = None
    if variant:
        block = {
            "runId": spec.run_id,
            "experiment": spec.experiment or "exp",
            "variant": variant,
            "evalHash": "e" * 12,
            "configHash": "c" * 12,
            "baseline": spec.baseline,
            "shard": None,
        }
    return {
        "type": "run-summary",
        "schemaVersion": 1,
        "runId": spec.run_id,
        "evalName": eval_name,
        "evalFile": f"evals/{eval_name}/eval.yaml",
        "variant": variant,
        "evalHash": None,
        "configHash": None,
        "threshold": None,
        "models": list(spec.models),
        "trials": 0,
        "passed": 0,
        "failed": 0,
        "errored": 0,
        "passRate": None,
        "verdict": "none",
        "stimuli": stimuli or [],
        "startedAt": spec.started,
        "completedAt": spec.started,
        "vallyVersion": "0.1.0",
        "plugins": [],
        "experiment": block,
    }


def write_run(folder: Path, spec: RunSpec) -> Path:
    """Write one run (``results.jsonl``, ``run-summary.jsonl``, trial folders; an experiment
    gets one subfolder per variant) into ``folder``; returns ``folder``."""
    rng = random.Random(spec.seed)
    variants: tuple[str | None, ...] = spec.variants or (None,)
    for variant in variants:
        target = folder / variant if variant else folder
        target.mkdir(parents=True, exist_ok=True)
        per_eval: dict[str, list[dict[str, Any]]] = {e: [] for e in spec.evals}
        with (target / "results.jsonl").open("w", encoding="utf-8") as results:
            for eval_name in spec.evals:
                for s in range(spec.stimuli):
                    for model in spec.models:
                        records = []
                        for index in range(spec.trials):
                            record = trial_record(
                                spec, rng, eval_name, f"task-{s:03d}", model, variant, index
                            )
                            records.append(record)
                            results.write(json.dumps(record) + "\n")
                            if spec.trial_dirs:
                                _trial_dir(target, record)
                        per_eval[eval_name].append(_stimulus_summary(records))
        with (target / "run-summary.jsonl").open("w", encoding="utf-8") as summaries:
            for eval_name in spec.evals:
                summary = _summary(spec, eval_name, variant, per_eval[eval_name])
                summaries.write(json.dumps(summary) + "\n")
    return folder


def _trial_dir(target: Path, record: dict[str, Any]) -> None:
    trial = target.joinpath(
        record["evalName"],
        record["stimulusName"],
        record["model"] or "_",
        f"trial-{record['trialIndex']}",
    )
    (trial / "artifacts").mkdir(parents=True, exist_ok=True)
    (trial / "metadata.json").write_text(
        json.dumps({"runId": record["runId"], "trialId": record["trialId"]})
    )
    (trial / "artifacts" / "notes.txt").write_text(f"notes of {record['trialId']}\n")
