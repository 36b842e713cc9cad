"""The ``harbor-verifier`` grader: run a Harbor task's ``tests/`` after the agent and take
the reward file as the score.

The tests never run where the agent ran. A Harbor agent is root in its container: it can
replace ``/bin/bash``, ``/bin/sh`` or any program on ``PATH``, and leave processes behind
that rewrite files while the verifier runs. So the grader asks the sandbox for a fresh
container of the task's image (``open_fresh``; the docker backend has it) holding a copy of
the agent's workspace and nothing else of the trial's container. There, as Harbor does, the
task's ``tests`` folder is placed at ``/tests``, ``/logs/verifier`` is created empty, and
``tests/test.sh`` runs from the workspace (with ``bash`` when the image has it, else
``sh``): every program it runs is the image's own. The reward is read from
``/logs/verifier/reward.txt`` (a number) or ``reward.json`` (an object whose ``reward``
value, else the mean of its numbers, is the score). The grader passes when the reward
reaches ``pass_reward``. Making the container, copying the workspace and the tests, and
running ``test.sh`` all fit in ``timeout``.

The verifier's container must let it write ``/tests`` and ``/logs``: on the docker backend
run as root (``--backend-args user=0``) unless the image's user may. A sandbox that cannot
open a fresh container is refused: on ``local`` the tests would run with the host's
programs, which the agent may have changed, and ``/tests`` would be the host's own folder.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field

from vally import (
    BaseGrader,
    Duration,
    GradeContext,
    GraderMetadata,
    GraderResult,
    GradingError,
    Sandbox,
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
READ_SECONDS = 30.0
"""How long reading the reward file may take, beyond ``timeout``."""

LOCAL_REFUSED = (
    "harbor-verifier runs a task's tests in a fresh container of the task's image, which "
    "the local backend cannot make: on the host the tests would run with programs the "
    "agent may have replaced, and /tests and /logs/verifier would be the host's own "
    "folders; run Harbor tasks with --backend docker"
)
"""The error on a backend whose workspace is on the host."""

NO_FRESH = (
    "harbor-verifier runs a task's tests in a fresh container of the task's image, away "
    "from everything the agent ran or changed, and this backend's sandbox cannot make one "
    "(it has no open_fresh); run Harbor tasks with --backend docker"
)
"""The error on a backend whose sandboxes cannot open a fresh one."""

OpenFresh = Callable[[], Coroutine[Any, Any, Sandbox]]
"""A sandbox's ``open_fresh``: a new sandbox of the same image holding a copy of the
workspace."""

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
        timeout: How long the verifier may take (the task's ``[verifier] timeout_sec``):
            making its fresh container, copying the workspace and the tests in, and
            running ``test.sh``.
        pass_reward: The reward at or above which the grader passes.
    """

    tests: str = "tests"
    timeout: Duration = Field(default=600.0, gt=0)
    pass_reward: float = Field(default=1.0, ge=0.0, le=1.0)


class HarborVerifierGrader(BaseGrader[HarborVerifierConfig]):
    """Runs a Harbor task's ``tests/test.sh`` in a fresh container of the task's image holding
    a copy of the agent's workspace; the reward file is the score."""

    metadata: ClassVar[GraderMetadata] = GraderMetadata(
        name="harbor-verifier",
        description="Runs a Harbor task's tests/test.sh in a fresh container with the agent's "
        "workspace; /logs/verifier/reward.txt is the score.",
        determinism="complex-static",
        cost_profile="low",
        portability="t2-domain",
        needs_workspace=True,
    )

    async def grade(self, context: GradeContext) -> GraderResult:
        """Open a fresh container with the agent's workspace, stage the tests there, run
        ``test.sh`` and read the reward."""
        sandbox = require_sandbox(context, "harbor-verifier")
        if sandbox.host_workdir is not None:
            raise GradingError(LOCAL_REFUSED)
        open_fresh: OpenFresh | None = getattr(sandbox, "open_fresh", None)
        if open_fresh is None:
            raise GradingError(NO_FRESH)
        if context.spec_dir is None:
            raise GradingError("harbor-verifier needs the task folder; run it from a task")
        tests = resolve_host_source(context.spec_dir, self.config.tests, what="tests")
        if not (tests / "test.sh").is_file():
            raise GradingError(f"the Harbor task has no tests/test.sh (looked in {tests})")
        deadline = time.monotonic() + self.config.timeout
        verifier = await self._open(open_fresh)
        try:
            return await self._verify(context, verifier, tests, deadline)
        finally:
            # A container that cannot be removed now is removed with the run's leftovers.
            with contextlib.suppress(Exception):
                await verifier.close()

    async def _open(self, open_fresh: OpenFresh) -> Sandbox:
        """The fresh sandbox, made within ``timeout``.

        Raises:
            GradingError: It could not be made in time, or at all.
        """
        try:
            return await asyncio.wait_for(open_fresh(), self.config.timeout)
        except TimeoutError:
            raise GradingError(
                f"the verifier's fresh container was not ready within {self.config.timeout:g}s",
                hint="raise the task's [verifier] timeout_sec",
            ) from None
        except GradingError:
            raise
        except Exception as exc:
            raise GradingError(f"cannot open a fresh container for the verifier: {exc}") from exc

    async def _verify(
        self, context: GradeContext, verifier: Sandbox, tests: Path, deadline: float
    ) -> GraderResult:
        """Stage the tests in ``verifier``, run ``test.sh`` until ``deadline`` and read the
        reward."""
        # Whatever the agent left under the staging folder's name must not reach /tests.
        await verifier.exec(["rm", "-rf", "--", STAGING], timeout=_left(deadline))
        await copy_folder_in(verifier, tests, STAGING, timeout=_left(deadline))
        command = GraderCommand(["sh", "-c", _RUN], shown="tests/test.sh", timeout=_left(deadline))
        outcome = await command.run(verifier)
        run = outcome.result
        if run.timed_out:
            raise GradingError(
                f"tests/test.sh did not finish within the verifier's {self.config.timeout:g}s "
                "(the fresh container and the copies included)"
            )
        if PLACEMENT_FAILED in run.stderr:
            raise GradingError(
                f"the task's tests could not be placed at /tests ({output_tail(run)}); run "
                "the sandbox as root (--backend-args user=0 on docker)"
            )
        read = await verifier.exec(["sh", "-c", _READ], timeout=READ_SECONDS)
        kind, _, text = read.stdout.partition("\n")
        reward = _reward(kind.strip(), text, output_tail(run))
        passed = reward >= self.config.pass_reward - 1e-9
        evidence = f"{outcome.exited_text()}; reward {reward:g}"
        return self.result(
            context,
            passed=passed,
            score=reward,
            evidence=evidence,
            metadata={**outcome.metadata(), "reward": reward, "isolation": "fresh-container"},
        )


def _left(deadline: float) -> float:
    """Seconds until ``deadline`` (a little at least, so a late step still gets to fail
    with a timeout rather than not start)."""
    return max(1.0, deadline - time.monotonic())


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
