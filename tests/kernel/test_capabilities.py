"""Plugin capabilities: declared in metadata by every built-in, answered only by
``vally.plugins.capabilities``, legacy declarations still honoured with a warning, and
third-party plugins with new-style metadata honoured end to end."""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import re
import subprocess
import sys
import textwrap
import tomllib
import warnings
from pathlib import Path
from typing import Any, ClassVar

import pytest

from vally.contracts.bases import BaseExecutor, BaseGrader, BaseReporter, EmptyConfig
from vally.contracts.hookspecs import hookimpl
from vally.contracts.metadata import (
    ExecutorMetadata,
    GraderBehavior,
    GraderMetadata,
    PluginKind,
    PluginMetadata,
    ReporterMetadata,
    metadata_model,
)
from vally.contracts.protocols import GradeContext
from vally.engine.trials.grading import grade_trial
from vally.errors import PluginValidationError
from vally.models.records import GraderResult
from vally.models.spec import GraderConfig
from vally.plugins import capabilities
from vally.plugins.capabilities import (
    LEGACY_DECLARATIONS,
    capability_names,
    declared_metadata,
    is_critical,
    is_pairwise,
    needs_llm,
    needs_workspace,
    supports_turns,
)
from vally.plugins.session import Session
from vally.testing import FakeSandbox, make_session, make_trajectory

ROOT = Path(__file__).resolve().parents[2]

GROUP_KINDS: dict[str, PluginKind] = {
    "vally.backends": "backend",
    "vally.executors": "executor",
    "vally.graders": "grader",
    "vally.reporters": "reporter",
    "vally.eval_providers": "eval_provider",
    "vally.shard_strategies": "shard_strategy",
    "vally.llm_providers": "llm_provider",
    "vally.exporters": "exporter",
}

WORKSPACE_GRADERS = [
    "file-contains",
    "file-exists",
    "file-matches",
    "file-not-contains",
    "file-not-exists",
    "file-not-matches",
    "harbor-verifier",
    "program",
    "run-command",
]

DECLARED: dict[tuple[str, str], tuple[str, ...]] = {
    ("executor", "command"): ("multi-turn", "needs-workspace"),
    ("executor", "mock"): ("multi-turn", "needs-workspace"),
    ("executor", "chat-agent"): ("needs-llm", "multi-turn", "needs-workspace"),
    ("executor", "claude-code"): ("multi-turn", "needs-workspace"),
    ("executor", "codex"): ("multi-turn", "needs-workspace"),
    ("executor", "copilot"): ("needs-llm", "multi-turn", "needs-workspace"),
    ("executor", "copilot-sdk"): ("needs-llm", "multi-turn", "needs-workspace"),
    ("reporter", "jsonl"): ("critical",),
    ("grader", "prompt"): ("needs-llm", "pairwise"),
    **{("grader", name): ("needs-workspace",) for name in WORKSPACE_GRADERS},
}
"""The capabilities of the built-ins that have any; every other built-in declares none."""


def _builtin_entry_points() -> list[tuple[PluginKind, str, str]]:
    with (ROOT / "pyproject.toml").open("rb") as file:
        groups = tomllib.load(file)["project"]["entry-points"]
    return [
        (GROUP_KINDS[group], name, target)
        for group, entries in groups.items()
        if group in GROUP_KINDS
        for name, target in entries.items()
    ]


def _load(target: str) -> Any:
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


# --------------------------------------------------------------------------- built-ins


