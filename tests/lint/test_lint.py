"""``vally lint``: every diagnostic on its own fixture, strict mode, JSON output, skills."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import ClassVar

import pytest
from typer.testing import CliRunner

from vally.cli.app import app
from vally.contracts.bases import BaseGrader, EmptyConfig, StrictConfig
from vally.contracts.metadata import GraderMetadata
from vally.errors import ConfigError
from vally.models.project import ProjectConfig
from vally.plugins.session import Session
from vally_authoring.lint.catalogs import MappingGraderCatalog, SessionGraderCatalog
from vally_authoring.lint.diagnostics import Diagnostic
from vally_authoring.lint.run import lint_path, run_lint, select_eval_files
from vally_authoring.lint.skill_checks import lint_skills
from vally_authoring.lint.spec_checks import lint_eval_file

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "specs"
LINT = FIXTURES / "lint"


class ContainsConfig(StrictConfig):
    substring: str


class ContainsGrader(BaseGrader[ContainsConfig]):
    metadata: ClassVar[GraderMetadata] = GraderMetadata(name="contains", description="test")
    Config = ContainsConfig


class JudgeGrader(BaseGrader[EmptyConfig]):
    metadata: ClassVar[GraderMetadata] = GraderMetadata(
        name="judge",
        description="test judge",
        needs_llm=True,
        determinism="llm",
        cost_profile="high",
    )
    Config = EmptyConfig


CATALOG = MappingGraderCatalog({"contains": ContainsGrader, "judge": JudgeGrader})


def lint(name: str) -> list[Diagnostic]:
    return lint_eval_file(LINT / f"{name}.eval.yaml", CATALOG, project=ProjectConfig())


def codes(diagnostics: list[Diagnostic]) -> list[tuple[str, str, int | None]]:
    return [(d.code, d.severity, d.line) for d in diagnostics]


def test_clean_spec_has_no_diagnostics() -> None:
    assert lint("clean") == []


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("unknown-grader-type", [("unknown-grader-type", "error", 7)]),
        ("invalid-grader-config", [("invalid-grader-config", "error", 8)]),
        ("invalid-scoring-weight-key", [("invalid-scoring-weight-key", "error", 10)]),
        (
            "invalid-constraint-value",
            [("invalid-constraint-value", "error", 5), ("invalid-constraint-value", "error", 6)],
        ),
        ("environment-file-not-found", [("environment-file-not-found", "error", 7)]),
        ("duplicate-stimulus-name", [("duplicate-stimulus-name", "error", 5)]),
        (
            "duplicate-grader-type-in-stimulus",
            [("duplicate-grader-type-in-stimulus", "warning", 7)],
        ),
        ("rubric-without-llm-judge", [("rubric-without-llm-judge", "warning", 4)]),
        ("path-escape", [("path-escape", "error", 4), ("path-escape", "error", 8)]),
        ("invalid-spec", [("invalid-spec", "error", 4)]),
    ],
)
def test_each_diagnostic(name: str, expected: list[tuple[str, str, int]]) -> None:
    assert codes(lint(name)) == expected


def test_messages_carry_suggestions() -> None:
    (unknown,) = lint("unknown-grader-type")
    assert "did you mean 'contains'?" in unknown.message
    (config,) = lint("invalid-grader-config")
    assert "unknown key 'substrng'" in config.message
    assert "did you mean 'substring'?" in config.message
    (weight,) = lint("invalid-scoring-weight-key")
    assert "'judge'" in weight.message
    (spec,) = lint("invalid-spec")
    assert "did you mean 'graders'?" in spec.message
    assert spec.column == 5
    constraint = lint("invalid-constraint-value")
    assert "negative" in constraint[0].message
    assert "'bash' is in both expect_tools and reject_tools" in constraint[1].message


def test_missing_required_grader_config_key(tmp_path: Path) -> None:
    text = (LINT / "clean.eval.yaml").read_text().replace("config: { substring: hello }", "{}")
    text = text.replace("      - type: contains\n        {}", "      - type: contains")
    path = tmp_path / "missing.eval.yaml"
    path.write_text(text)
    diags = lint_eval_file(path, CATALOG, project=ProjectConfig())
    # the copied spec's fixtures folder is not next to it any more
    assert [(d.code, d.line) for d in diags] == [
        ("environment-file-not-found", 4),
        ("invalid-grader-config", 10),
    ]
    assert "required field 'substring' is missing" in diags[1].message


def test_lint_keeps_going_after_a_bad_file() -> None:
    files = [LINT / "invalid-spec.eval.yaml", LINT / "duplicate-stimulus-name.eval.yaml"]
    result = run_lint(files, CATALOG, project=ProjectConfig())
    assert [d.code for d in result.diagnostics] == ["invalid-spec", "duplicate-stimulus-name"]
    assert result.errors == 2
    assert result.exit_code() == 1


def test_warnings_pass_unless_strict() -> None:
    result = run_lint(
        [LINT / "rubric-without-llm-judge.eval.yaml"], CATALOG, project=ProjectConfig()
    )
    assert (result.errors, result.warnings) == (0, 1)
    assert result.exit_code() == 0
    assert result.exit_code(strict=True) == 1


def test_skill_checks() -> None:
    skills, diagnostics = lint_skills(FIXTURES / "skills")
    assert [p.name for p in skills] == ["empty-name", "good-skill", "no-frontmatter"]
    assert [(d.code, Path(d.file).parent.name) for d in diagnostics] == [
        ("skill-invalid", "empty-name"),
        ("skill-invalid", "no-frontmatter"),
    ]
    assert "'name'" in diagnostics[0].message
    assert "frontmatter" in diagnostics[1].message


def test_session_catalog_with_registered_grader(tmp_path: Path) -> None:
    session = Session(ProjectConfig(), tmp_path)
    session.registrar().grader(ContainsGrader)
    catalog = SessionGraderCatalog(session)
    assert "contains" in set(catalog.known_names())
    assert codes(lint_eval_file(LINT / "invalid-grader-config.eval.yaml", catalog,
                                project=ProjectConfig())) == [
        ("invalid-grader-config", "error", 8)
    ]


# --------------------------------------------------------------------------- CLI

runner = CliRunner()


def _project(tmp_path: Path, spec: str, *, vally_yaml: str = "paths: { evals: [evals] }\n") -> Path:
    (tmp_path / ".vally.yaml").write_text(vally_yaml)
    folder = tmp_path / "evals" / "hello"
    folder.mkdir(parents=True)
    (folder / "eval.yaml").write_text(spec)
    return folder / "eval.yaml"


GOOD = """\
stimuli:
  - name: one
    prompt: Say hello.
    graders:
      - type: output-contains
        config: { substring: hello }
