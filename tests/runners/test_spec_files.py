"""The spec's files travel with a distributed run: packed once on the driver, unpacked on
the node, read there by the trial (workspace fixtures, grader files) while the driver's
folder is out of sight."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import json
import pickle
import tarfile
import tempfile
from pathlib import Path
from typing import Any, ClassVar

import pytest

from vally import (
    ConfigError,
    EmptyConfig,
    EvalRequest,
    PluginMetadata,
    SetupError,
    SpecArchive,
    TrialDispatch,
    run_trial_job,
)
from vally.engine.evals import prepare_eval
from vally.engine.planning import spec_files
from vally.engine.records.run_folder import create_run_dir
from vally.models.spec import GitConfig

SPEC = """\
name: shipped
environment:
  files: [{src: fixtures/greeting.txt, dest: greeting.txt}]
defaults:
  runs: 2
  executor: {name: mock, config: {output: done}}
stimuli:
  - name: reads-fixtures
    prompt: x
    graders:
      - type: run-command
        config:
          command: 'test "$(cat greeting.txt)" = hello && sh check.sh'
          files: [{src: checks/check.sh}]
      - type: says-done
"""

FILE_PLUGIN = """
from vally import BaseGrader, EmptyConfig, GraderMetadata


class SaysDone(BaseGrader[EmptyConfig]):
    metadata = GraderMetadata(name="says-done", description="output says done")
    Config = EmptyConfig

    async def grade(self, context):
        return self.result(context, passed="done" in context.trajectory.output, evidence="")


def register(registrar):
    registrar.grader(SaysDone)
"""


class HidingRunner:
    """Runs each attempt as on a node that cannot see the driver's spec folder: the first
    attempt packs the spec's files, then the folder is moved away for the rest of the run."""

    metadata: ClassVar[PluginMetadata] = PluginMetadata(name="hiding", kind="runner")
    Config = EmptyConfig
    runs_elsewhere: ClassVar[bool] = True
    ship_files: ClassVar[bool] = True
    archives: ClassVar[list[SpecArchive]] = []

    def __init__(self, spec_dir: Path) -> None:
        self.spec_dir = spec_dir
        self.lock = asyncio.Lock()

    async def start(self, run_id: str) -> None:
        pass

    async def run_trial(self, dispatch: TrialDispatch) -> Any:
        async with self.lock:
            archive = await asyncio.to_thread(dispatch.spec_archive)
            HidingRunner.archives.append(archive)
            if self.spec_dir.exists():
                self.spec_dir.rename(self.spec_dir.with_name("hidden"))
        job = pickle.loads(pickle.dumps(dispatch.job()))
        files = pickle.loads(pickle.dumps(archive)) if self.ship_files else None
        try:
            outcome = await run_trial_job(job, node="far", files=files)
        except Exception as exc:  # as Ray reports a task that raised
            return dispatch.failed(f"{type(exc).__name__}: {exc}")
        return await dispatch.accept(outcome)

    async def shutdown(self) -> None:
        pass


def project(tmp_path: Path) -> Path:
    spec_dir = tmp_path / "project" / "spec"
    (spec_dir / "fixtures").mkdir(parents=True)
    (spec_dir / "checks").mkdir()
    (spec_dir / "fixtures" / "greeting.txt").write_text("hello")
    (spec_dir / "checks" / "check.sh").write_text("test -f greeting.txt\n")
    (spec_dir / "eval.yaml").write_text(SPEC)
    (spec_dir / "plugins").mkdir()
    (spec_dir / "plugins" / "says_done.py").write_text(FILE_PLUGIN)
    return spec_dir


