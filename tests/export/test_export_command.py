"""``vally export``: the harbor exporter's task folders, its refusals, and exporter plugins in
every specifier form, through the real CLI."""

from __future__ import annotations

import tomllib
from pathlib import Path

from tests.export.helpers import SHELL_AGENT, vally

SPEC = (
    "name: greet\ntags: {area: files}\n"
    + SHELL_AGENT
    + """environment:
  commands: [mkdir -p seed]
scoring: {threshold: 0.5}
stimuli:
  - name: writes-greeting
    prompt: echo hello > greeting.txt
    tags: {level: easy}
    graders:
      - {type: file-exists, config: {path: "*.txt"}}
      - {type: run-command, required: true,
         config: {command: [grep, -q, hello, greeting.txt], env: {LANG: C}}}
"""
)

LIST_EXPORTER = '''
"""An exporter that lists the stimuli in one text file."""

from vally import EmptyConfig, PluginMetadata


class ListExporter:
    """Writes stimuli.txt."""

    metadata = PluginMetadata(name="stimulus-list", kind="exporter", description="names")
    Config = EmptyConfig

    def __init__(self, config=None):
        self.config = config

    def export(self, loaded, output_dir):
        path = output_dir / "stimuli.txt"
        path.write_text("\\n".join(s.name for s in loaded.spec.stimuli), encoding="utf-8")
        return [path]


def register(registrar):
    registrar.exporter(ListExporter)
'''


def _spec(tmp_path: Path, text: str = SPEC) -> Path:
    path = tmp_path / "eval.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_harbor_export_writes_a_task_folder_per_stimulus(tmp_path: Path) -> None:
    _spec(tmp_path)
    done = vally(
        "export", "-e", "eval.yaml", "--exporter", "harbor", "--output-dir", "tasks",
        "--", "base_image=python:3.12-slim", "agent_timeout=90", cwd=tmp_path,
    )  # fmt: skip
    assert done.code == 0, done.stderr
    assert "writes-greeting" in done.stdout
    task = tmp_path / "tasks" / "writes-greeting"
    files = sorted(p.relative_to(task).as_posix() for p in task.rglob("*") if p.is_file())
    assert files == ["environment/Dockerfile", "instruction.md", "task.toml", "tests/test.sh"]
    settings = tomllib.loads((task / "task.toml").read_text(encoding="utf-8"))
    assert settings["agent"]["timeout_sec"] == 90.0
    assert settings["verifier"]["timeout_sec"] == 120.0
    assert sorted(settings["metadata"]["tags"]) == ["easy", "files"]
    assert (task / "instruction.md").read_text(encoding="utf-8") == "echo hello > greeting.txt\n"
    dockerfile = (task / "environment" / "Dockerfile").read_text(encoding="utf-8").splitlines()
    assert dockerfile == ["FROM python:3.12-slim", "WORKDIR /app", "RUN mkdir -p seed"]
    script = (task / "tests" / "test.sh").read_text(encoding="utf-8")
    assert script.startswith("#!/bin/sh\n") and "/logs/verifier/reward.txt" in script
    assert "ls -d *.txt" in script and "LANG=C" in script and "required_failed=1" in script
    assert (task / "tests" / "test.sh").stat().st_mode & 0o111


def test_what_harbor_cannot_express_is_refused_before_anything_is_written(
    tmp_path: Path,
) -> None:
    text = (
        SPEC
        + "  - name: reads-output\n    prompt: hi\n"
        + ("    graders: [{type: output-contains, config: {substring: hi}}]\n")
    )
    _spec(tmp_path, text)
    done = vally("export", "-e", "eval.yaml", "--exporter", "harbor", cwd=tmp_path)
    assert done.code == 1
    assert "stimulus 'reads-output'" in done.stderr and "output-contains" in done.stderr
    assert "Harbor" in done.stderr and "hint:" in done.stderr
    assert not (tmp_path / "vally-export" / "writes-greeting").exists()


def test_bad_exporter_arguments_and_names_say_what_to_do(tmp_path: Path) -> None:
    _spec(tmp_path)
    bad_key = vally("export", "-e", "eval.yaml", "--exporter", "harbor", "--", "nope=1",
                    cwd=tmp_path)  # fmt: skip
    assert bad_key.code == 1 and "nope" in bad_key.stderr and "base_image" in bad_key.stderr
    no_equals = vally("export", "-e", "eval.yaml", "--exporter", "harbor", "--", "nope",
                      cwd=tmp_path)  # fmt: skip
    assert no_equals.code == 1 and "KEY=value" in no_equals.stderr
    typo = vally("export", "-e", "eval.yaml", "--exporter", "harbr", cwd=tmp_path)
    assert typo.code == 1 and "did you mean 'harbor'" in typo.stderr
    missing = vally("export", "-e", "nothing.yaml", "--exporter", "harbor", cwd=tmp_path)
    assert missing.code == 1 and "nothing.yaml" in missing.stderr
    assert not (tmp_path / "vally-export").exists()


def test_exporter_plugins_load_from_a_file_a_module_and_a_distribution(tmp_path: Path) -> None:
    _spec(tmp_path)
    plugin_dir = tmp_path / "plugins"
    plugin_dir.mkdir()
    (plugin_dir / "list_exporter.py").write_text(LIST_EXPORTER, encoding="utf-8")
    by_file = vally("export", "-e", "eval.yaml", "--exporter", "./plugins/list_exporter.py",
                    "-o", "a", cwd=tmp_path)  # fmt: skip
    assert by_file.code == 0, by_file.stderr
    assert (tmp_path / "a" / "stimuli.txt").read_text(encoding="utf-8") == "writes-greeting"
    by_module = vally("export", "-e", "eval.yaml", "--exporter", "list_exporter:ListExporter",
                      "-o", "b", cwd=tmp_path, env={"PYTHONPATH": str(plugin_dir)})  # fmt: skip
    assert by_module.code == 0, by_module.stderr
    assert (tmp_path / "b" / "stimuli.txt").is_file()
    by_distribution = vally("export", "-e", "eval.yaml", "--exporter", "vally", "-o", "c",
                            cwd=tmp_path)  # fmt: skip
    assert by_distribution.code == 0, by_distribution.stderr
    assert (tmp_path / "c" / "writes-greeting" / "task.toml").is_file()
    listed = vally("plugins", "list", "--kind", "exporter", cwd=tmp_path)
    assert listed.code == 0 and "harbor" in listed.stdout
