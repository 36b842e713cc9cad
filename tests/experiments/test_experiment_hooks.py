"""The experiment hooks: what ``vally experiment run`` asks of hook plugins (``vally.hooks``).

vally's own hook plugin is ``compare`` (package ``vally_compare``). Without a hook plugin,
a run that asks for ``--until-decided``, ``--compare`` or a ``promotion:`` decision stops
before its first trial with an error naming what needed it; one that asks for none of them
runs as before.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from vally import FinishedExperiment, PluginNotFoundError, Session, hookimpl
from vally.engine.experiment_hooks import ExperimentHooks

from .conftest import EXPERIMENT, make_project, vally

BLOCKED = {"VALLY_BLOCK_PLUGINS": "compare"}

PROMOTION = EXPERIMENT + "promotion:\n  rules:\n    - {type: no-more-failed}\n"


def test_compare_is_the_installed_hook_plugin() -> None:
    rows = Session(environ={}).list_plugins("hook")
    (row,) = [r for r in rows if r.name == "compare"]
    assert (row.kind, row.status, row.source) == ("hook", "ok", "vally 0.1.0")
    assert row.target == "vally_compare.hooks:CompareHooks"
    hooks = ExperimentHooks(Session(environ={}))
    hooks.require("vally_experiment_gate", "--until-decided")
    hooks.require("vally_experiment_decide", "--compare")


@pytest.mark.parametrize(
    ("flags", "experiment", "what"),
    [
        (["--until-decided"], EXPERIMENT, "--until-decided needs a hook plugin"),
        (["--compare"], EXPERIMENT, "--compare needs a hook plugin"),
        ([], PROMOTION, "experiment.yaml: the promotion: section needs a hook plugin"),
    ],
)
def test_without_a_hook_plugin_the_run_stops_before_any_trial(
    tmp_path: Path, flags: list[str], experiment: str, what: str
) -> None:
    make_project(tmp_path, experiment=experiment)
    res = vally(
        "experiment", "run", "experiment.yaml", "--output-dir", "out", *flags,
        cwd=tmp_path, env=BLOCKED,
    )
    assert res.code == 1, res.text
    assert what in res.stderr
    assert "VALLY_PLUGIN_NOT_FOUND" in res.stderr
    assert "vally_compare" in res.stderr and "VALLY_BLOCK_PLUGINS" in res.stderr
    assert not (tmp_path / "out").exists()  # nothing ran, no run folder


def test_without_a_hook_plugin_a_run_that_needs_none_still_runs(tmp_path: Path) -> None:
    make_project(tmp_path, experiment=PROMOTION)
    # One variant: the promotion rules are skipped, as with the hook plugin installed.
    res = vally(
        "experiment", "run", "experiment.yaml", "--output-dir", "out", "--variant", "quiet",
        cwd=tmp_path, env=BLOCKED,
    )
    assert res.code == 0, res.text
    assert "Promotion rules skipped: only one variant ran (--variant)." in res.stdout


class _Declines:
    """A hook plugin that answers no hook (returns None)."""

    @hookimpl
    def vally_experiment_decide(self, experiment: FinishedExperiment) -> Any:
        return None


def test_a_decision_no_plugin_gives_is_an_error(tmp_path: Path) -> None:
    import pluggy

    from vally.engine import experiment_hooks

    manager = pluggy.PluginManager("vally")
    manager.add_hookspecs(experiment_hooks)
    manager.register(_Declines())
    hooks = ExperimentHooks(Session(environ=BLOCKED))
    hooks._manager = manager
    hooks.require("vally_experiment_decide", "--compare")  # implemented: no error
    experiment = FinishedExperiment(
        run_dir=tmp_path,
        baseline="base",
        promotion=None,
        request=None,  # type: ignore[arg-type]
        evals=[],
        params={},
        session=Session(environ={}),
    )
    with pytest.raises(PluginNotFoundError, match="deciding the variants needs a hook plugin"):
        hooks.decide(experiment)
