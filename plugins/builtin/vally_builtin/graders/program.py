"""The ``program`` grader: run any program as a grader (reference §6.4).

Contract with the program:

* It runs through the trial's sandbox with the workspace as its working directory and two
  environment variables: ``EVALUATE_WORKSPACE`` (the workspace as the program sees it) and
  ``EVALUATE_GRADER_INPUT`` (the path of a JSON file holding ``trajectory``, ``stimulus`` and
  the grader ``config``, plus ``workspace``). ``env`` entries are added to its environment.
* **JSON mode**: it prints one GraderResult JSON object on stdout (``passed`` required;
  ``score`` in [0, 1] defaults to 1/0; ``evidence``, ``details``, ``metadata`` optional).
  When stdout holds other lines too, the last line that is a JSON object is used; the
  JSON decides even when the exit code is not 0 (the code is kept in ``metadata``).
  Diagnostics belong on stderr.
* **Exit-code mode**: when stdout is empty, exit code 0 passes and anything else fails.
* A crash (non-zero exit with nothing on stdout) or a timeout fails the grader, with the end
  of stderr as evidence. Output that is neither empty nor a GraderResult is an operational
  error (:class:`~vally.errors.GradingError`), because the grader's verdict is unknown.

``program`` may name a file next to the eval file (``./graders/check.sh``): when it contains a
``/``, is relative and exists under the eval file's folder, it is copied into the sandbox and
run from there. Arguments are passed as written; to run a script through an interpreter
(``program: python3``), list the script under ``files:`` and refer to its ``dest`` in
``args``. The input file and staged program are removed after the run.
"""

from __future__ import annotations

import json
import uuid
from typing import Any, ClassVar

from pydantic import Field, ValidationError, field_validator

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
from vally_builtin.graders import require_sandbox, resolve_host_source, shorten
from vally_builtin.graders.command import VerifierFile, stage_files
from vally_builtin.graders.process import GraderCommand, output_tail, shown_command, with_tail

SCRATCH_DIR = ".vally"
"""Workspace folder holding the grader input and staged programs while a program runs."""


class ProgramConfig(StrictConfig):
    """Config of ``program``.

    Attributes:
        program: The program to run (on the sandbox's PATH, or a file next to the eval file).
        args: Its arguments.
        timeout: How long it may run (default ``60s``); over it, the grader fails.
        env: Extra environment variables.
        files: Verifier files copied into the workspace before the program runs.
    """

    program: str = Field(min_length=1)
    args: list[str] = Field(default_factory=list)
    timeout: Duration = Field(default=60.0, gt=0)
    env: dict[str, str] = Field(default_factory=dict)
    files: list[VerifierFile] = Field(default_factory=list)

    @field_validator("program")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("program must not be empty")
        return value


def _sandbox_path(sandbox: Sandbox, rel: str) -> str:
    base = sandbox.workdir.rstrip("/") or "/"
    return f"{base}/{rel}" if base != "/" else f"/{rel}"


def parse_program_output(stdout: str, context: GradeContext) -> GraderResult:
    """Read the program's GraderResult JSON from its stdout.

    Raises:
        GradingError: No line is a JSON object, or it is not a valid GraderResult.
    """
    payload: Any = None
    text = stdout.strip()
    try:
        payload = loads_bounded(text)
    except ValueError:  # not one JSON document (or one nested too deeply)
        for line in reversed(text.splitlines()):
            line = line.strip()
            if line.startswith("{"):
                try:
                    payload = loads_bounded(line)
                    break
                except ValueError:
                    continue
    if not isinstance(payload, dict):
        raise GradingError(
            f"program grader '{context.grader.label}' printed something that is not a "
            f"GraderResult JSON object on stdout: {shorten(text, 300)!r}; print one JSON "
            'object like {"passed": true, "score": 1, "evidence": "..."} and send '
            "diagnostics to stderr"
        )
    if not isinstance(payload.get("passed"), bool):
        raise GradingError(
            f"program grader '{context.grader.label}' printed JSON without a boolean "
            f"'passed': {shorten(text, 300)!r}"
        )
    data = dict(payload)
    data.setdefault("score", 1.0 if data["passed"] else 0.0)
    data.setdefault("evidence", "")
    data["name"] = context.grader.label
    data["type"] = context.grader.type
    data.pop("status", None)
    data.pop("required", None)
    data.pop("weight", None)
    kind = data.pop("kind", None)
    details = data.get("details") or []
    if isinstance(details, list):
        data["details"] = [
            {"type": "program", "name": f"{context.grader.label}[{i}]", **d}
            if isinstance(d, dict)
            else d
            for i, d in enumerate(details)
        ]
    try:
        result = GraderResult.model_validate(data)
    except ValidationError as exc:
        raise GradingError(
            f"program grader '{context.grader.label}' printed an invalid GraderResult: "
            f"{shorten(str(exc), 400)}"
        ) from None
    meta = dict(result.metadata)
    if kind is not None:
        meta.setdefault("kind", kind)
    return result.model_copy(
        update={
            "required": context.grader.required,
            "turn": context.grader.turn,
            "metadata": meta,
        }
    )


