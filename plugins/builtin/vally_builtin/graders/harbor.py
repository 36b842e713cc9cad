"""The ``harbor-verifier`` grader: run a Harbor task's ``tests/`` after the agent and take
the reward file as the score.

As Harbor does, the task's ``tests`` folder is placed at ``/tests`` in the trial's sandbox
(replacing anything the agent left there), ``/logs/verifier`` is created empty, and
``tests/test.sh`` runs from the workspace (with ``bash`` when the image has it, else ``sh``).
The reward is read from ``/logs/verifier/reward.txt`` (a number) or ``reward.json`` (an
object whose ``reward`` value, else the mean of its numbers, is the score). The grader
passes when the reward reaches ``pass_reward``. The sandbox must let the verifier write
``/tests`` and ``/logs``: on the docker backend run as root (``--backend-args user=0``)
unless the image's user may. A backend whose workspace is on the host (``local``) is
refused: there ``/tests`` would be the host's own folder.
"""

from __future__ import annotations

import math
from typing import ClassVar

from pydantic import Field

from vally import (
    BaseGrader,
    Duration,
    GradeContext,
    GraderMetadata,
    GraderResult,
    GradingError,
    StrictConfig,
    loads_bounded,
)
from vally_builtin.graders import copy_folder_in, require_sandbox, resolve_host_source
from vally_builtin.graders.process import GraderCommand, output_tail

STAGING = ".vally-harbor-tests"
"""Workspace folder the tests pass through on their way to ``/tests``."""

PLACEMENT_FAILED = "vally: the tests could not be placed at /tests"
"""What the verifier command prints to stderr when the tests could not be placed."""

_RUN = (
    "{ rm -rf /tests /logs/verifier && mkdir -p /logs/verifier && "
    f"cp -R {STAGING} /tests && rm -rf {STAGING}; }} || "
    f"{{ echo '{PLACEMENT_FAILED}' >&2; exit 1; }}; "
    "if command -v bash >/dev/null 2>&1; then bash /tests/test.sh; else sh /tests/test.sh; fi"
)
_READ = (
    "if [ -f /logs/verifier/reward.txt ]; then echo txt; cat /logs/verifier/reward.txt; "
    "elif [ -f /logs/verifier/reward.json ]; then echo json; cat /logs/verifier/reward.json; "
    "else echo none; fi"
)


class HarborVerifierConfig(StrictConfig):
    """Config of ``harbor-verifier``.

    Attributes:
        tests: The task's tests folder, relative to the eval file's folder (the task folder
            for the ``harbor`` eval provider).
        timeout: How long ``test.sh`` may run (the task's ``[verifier] timeout_sec``).
        pass_reward: The reward at or above which the grader passes.
    """

    tests: str = "tests"
    timeout: Duration = Field(default=600.0, gt=0)
    pass_reward: float = Field(default=1.0, ge=0.0, le=1.0)


class HarborVerifierGrader(BaseGrader[HarborVerifierConfig]):
    """Runs a Harbor task's ``tests/test.sh`` in the sandbox; the reward file is the score."""

    metadata: ClassVar[GraderMetadata] = GraderMetadata(
        name="harbor-verifier",
        description="Runs a Harbor task's tests/test.sh; /logs/verifier/reward.txt is the score.",
        determinism="complex-static",
        cost_profile="low",
        portability="t2-domain",
        needs_workspace=True,
    )

    async def grade(self, context: GradeContext) -> GraderResult:
        """Stage the tests, run ``test.sh`` and read the reward."""
        sandbox = require_sandbox(context, "harbor-verifier")
        if sandbox.host_workdir is not None:
            raise GradingError(
                "harbor-verifier runs a task's tests at /tests and /logs/verifier, which on "
                "this backend are the host's own folders; run Harbor tasks with --backend docker"
            )
        if context.spec_dir is None:
            raise GradingError("harbor-verifier needs the task folder; run it from a task")
        tests = resolve_host_source(context.spec_dir, self.config.tests, what="tests")
        if not (tests / "test.sh").is_file():
            raise GradingError(f"the Harbor task has no tests/test.sh (looked in {tests})")
        await copy_folder_in(sandbox, tests, STAGING, timeout=self.config.timeout)
        command = GraderCommand(
            ["sh", "-c", _RUN], shown="tests/test.sh", timeout=self.config.timeout
        )
        outcome = await command.run(sandbox)
        run = outcome.result
        if run.timed_out:
            raise GradingError(outcome.timed_out_text())
        if PLACEMENT_FAILED in run.stderr:
            raise GradingError(
                f"the task's tests could not be placed at /tests ({output_tail(run)}); run "
                "the sandbox as root (--backend-args user=0 on docker)"
            )
        read = await sandbox.exec(["sh", "-c", _READ], timeout=30)
        kind, _, text = read.stdout.partition("\n")
        reward = _reward(kind.strip(), text, output_tail(run))
        passed = reward >= self.config.pass_reward - 1e-9
        evidence = f"{outcome.exited_text()}; reward {reward:g}"
        return self.result(
            context,
            passed=passed,
            score=reward,
            evidence=evidence,
            metadata={**outcome.metadata(), "reward": reward},
        )


def _reward(kind: str, text: str, tail: str) -> float:
    """The reward in [0, 1] from the reward file's text.

    Raises:
        GradingError: No reward file was written, or it holds no number.
    """
    if kind == "none":
        raise GradingError(
            "tests/test.sh wrote no /logs/verifier/reward.txt or reward.json"
            + (f": {tail}" if tail else "")
        )
    try:
        if kind == "json":
            data = loads_bounded(text)
            values = [data["reward"]] if "reward" in data else list(data.values())
            value = sum(float(v) for v in values) / len(values)
        else:
            value = float(text.strip())
    except (ValueError, TypeError, KeyError, ZeroDivisionError, AttributeError) as exc:
        raise GradingError(f"the reward file holds no number: {text.strip()[:100]!r}") from exc
    if math.isnan(value):
        raise GradingError("the reward file holds NaN")
    return min(1.0, max(0.0, value))