def run_hidden(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, ship: bool
) -> list[dict[str, Any]]:
    spec_dir = project(tmp_path)
    out = spec_dir / "vally-results"  # inside the spec folder: never shipped
    (out / "an-earlier-run").mkdir(parents=True)
    (out / "an-earlier-run" / "results.jsonl").write_text("{}\n")
    node_tmp = tmp_path / "node-tmp"
    node_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(node_tmp))
    monkeypatch.setattr(HidingRunner, "archives", [])
    monkeypatch.setattr(HidingRunner, "ship_files", ship)
    from vally.engine.trials import components

    monkeypatch.setattr(components, "build_runner", lambda *a, **k: HidingRunner(spec_dir))
    request = EvalRequest(
        eval_specs=[str(spec_dir / "eval.yaml")],
        output_dir=str(out),
        console=False,
        runner="hiding",
        grader_plugins=["./plugins/says_done.py"],
    )
    prepared, output_dir = prepare_eval(request)
    run_dir = create_run_dir(output_dir)
    prepared.execute(run_dir)
    moved = spec_dir.with_name("hidden") / "vally-results" / run_dir.name / "results.jsonl"
    return [json.loads(line) for line in moved.read_text().splitlines()]


def test_trials_read_fixtures_and_grader_files_the_node_cannot_see(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    got = run_hidden(tmp_path, monkeypatch, ship=True)
    assert [r["status"] for r in got] == ["success", "success"], got
    assert all(r["gradeResult"]["passed"] for r in got), got
    assert {r["evalFile"] for r in got} == {str(tmp_path / "project" / "spec" / "eval.yaml")}
    digests = {a.digest for a in HidingRunner.archives}
    assert len(digests) == 1  # packed once per run
    with tarfile.open(fileobj=io.BytesIO(HidingRunner.archives[0].data)) as tar:
        names = tar.getnames()
    spec_member = str(tmp_path / "project" / "spec").lstrip("/")
    assert f"{spec_member}/fixtures/greeting.txt" in names
    assert f"{spec_member}/checks/check.sh" in names
    assert not [n for n in names if "vally-results" in n], names
    (unpacked,) = (tmp_path / "node-tmp" / spec_files.CACHE_DIR_NAME).iterdir()
    assert unpacked.name == digests.pop()


def test_without_the_spec_files_the_hidden_fixtures_are_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    got = run_hidden(tmp_path, monkeypatch, ship=False)
    assert {r["status"] for r in got} == {"error"}
    assert "says_done.py" in got[0]["error"]["message"]  # the plugin is not there either


def test_roots_skip_nested_paths_and_pack_git_sources_whole(tmp_path: Path) -> None:
    spec_dir = project(tmp_path)
    (spec_dir / ".git").mkdir()
    (spec_dir / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    skill = tmp_path / "skills" / "greet"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: greet\ndescription: d\n---\n")
    prepared, _ = prepare_eval(
        EvalRequest(
            eval_specs=[str(spec_dir / "eval.yaml")], grader_plugins=["./plugins/says_done.py"]
        )
    )
    (trial,) = prepared.plan.distinct_trials
    env = trial.environment.model_copy(
        update={"skills": [str(skill)], "git": GitConfig(source="../../repo")}
    )
    trial = dataclasses.replace(trial, environment=env)
    roots, whole = spec_files.spec_roots([trial])
    assert set(roots) == {spec_dir, skill, repo}
    assert whole == {repo}
    archive = spec_files.SpecFiles([trial]).archive()
    with tarfile.open(fileobj=io.BytesIO(archive.data)) as tar:
        names = set(tar.getnames())
    assert str(repo / ".git" / "HEAD").lstrip("/") in names  # a repository keeps its .git
    assert str(spec_dir / ".git" / "HEAD").lstrip("/") not in names
    root = spec_files.unpack(archive, tmp_path / "cache")
    assert spec_files.unpack(archive, tmp_path / "cache") == root  # unpacked once
    moved = spec_files.relocate(trial, root)
    assert Path(moved.environment.files[0].src).read_text() == "hello"
    assert Path(moved.environment.skills[0], "SKILL.md").is_file()
    assert moved.spec_dir == Path(spec_files.relocated_path(spec_dir, root))
    git = moved.environment.git
    assert git is not None and Path(moved.spec_dir, git.source, ".git", "HEAD").is_file()


def test_too_large_spec_files_say_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec_dir = project(tmp_path)
    prepared, _ = prepare_eval(
        EvalRequest(
            eval_specs=[str(spec_dir / "eval.yaml")], grader_plugins=["./plugins/says_done.py"]
        )
    )
    monkeypatch.setattr(spec_files, "MAX_ARCHIVE_BYTES", 10)
    with pytest.raises(ConfigError, match="more than the") as caught:
        spec_files.SpecFiles(prepared.plan.distinct_trials).archive()
    assert str(spec_dir) in caught.value.message
    assert "environment.commands" in (caught.value.hint or "")


UNPACKER = """\
import pickle, sys, tarfile
from pathlib import Path
from vally.engine.planning import spec_files

log, archive_file, cache, ready = sys.argv[1:5]
extract = tarfile.TarFile.extractall

def counted(self, *args, **kwargs):
    with open(log, "a") as handle:
        handle.write("unpacked\\n")
    return extract(self, *args, **kwargs)

tarfile.TarFile.extractall = counted
archive = pickle.loads(Path(archive_file).read_bytes())
Path(ready).touch()
while len(list(Path(ready).parent.glob("ready-*"))) < int(sys.argv[5]):
    pass  # start together: each process waits until every one is ready
print(spec_files.unpack(archive, Path(cache)))
"""


def test_processes_starting_at_once_unpack_a_large_archive_once(tmp_path: Path) -> None:
    # A node's Ray workers are processes: each of them used to unpack its own copy.
    import os
    import subprocess
    import sys

    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w:gz") as tar:
        for n in range(4):
            payload = os.urandom(8 * 1024 * 1024)  # incompressible: unpacking takes a while
            info = tarfile.TarInfo(f"work/spec/fixture-{n}.bin")
            info.size = len(payload)
            tar.addfile(info, io.BytesIO(payload))
    archive = SpecArchive(digest="d" * 64, data=data.getvalue())
    (tmp_path / "archive.pickle").write_bytes(pickle.dumps(archive))
    (tmp_path / "unpacker.py").write_text(UNPACKER, encoding="utf-8")
    (tmp_path / "go").mkdir()
    workers = 6
    processes = [
        subprocess.Popen(
            [
                sys.executable,
                str(tmp_path / "unpacker.py"),
                str(tmp_path / "log"),
                str(tmp_path / "archive.pickle"),
                str(tmp_path / "cache"),
                str(tmp_path / "go" / f"ready-{n}"),
                str(workers),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        for n in range(workers)
    ]
    folders = {p.communicate(timeout=120)[0].strip() for p in processes}
    assert all(p.returncode == 0 for p in processes)
    assert folders == {str(tmp_path / "cache" / archive.digest)}
    assert (tmp_path / "log").read_text().splitlines() == ["unpacked"]
    assert sorted(
        p.name for p in (tmp_path / "cache" / archive.digest / "work" / "spec").iterdir()
    ) == [f"fixture-{n}.bin" for n in range(4)]


def _archive(members: list[tarfile.TarInfo]) -> SpecArchive:
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w:gz") as tar:
        for member in members:
            tar.addfile(member, io.BytesIO(b"x" * member.size) if member.isfile() else None)
    return SpecArchive(digest=str(len(data.getvalue())) + "e" * 60, data=data.getvalue())


@pytest.mark.parametrize("filters", [True, False], ids=["filters", "python-before-3.11.4"])
def test_an_archive_unpacks_with_or_without_extraction_filters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, filters: bool
) -> None:
    if not filters:
        monkeypatch.delattr(tarfile, "tar_filter", raising=False)
    good = tarfile.TarInfo("work/spec/a.txt")
    good.size = 3
    link = tarfile.TarInfo("work/spec/b.txt")
    link.type, link.linkname = tarfile.SYMTYPE, "../spec/a.txt"
    root = spec_files.unpack(_archive([good, link]), tmp_path / "cache")
    assert (root / "work/spec/b.txt").read_text() == "xxx"
    for name, target in [("../out.txt", ""), ("work/up", "../../../etc/passwd"), ("w/abs", "/etc")]:
        bad = tarfile.TarInfo(name)
        if target:
            bad.type, bad.linkname = tarfile.SYMTYPE, target
        with pytest.raises(SetupError, match="cannot unpack"):
            spec_files.unpack(_archive([bad]), tmp_path / f"cache-{len(target)}")