class ProgramGrader(BaseGrader[ProgramConfig]):
    """Runs a program that decides pass/fail (JSON on stdout, or its exit code)."""

    metadata: ClassVar[GraderMetadata] = GraderMetadata(
        name="program",
        description="Runs any program as a grader (GraderResult JSON on stdout, or exit code).",
        cost_profile="low",
        portability="t3a-scenario",
        needs_workspace=True,
    )

    async def _stage_program(self, context: GradeContext, sandbox: Sandbox, run_dir: str) -> str:
        program = self.config.program
        if "/" not in program or program.startswith("/") or context.spec_dir is None:
            return program
        candidate = (context.spec_dir / program).resolve()
        if not candidate.is_file():
            return program
        source = resolve_host_source(context.spec_dir, program, what="program")
        rel = f"{run_dir}/{source.name}"
        await sandbox.write_file(rel, source.read_bytes())
        chmod = await sandbox.exec(["chmod", "+x", rel], timeout=30)
        if chmod.exit_code != 0:
            raise GradingError(
                f"program grader '{context.grader.label}': could not make {program!r} "
                f"executable in the sandbox: {output_tail(chmod)}"
            )
        return _sandbox_path(sandbox, rel)

    async def grade(self, context: GradeContext) -> GraderResult:
        """Write the grader input, run the program through the sandbox, read its verdict."""
        cfg = self.config
        sandbox = require_sandbox(context, "program")
        await stage_files(context, sandbox, cfg.files)
        token = uuid.uuid4().hex[:12]
        run_dir = f"{SCRATCH_DIR}/grader-{token}"
        input_rel = f"{SCRATCH_DIR}/grader-input-{token}.json"
        grader_input = {
            "trajectory": context.trajectory.to_json_dict(),
            "stimulus": context.stimulus.model_dump(mode="json", exclude_none=True),
            "config": context.grader.config,
            "workspace": sandbox.workdir,
        }
        await sandbox.write_file(input_rel, json.dumps(grader_input).encode("utf-8"))
        try:
            program = await self._stage_program(context, sandbox, run_dir)
            env = {
                **cfg.env,
                "EVALUATE_WORKSPACE": sandbox.workdir,
                "EVALUATE_GRADER_INPUT": _sandbox_path(sandbox, input_rel),
            }
            command = GraderCommand(
                [program, *cfg.args],
                shown=shown_command("Program", " ".join([cfg.program, *cfg.args])),
                timeout=cfg.timeout,
                env=env,
            )
            outcome = await command.run(sandbox)
        finally:
            await _cleanup(sandbox, [input_rel, run_dir])
        result = outcome.result
        meta = outcome.metadata(stdout=False)
        if outcome.no_exit_code:
            evidence = outcome.timed_out_text()
            return self.result(context, passed=False, evidence=evidence, metadata=meta)
        if result.stdout.strip():
            parsed = parse_program_output(result.stdout, context)
            return parsed.model_copy(update={"metadata": {**meta, **parsed.metadata}})
        passed = result.exit_code == 0
        evidence = outcome.exited_text()
        evidence = evidence if passed else with_tail(evidence, result)
        return self.result(context, passed=passed, evidence=evidence, metadata=meta)


async def _cleanup(sandbox: Sandbox, paths: list[str]) -> None:
    """Remove the scratch files (best effort) and the scratch folder when it is empty."""
    try:
        await sandbox.exec(["rm", "-rf", "--", *paths], timeout=30)
        await sandbox.exec(["rmdir", SCRATCH_DIR], timeout=30)
    except Exception:  # best effort: a leftover scratch file must not fail the grade
        return