@pytest.mark.parametrize(("kind", "name", "target"), _builtin_entry_points(), ids=lambda v: str(v))
def test_every_builtin_declares_its_capabilities(kind: PluginKind, name: str, target: str) -> None:
    cls = _load(target)
    assert isinstance(cls.metadata, metadata_model(kind)), (
        f"{name}: metadata should be a {metadata_model(kind).__name__}"
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        assert capability_names(cls) == DECLARED.get((kind, name), ())
    for legacy in LEGACY_DECLARATIONS:
        if legacy.kind == kind and legacy.attribute != "judge_pair":
            assert not hasattr(cls, legacy.attribute), f"{name} still sets {legacy.attribute}"


def test_the_capability_table_names_only_builtins() -> None:
    known = {(kind, name) for kind, name, _ in _builtin_entry_points()}
    assert set(DECLARED) <= known


def test_command_executor_is_multi_turn_only_with_resume() -> None:
    from vally_builtin.executors.command import CommandExecutor

    single = CommandExecutor(CommandExecutor.Config(command=["agent"]))
    resumable = CommandExecutor(CommandExecutor.Config(command=["agent"], resume=["agent", "-r"]))
    assert supports_turns(CommandExecutor)
    assert not supports_turns(single)
    assert supports_turns(resumable)
    assert needs_workspace(single) and not needs_llm(single)


# --------------------------------------------------------------------------- metadata only


class LookAlikeExecutor(BaseExecutor[EmptyConfig]):
    """Class attributes named like capabilities are not declarations."""

    metadata: ClassVar[ExecutorMetadata] = ExecutorMetadata(name="look-alike")
    needs_llm = True
    multi_turn = True
    needs_workspace = True


class DeclaredExecutor(BaseExecutor[EmptyConfig]):
    metadata: ClassVar[ExecutorMetadata] = ExecutorMetadata(
        name="declared", needs_llm=True, multi_turn=True, needs_workspace=True
    )


def test_functions_answer_from_metadata_only() -> None:
    for plugin in (LookAlikeExecutor, LookAlikeExecutor()):
        assert not needs_llm(plugin)
        assert not supports_turns(plugin)
        assert not needs_workspace(plugin)
        assert capability_names(plugin) == ()
    for plugin in (DeclaredExecutor, DeclaredExecutor()):
        assert needs_llm(plugin) and supports_turns(plugin) and needs_workspace(plugin)


def test_capabilities_belong_to_their_kinds() -> None:
    reporter = ReporterMetadata(name="r", critical=True)
    grader = GraderMetadata(name="g", needs_llm=True, needs_workspace=True, pairwise=True)

    class Holder:
        def __init__(self, metadata: PluginMetadata) -> None:
            self.metadata = metadata

    assert is_critical(Holder(reporter)) and not needs_llm(Holder(reporter))
    assert not is_critical(Holder(grader)) and not supports_turns(Holder(grader))
    assert is_pairwise(Holder(grader)) and needs_llm(Holder(grader))
    assert not is_pairwise(Holder(ExecutorMetadata(name="e", needs_llm=True)))


def test_plugins_without_metadata_have_no_capabilities() -> None:
    class Observer:
        critical = True

    assert declared_metadata(Observer()) is None
    assert not is_critical(Observer())
    assert capability_names(Observer) == ()


def test_plain_metadata_becomes_the_kinds_model() -> None:
    class Plain(BaseExecutor[EmptyConfig]):
        metadata = PluginMetadata(name="plain", kind="executor", description="d")

    declared = declared_metadata(Plain)
    assert isinstance(declared, ExecutorMetadata)
    assert (declared.name, declared.description) == ("plain", "d")
    assert not (declared.needs_llm or declared.multi_turn or declared.needs_workspace)


def test_metadata_models_are_frozen() -> None:
    from pydantic import ValidationError

    metadata = ExecutorMetadata(name="x")
    with pytest.raises(ValidationError):
        metadata.multi_turn = True  # type: ignore[misc]
    with pytest.raises(ValidationError, match="kind"):
        ExecutorMetadata(name="x", kind="grader")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- legacy


class LegacyExecutor(BaseExecutor[EmptyConfig]):
    metadata: ClassVar[PluginMetadata] = PluginMetadata(name="legacy-exec", kind="executor")
    supports_turns = True
    requires_llm = True


class LegacyReporter(BaseReporter[EmptyConfig]):
    metadata: ClassVar[PluginMetadata] = PluginMetadata(name="legacy-rep", kind="reporter")
    critical = True


class LegacyJudge(BaseGrader[EmptyConfig]):
    metadata: ClassVar[GraderMetadata] = GraderMetadata(name="legacy-judge")

    async def judge_pair(self, context: Any) -> Any:
        raise NotImplementedError


def test_legacy_executor_attributes_still_work_and_warn() -> None:
    for plugin in (LegacyExecutor, LegacyExecutor()):
        with pytest.warns(DeprecationWarning) as record:
            assert supports_turns(plugin)
            assert needs_llm(plugin)
            assert capability_names(plugin) == ("needs-llm", "multi-turn")
        messages = {str(w.message) for w in record}
        assert any(
            "'legacy-exec'" in m and "supports_turns" in m and "multi_turn=True" in m
            for m in messages
        )
        assert any(
            "requires_llm" in m and "ExecutorMetadata(..., needs_llm=True)" in m for m in messages
        )


def test_legacy_critical_reporter_still_fails_the_run_and_warns() -> None:
    session = Session(environ={})
    with pytest.warns(DeprecationWarning, match=r"'legacy-rep'.*critical.*ReporterMetadata"):
        session.register_observer(LegacyReporter(), "legacy")
    assert session.emitter.critical == {"legacy"}


def test_legacy_judge_pair_method_counts_as_pairwise_and_warns() -> None:
    with pytest.warns(DeprecationWarning, match=r"'legacy-judge'.*judge_pair.*pairwise=True"):
        assert is_pairwise(LegacyJudge)


def test_grader_behavior_is_folded_into_the_new_fields() -> None:
    with pytest.warns(DeprecationWarning, match=r"'old-judge'.*GraderBehavior.*needs_llm=True"):
        metadata = GraderMetadata(
            name="old-judge",
            behavior=GraderBehavior(
                requires_llm_client=True, requires_workspace=True, execution="comparative"
            ),
        )
    assert (metadata.needs_llm, metadata.needs_workspace, metadata.pairwise) == (True,) * 3
    with pytest.warns(DeprecationWarning):
        from_dict = GraderMetadata(name="ws", behavior={"requires_workspace": True})
    assert from_dict.needs_workspace and not from_dict.needs_llm and not from_dict.pairwise
    assert "behavior" not in GraderMetadata.model_fields


def test_false_or_already_declared_legacy_attributes_do_not_warn() -> None:
    class SingleTurn(BaseExecutor[EmptyConfig]):
        metadata = PluginMetadata(name="single", kind="executor")
        supports_turns = False

    class Migrated(BaseReporter[EmptyConfig]):
        metadata = ReporterMetadata(name="migrated", critical=True)
        critical = True

    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        assert not supports_turns(SingleTurn)
        assert is_critical(Migrated)


# --------------------------------------------------------------------------- readers


def test_register_observer_hands_criticality_to_the_emitter() -> None:
    class Failing(BaseReporter[EmptyConfig]):
        metadata = ReporterMetadata(name="failing", critical=True)

        @hookimpl
        def vally_run_start(self, run: Any) -> None:
            raise RuntimeError("disk full")

    class Internal:
        @hookimpl
        def vally_run_start(self, run: Any) -> None:
            raise RuntimeError("internal writer failed")

    session = Session(environ={})
    session.register_observer(Failing(), "failing")
    with pytest.raises(RuntimeError, match="disk full"):
        session.emitter.emit("vally_run_start", run=None)
    assert [f.critical for f in session.emitter.failures] == [True]

    quiet = Session(environ={})
    quiet.register_observer(Failing(), "failing", critical=False)
    quiet.emitter.emit("vally_run_start", run=None)
    assert [f.critical for f in quiet.emitter.failures] == [False]

    internal = Session(environ={})
    internal.register_observer(Internal(), "internal", critical=True)
    with pytest.raises(RuntimeError, match="internal writer failed"):
        internal.emitter.emit("vally_run_start", run=None)


def test_pairwise_without_judge_pair_is_rejected_at_registration() -> None:
    class Pretender(BaseGrader[EmptyConfig]):
        metadata = GraderMetadata(name="pretender", pairwise=True)

    with pytest.raises(PluginValidationError, match="pairwise=True but has no judge_pair"):
        make_session(Pretender)


class NeedsFiles(BaseGrader[EmptyConfig]):
    """Declares the workspace but never checks for it: the kernel must not call it."""

    metadata: ClassVar[GraderMetadata] = GraderMetadata(name="needs-files", needs_workspace=True)
    calls: ClassVar[int] = 0

    async def grade(self, context: GradeContext) -> GraderResult:
        NeedsFiles.calls += 1
        assert context.sandbox is not None
        data = await context.sandbox.read_file("out.txt")
        return self.result(context, passed=data == b"ok", evidence="read out.txt")


def test_grading_without_a_workspace_errors_graders_that_need_one() -> None:
    config = GraderConfig(type="needs-files")
    trajectory = make_trajectory("done")
    NeedsFiles.calls = 0

    async def grade(sandbox: Any) -> Any:
        return await grade_trial(
            trajectory,
            trajectory.stimulus,
            [config],
            create_grader=lambda _: NeedsFiles(),
            sandbox=sandbox,
        )

    without = asyncio.run(grade(None))
    (result,) = without.details
    assert result.status == "error" and not result.passed
    assert "needs the trial workspace" in result.evidence
    assert NeedsFiles.calls == 0
    with_files = asyncio.run(grade(FakeSandbox(files={"out.txt": "ok"})))
    assert with_files.passed and NeedsFiles.calls == 1


def test_vally_grade_names_graders_that_need_a_workspace_before_grading() -> None:
    from vally.models.spec import EvalSpec
    from vally_regrade.grading import workspace_warnings

    session = make_session(NeedsFiles)
    spec = EvalSpec.model_validate(
        {
            "name": "ws",
            "graders": [{"type": "output-contains", "config": {"substring": "x"}}],
            "stimuli": [
                {"name": "a", "prompt": "p", "graders": [{"type": "needs-files"}]},
                {
                    "name": "b",
                    "prompt": "q",
                    "graders": [{"type": "file-exists", "config": {"path": "f"}}],
                },
                {"name": "c", "prompt": "r"},
            ],
        }
    )
    warnings_ = workspace_warnings(session, spec, spec.stimuli, "ws.yaml")
    assert len(warnings_) == 2
    assert warnings_[0].startswith("grader 'needs-files' (needs-files) of ws.yaml")
    assert "(stimuli: a)" in warnings_[0] and "--workspace" in warnings_[0]
    assert "'file-exists'" in warnings_[1] and "(stimuli: b)" in warnings_[1]
    assert workspace_warnings(session, spec, [spec.stimuli[2]], "ws.yaml") == []


LEGACY_READS = re.compile(
    r"getattr\([^)]*[\"'](supports_turns|requires_llm|requires_llm_client|requires_workspace"
    r"|critical|behavior)[\"']|isinstance\([^)]*PairwiseJudge\)|\.behavior\b"
)


def test_only_the_capabilities_module_answers_capability_questions() -> None:
    kernel = ROOT / "core" / "vally"
    allowed = {kernel / "plugins" / "capabilities.py", kernel / "contracts" / "metadata.py"}
    offenders = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in sorted(kernel.rglob("*.py"))
        if path not in allowed
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if LEGACY_READS.search(line)
    ]
    assert offenders == []
    assert capabilities.__doc__ and "only place" in capabilities.__doc__


