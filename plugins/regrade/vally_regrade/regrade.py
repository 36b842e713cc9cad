"""Re-grading saved trials: the library behind ``vally grade`` (:func:`regrade`).

Every input trial (see :mod:`vally_regrade.saved_trials` for the accepted shapes) is matched
to its stimulus in the spec by name; ATIF trajectories, which carry no stimulus name, are
matched by ``--stimulus`` or by their first user prompt (:mod:`vally_regrade.matching`).
That stimulus's graders are applied by :mod:`vally_regrade.grading`, and the run events go
to the reporters the session has (console, and jsonl for ``--output jsonl``).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from vally import (
    CONSOLE_REPORTER,
    RESULTS_REPORTER,
    ConfigError,
    RunInfo,
    RunOutcome,
    Session,
    find_project,
    load_eval_file,
    utc_now,
)
from vally_regrade.grading import Regrader, workspace_warnings
from vally_regrade.request import GradeOptions, RegradeOutcome
from vally_regrade.trial_input import check_flags, input_folders, matched_trials, scan, spool

if TYPE_CHECKING:
    from vally import ProjectConfig


def _plugin_paths(specifiers: Sequence[str], cwd: Path) -> list[str]:
    """Relative plugin paths that exist from the working folder are made absolute; others
    resolve from the eval spec's folder."""
    out = []
    for spec in specifiers:
        candidate = cwd / spec
        looks_like_path = spec.endswith(".py") or "/" in spec or spec.startswith(".")
        out.append(str(candidate) if looks_like_path and candidate.exists() else spec)
    return out


def _session(
    opts: GradeOptions, spec_path: Path, cwd: Path
) -> tuple[Session, ProjectConfig, Path | None]:
    """The plugin session of the spec's project (with ``--grader-plugin`` loaded), the
    project and its root folder."""
    project, root = find_project(spec_path.parent, params=opts.params)
    session = Session(project, root or cwd)
    if opts.grader_plugins:
        session.load_plugins(
            "grader", _plugin_paths(opts.grader_plugins, cwd), base_dir=spec_path.parent
        )
    return session, project, root


def _register_reporters(session: Session, opts: GradeOptions) -> bool:
    """Console output (on stderr when records go to stdout); True when they do."""
    to_stdout = opts.output == "jsonl"
    stream = "stderr" if to_stdout else "stdout"
    console = session.create(
        "reporter", CONSOLE_REPORTER, {"verbose": opts.verbose, "stream": stream}
    )
    session.register_observer(console, CONSOLE_REPORTER)
    if to_stdout:
        jsonl = session.create(
            "reporter", RESULTS_REPORTER, {"stdout": True}, where="--output"
        )
        session.register_observer(jsonl, RESULTS_REPORTER)
    return to_stdout


def regrade(
    opts: GradeOptions,
    stdin: TextIO,
    *,
    cwd: Path | None = None,
    warn: Callable[[str], None] | None = None,
) -> RegradeOutcome:
    """Re-grade the trials read from ``stdin`` against ``opts.eval_spec``.

    Args:
        opts: What to do.
        stdin: The saved trials (JSON Lines or one JSON document).
        cwd: The folder relative paths are taken from (default: the working folder).
        warn: Receives warnings before grading starts (graders that need a workspace
            when there is none).

    Raises:
        VallyError: A flag, the spec, the input or a plugin is invalid (before any trial
            is graded).
    """
    here = cwd or Path.cwd()
    spec_path, workspace = check_flags(opts, stdin, here)
    session, project, project_root = _session(opts, spec_path, here)
    loaded = load_eval_file(spec_path, cli_params=opts.params, project=project)
    spec = loaded.spec
    if opts.stimulus is not None and opts.stimulus not in {s.name for s in spec.stimuli}:
        raise ConfigError(
            f"--stimulus {opts.stimulus!r} is not a stimulus of {opts.eval_spec}",
            hint="its stimuli: " + ", ".join(s.name for s in spec.stimuli),
        )
    with spool(stdin) as spooled:
        count, stimuli = scan(spooled, spec, opts, warn)
        run = RunInfo(
            run_id=str(uuid.uuid4()),
            command="grade",
            run_dir=None,
            planned_trials=count,
            started_at=utc_now(),
            options={"verbose": opts.verbose},
        )
        regrader = Regrader(session, loaded, opts, run, project_root)
        regrader.text_folders = [*input_folders(stdin), here]
        regrader.warn = warn
        regrader.prepare(stimuli, workspace)
        if workspace is None and warn is not None:
            for warning in workspace_warnings(session, spec, stimuli, str(opts.eval_spec)):
                warn(warning)
        to_stdout = _register_reporters(session, opts)
        session.emitter.emit("vally_run_start", run=run)
        cancelled = False
        try:
            asyncio.run(regrader.grade_all(matched_trials(spooled, spec, opts, None)))
        except KeyboardInterrupt:
            cancelled = True
    records = regrader.records
    session.emitter.emit("vally_run_end", run=run, outcome=RunOutcome(records, [], cancelled))
    cache = getattr(regrader.llm, "cache", None)
    line = cache.summary() if cache is not None and cache.hits + cache.misses else None
    return RegradeOutcome(records, cancelled, to_stdout, line)