"""


def test_cli_discovers_through_project(tmp_path: Path) -> None:
    _project(tmp_path, GOOD)
    result = runner.invoke(app, ["lint", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "0 error(s), 0 warning(s) in 1 eval file(s)" in result.output


def test_cli_reports_builtin_grader_config_errors_as_json(tmp_path: Path) -> None:
    spec = _project(tmp_path, GOOD.replace("substring: hello", "substrin: hello"))
    result = runner.invoke(app, ["lint", str(tmp_path), "--format", "json"])
    assert result.exit_code == 1
    payload = json.loads(result.stdout)
    assert payload["errors"] == 1 and payload["warnings"] == 0
    (diag,) = payload["diagnostics"]
    assert diag["code"] == "invalid-grader-config"
    assert diag["line"] == 6
    assert diag["file"] == str(spec)
    assert "did you mean 'substring'?" in diag["message"]


def test_cli_strict_fails_on_warning(tmp_path: Path) -> None:
    spec = GOOD.replace("    graders:", "    rubric: [Polite]\n    graders:")
    _project(tmp_path, spec)
    ok = runner.invoke(app, ["lint", str(tmp_path)])
    assert ok.exit_code == 0, ok.output
    assert "warning[rubric-without-llm-judge]" in ok.output
    strict = runner.invoke(app, ["lint", str(tmp_path), "--strict"])
    assert strict.exit_code == 1


def test_cli_eval_spec_flag_and_unknown_type(tmp_path: Path) -> None:
    spec = tmp_path / "x.eval.yaml"
    spec.write_text(GOOD.replace("output-contains", "output-containz"))
    result = runner.invoke(app, ["lint", str(tmp_path / "empty"), "-e", str(spec)])
    # the PATH does not exist: a clean error, no traceback
    assert result.exit_code == 1
    assert "path not found" in result.output
    result = runner.invoke(app, ["lint", str(tmp_path), "-e", str(spec)])
    assert result.exit_code == 1
    assert "error[unknown-grader-type]" in result.output
    assert "did you mean 'output-contains'?" in result.output
    assert "Traceback" not in result.output


def test_cli_grader_plugin_makes_type_known(tmp_path: Path) -> None:
    plugin = tmp_path / "my_grader.py"
    plugin.write_text(
        "from typing import ClassVar\n"
        "from vally import BaseGrader, EmptyConfig, GraderMetadata\n\n"
        "class Shouty(BaseGrader[EmptyConfig]):\n"
        "    metadata: ClassVar[GraderMetadata] = GraderMetadata(name='shouty', description='x')\n"
        "    Config = EmptyConfig\n\n"
        "def register(registrar):\n"
        "    registrar.grader(Shouty)\n"
    )
    spec = tmp_path / "s.eval.yaml"
    spec.write_text(GOOD.replace("output-contains\n        config: { substring: hello }", "shouty"))
    without = runner.invoke(app, ["lint", str(tmp_path), "-e", str(spec)])
    assert without.exit_code == 1
    assert "unknown-grader-type" in without.output
    with_plugin = runner.invoke(
        app, ["lint", str(tmp_path), "-e", str(spec), "--grader-plugin", str(plugin)]
    )
    assert with_plugin.exit_code == 0, with_plugin.output


def test_cli_checks_skills_under_path(tmp_path: Path) -> None:
    shutil.copytree(FIXTURES / "skills", tmp_path / "skills")
    result = runner.invoke(app, ["lint", str(tmp_path), "--verbose"])
    assert result.exit_code == 1
    assert result.output.count("error[skill-invalid]") == 2
    assert "checked skill" in result.output
    shutil.rmtree(tmp_path / "skills" / "empty-name")
    shutil.rmtree(tmp_path / "skills" / "no-frontmatter")
    assert runner.invoke(app, ["lint", str(tmp_path)]).exit_code == 0


def test_cli_reports_yaml_syntax_error_and_continues(tmp_path: Path) -> None:
    broken = tmp_path / "broken.eval.yaml"
    broken.write_text("stimuli:\n  - name: a\n    prompt: [oops\n")
    dup = tmp_path / "dup.eval.yaml"
    dup.write_text(GOOD + GOOD.split("\n", 1)[1])
    result = runner.invoke(app, ["lint", str(tmp_path), "-e", str(broken), "-e", str(dup)])
    assert result.exit_code == 1
    assert f"{broken}:4:1: error[invalid-spec]: invalid YAML" in result.output
    assert f"{dup}:7:11: error[duplicate-stimulus-name]" in result.output
    assert "Traceback" not in result.output


def test_cli_checks_executor_name_and_config(tmp_path: Path) -> None:
    spec = tmp_path / "x.eval.yaml"
    spec.write_text(
        "defaults:\n  executor:\n    name: command\n    config:\n      comand: [python3]\n" + GOOD
    )
    result = runner.invoke(app, ["lint", str(tmp_path), "-e", str(spec)])
    assert result.exit_code == 1
    assert f"{spec}:5:7: error[invalid-executor-config]" in result.output
    assert "did you mean 'command'?" in result.output
    spec.write_text("defaults: { executor: comand }\n" + GOOD)
    result = runner.invoke(app, ["lint", str(tmp_path), "-e", str(spec)])
    assert f"{spec}:1:23: error[unknown-executor]: unknown executor 'comand'" in result.output
    spec.write_text("defaults: { executor: mock }\n" + GOOD)
    assert runner.invoke(app, ["lint", str(tmp_path), "-e", str(spec)]).exit_code == 0


def test_src_leaving_the_eval_folder_is_a_path_escape(tmp_path: Path) -> None:
    (tmp_path / "outside.txt").write_text("x")
    folder = tmp_path / "e"
    folder.mkdir()
    spec = folder / "eval.yaml"
    spec.write_text(
        "defaults: {executor: mock}\nstimuli:\n  - name: a\n    prompt: p\n"
        "    environment:\n      files: [{src: ../outside.txt}]\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "vally", "lint", "-e", str(spec), "--format", "json"],
        cwd=folder, capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 1
    found = json.loads(proc.stdout)["diagnostics"]
    assert [(d["code"], d["line"]) for d in found] == [("path-escape", 6)]


def test_select_eval_files_by_flag_file_project_or_folder(tmp_path: Path) -> None:
    (tmp_path / "evals" / "sub").mkdir(parents=True)
    for name in ("evals/eval.yaml", "evals/sub/eval.yaml", "loose.yaml"):
        (tmp_path / name).write_text(GOOD)
    project = ProjectConfig()
    flagged = select_eval_files(
        tmp_path, [Path("evals/sub")], cwd=tmp_path, project=project, project_root=None
    )
    assert flagged == [tmp_path / "evals/sub/eval.yaml"]
    single = tmp_path / "loose.yaml"
    assert select_eval_files(
        single, [], cwd=tmp_path, project=project, project_root=None
    ) == [single]
    found = select_eval_files(tmp_path, [], cwd=tmp_path, project=project, project_root=None)
    assert [p.relative_to(tmp_path).as_posix() for p in found] == [
        "evals/eval.yaml", "evals/sub/eval.yaml"
    ]
    with pytest.raises(ConfigError, match="--eval-spec missing: no such file"):
        select_eval_files(
            tmp_path, [Path("missing")], cwd=tmp_path, project=project, project_root=None
        )


def test_lint_path_as_a_library(tmp_path: Path) -> None:
    (tmp_path / "eval.yaml").write_text(GOOD.replace("output-contains", "output-contain"))
    result = lint_path(tmp_path, cwd=tmp_path)
    assert result.eval_files == [tmp_path / "eval.yaml"]
    assert [d.code for d in result.diagnostics] == ["unknown-grader-type"]
    assert "did you mean 'output-contains'" in result.diagnostics[0].message
    with pytest.raises(ConfigError, match="path not found"):
        lint_path(tmp_path / "nope", cwd=tmp_path)