def test_plugins_list_shows_capabilities() -> None:
    rows = {row.name: row for row in Session(environ={}).list_plugins("executor", warn=False)}
    assert rows["chat-agent"].as_dict()["capabilities"] == (
        "needs-llm",
        "multi-turn",
        "needs-workspace",
    )


# --------------------------------------------------------------------------- end to end

EXECUTOR_FILE = """
from vally import (AssistantMessageEvent, BaseExecutor, ChatMessage, ChatRequest,
                   ExecutorMetadata, MessageData, Trajectory)


class AskingExecutor(BaseExecutor):
    metadata = ExecutorMetadata(name="asking", description="asks the LLM", needs_llm={needs})

    async def execute(self, stimulus, sandbox, options):
        if options.llm is None:
            answer = "no provider"
        else:
            request = ChatRequest(
                model="m", messages=[ChatMessage(role="user", content=stimulus.prompts[0])]
            )
            answer = (await options.llm.chat(request)).message.content
        return Trajectory(
            stimulus=stimulus,
            events=[AssistantMessageEvent(data=MessageData(content=answer))],
            output=answer,
            work_dir=sandbox.workdir,
        )


def register(registrar):
    registrar.executor(AskingExecutor)
"""

LLM_FILE = """
from pydantic import BaseModel, ConfigDict

from vally import ChatMessage, ChatResponse, PluginMetadata


class EchoLLM:
    metadata = PluginMetadata(name="echo-llm", kind="llm_provider")

    class Config(BaseModel):
        model_config = ConfigDict(extra="allow")

    def __init__(self, config=None):
        self.config = config

    async def chat(self, request):
        text = "llm answered: " + request.messages[-1].content
        message = ChatMessage(role="assistant", content=text)
        return ChatResponse(message=message, finish_reason="stop")

    async def aclose(self):
        pass


def register(registrar):
    registrar.llm_provider(EchoLLM)
"""

REPORTER_FILE = """
from vally import BaseReporter, ReporterMetadata, hookimpl


class BrokenReporter(BaseReporter):
    metadata = ReporterMetadata(name="broken", description="fails", critical={critical})

    @hookimpl
    def vally_trial_end(self, run, record):
        raise RuntimeError("the reporter broke")


def register(registrar):
    registrar.reporter(BrokenReporter)
"""

SPEC = """
name: caps
defaults:
  executor: asking
stimuli:
  - name: ask
    prompt: hello
    graders:
      - {type: output-contains, config: {substring: "llm answered: hello"}}
"""


def _project(tmp_path: Path, *, needs: bool = True, critical: bool = False) -> Path:
    files = {
        ".vally.yaml": "llm: {provider: echo-llm}\nplugins: {llm_provider: [./echo_llm.py]}\n",
        "eval.yaml": SPEC,
        "asking.py": EXECUTOR_FILE.format(needs=needs),
        "echo_llm.py": LLM_FILE,
        "broken.py": REPORTER_FILE.format(critical=critical),
    }
    for name, text in files.items():
        (tmp_path / name).write_text(textwrap.dedent(text), encoding="utf-8")
    return tmp_path


def _eval(project: Path, *extra: str) -> tuple[subprocess.CompletedProcess[str], list[Any]]:
    out = project / "out"
    args = ["eval", "-e", "eval.yaml", "--executor-plugin", "./asking.py", "--output-dir", str(out)]
    proc = subprocess.run(
        [sys.executable, "-m", "vally", *args, *extra],
        cwd=project,
        env={**os.environ, "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    records: list[Any] = []
    for results in out.glob("*/results.jsonl"):
        records += [json.loads(line) for line in results.read_text().splitlines()]
    return proc, records


@pytest.mark.slow
def test_file_plugin_executor_declaring_needs_llm_gets_the_provider(tmp_path: Path) -> None:
    proc, records = _eval(_project(tmp_path, needs=True))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (record,) = records
    assert record["trajectory"]["output"] == "llm answered: hello"
    assert record["gradeResult"]["passed"] is True


@pytest.mark.slow
def test_executor_without_needs_llm_gets_no_provider(tmp_path: Path) -> None:
    proc, records = _eval(_project(tmp_path, needs=False))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (record,) = records
    assert record["trajectory"]["output"] == "no provider"
    assert record["gradeResult"]["passed"] is False


@pytest.mark.slow
def test_critical_file_reporter_failure_fails_the_run(tmp_path: Path) -> None:
    critical, _ = _eval(_project(tmp_path, critical=True), "--reporter-plugin", "./broken.py")
    assert critical.returncode == 1
    assert "the reporter broke" in critical.stdout + critical.stderr


@pytest.mark.slow
def test_non_critical_file_reporter_failure_is_a_warning(tmp_path: Path) -> None:
    proc, records = _eval(_project(tmp_path, critical=False), "--reporter-plugin", "./broken.py")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "the reporter broke" in proc.stdout + proc.stderr
    assert len(records) == 1
