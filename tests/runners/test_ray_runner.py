"""``--runner ray`` on a real local cluster (a head and two worker nodes in a loopback-only
network namespace): a 200-trial eval whose records and reports match a local run's, a
worker node killed mid-run, Ctrl-C, and a large spec folder unpacked once per node."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .cluster import Cluster, alive, require_ray, start_cluster

pytestmark = pytest.mark.slow

VALLY = [sys.executable, "-m", "vally"]

AGENT = """
import os, pathlib, sys, time
prompt = sys.stdin.read().strip()
marks = pathlib.Path(os.environ["MARKS"])
marks.joinpath(f"{prompt}.{os.getpid()}").write_text("")
if prompt.startswith("slow"):
    deadline = time.monotonic() + 90
    while not pathlib.Path(os.environ["GO"]).exists() and time.monotonic() < deadline:
        time.sleep(0.05)
print("ok", prompt)
"""

TIMING_KEYS = {
    "runId", "run_id", "startedAt", "completedAt", "durationMs", "started_at", "completed_at",
    "duration_ms", "work_dir", "workDir", "wallTimeMs", "wall_time_ms", "runDir", "timestamp",
    "sessionId", "id", "meanWallTimeMs",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    require_ray()
    running = start_cluster(tmp_path_factory.mktemp("driver-only"))
    try:
        yield running
    finally:
        running.stop()


def write_eval(folder: Path, stimuli: list[str], *, runs: int, agent: list[str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    marks = folder / "marks"
    marks.mkdir(exist_ok=True)
    entries = "\n".join(
        f"  - {{name: {name}, prompt: {name}, graders: "
        f"[{{type: output-contains, config: {{substring: {'ok' if i % 3 else 'nope'}}}}}]}}"
        for i, name in enumerate(stimuli)
    )
    spec = folder / "eval.yaml"
    spec.write_text(textwrap.dedent(f"""\
        name: dist
        environment: {{env: {{MARKS: "{marks}", GO: "{folder / 'go'}"}}}}
        defaults:
          runs: {runs}
          timeout: 120s
          executor:
            name: command
            config: {{command: {json.dumps(agent)}, prompt_via: stdin}}
        stimuli:
        """) + entries + "\n")
    return spec


def python_agent(folder: Path) -> list[str]:
    script = folder / "agent.py"
    script.write_text(AGENT)
    return [sys.executable, str(script)]


def eval_args(spec: Path, out: Path, cluster: Cluster | None, *, workers: int) -> list[str]:
    args = [*VALLY, "eval", "-e", str(spec), "--output-dir", str(out), "--workers", str(workers)]
    if cluster is not None:
        args = cluster.command([*args, "--runner", "ray", "--ray-address", cluster.address])
    return args


def run_dir(out: Path) -> Path:
    (folder,) = [p for p in out.iterdir() if p.is_dir()]
    return folder


def records(folder: Path) -> list[dict[str, Any]]:
    lines = (folder / "results.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def trial_metadata(folder: Path) -> dict[str, dict[str, Any]]:
    found = {}
    for path in folder.rglob("metadata.json"):
        data = json.loads(path.read_text())
        found[data["trialId"]] = data
    return found


def without_timings(value: Any) -> Any:
    if isinstance(value, dict) and "plugins" in value:  # provenance names the runner too
        plugins = [p for p in value["plugins"] if p["kind"] != "runner"]
        value = {**value, "plugins": plugins}
    if isinstance(value, dict):
        return {k: without_timings(v) for k, v in value.items() if k not in TIMING_KEYS}
    if isinstance(value, list):
        return [without_timings(v) for v in value]
    return value


def report_text(folder: Path) -> str:
    text = (folder / "report.md").read_text()
    text = re.sub(r"\d{4}-\d\d-\d\dT[\d:.]+Z", "<time>", text)
    text = re.sub(r"[0-9a-f]{8}-[0-9a-f-]{27}", "<run>", text)
    text = re.sub(r"\b\d+(\.\d+)?(ms|s|m)\b", "<dur>", text)
    return text.replace(str(folder), "<dir>")


def env() -> dict[str, str]:
    return {**os.environ, "NO_COLOR": "1"}


def test_200_trials_across_two_workers_match_a_local_run(cluster: Cluster, tmp_path: Path) -> None:
    stimuli = [f"s{i:02d}" for i in range(20)]
    spec = write_eval(tmp_path / "spec", stimuli, runs=10, agent=["sh", "-c", "cat; echo ok"])
    local = subprocess.run(
        eval_args(spec, tmp_path / "local", None, workers=8),
        capture_output=True, text=True, env=env(), timeout=240,
    )
    assert local.returncode == 0, local.stderr
    dist = subprocess.run(
        eval_args(spec, tmp_path / "ray", cluster, workers=8),
        capture_output=True, text=True, env=env(), timeout=240,
    )
    assert dist.returncode == 0, dist.stderr
    local_dir, ray_dir = run_dir(tmp_path / "local"), run_dir(tmp_path / "ray")
    got = records(ray_dir)
    ids = [r["trialId"] for r in got]
    assert len(ids) == 200 and len(set(ids)) == 200
    assert {r["status"] for r in got} == {"success"}
    expected = sorted((without_timings(r) for r in records(local_dir)), key=lambda r: r["trialId"])
    assert sorted((without_timings(r) for r in got), key=lambda r: r["trialId"]) == expected
    summary = [without_timings(json.loads(x)) for x in (ray_dir / "run-summary.jsonl").open()]
    local_summary = [
        without_timings(json.loads(x)) for x in (local_dir / "run-summary.jsonl").open()
    ]
    assert summary == local_summary
    assert report_text(ray_dir) == report_text(local_dir)
    nodes = Counter(m["node"] for m in trial_metadata(ray_dir).values())
    assert set(nodes) == set(cluster.nodes.values()), nodes  # both workers, never the head
    assert sum(nodes.values()) == 200


def wait_for(condition: Any, what: str, proc: subprocess.Popen[str], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if proc.poll() is not None:
            raise AssertionError(f"the run ended before {what}: {proc.communicate()}")
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def marks_of(folder: Path) -> list[tuple[str, int]]:
    return [
        (name, int(pid))
        for name, _, pid in (p.name.rpartition(".") for p in (folder / "marks").iterdir())
    ]


def test_a_killed_worker_node_s_trials_rerun_on_the_other(
    cluster: Cluster, tmp_path: Path
) -> None:
    stimuli = [f"slow{i:02d}" for i in range(24)]
    folder = tmp_path / "spec"
    spec = write_eval(folder, stimuli, runs=1, agent=python_agent(tmp_path))
    proc = subprocess.Popen(
        eval_args(spec, tmp_path / "out", cluster, workers=8),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(),
    )
    try:
        wait_for(lambda: len(marks_of(folder)) >= 8, "8 trials in flight", proc)
        killed = set(cluster.kill_worker(2))
        on_dead_node = {name for name, pid in marks_of(folder) if pid in killed}
        assert on_dead_node, "no trial was running on worker 2"
        (folder / "go").write_text("")
        _stdout, stderr = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
        cluster.start_worker(2)
    assert proc.returncode == 0, stderr
    out = run_dir(tmp_path / "out")
    got = records(out)
    assert sorted(r["stimulusName"] for r in got) == stimuli  # each exactly once
    assert {r["status"] for r in got} == {"success"}
    metadata = {m["stimulus"]: m for m in trial_metadata(out).values()}
    survivor = cluster.nodes[1]
    for name in on_dead_node:
        assert metadata[name]["node"] == survivor
    started = Counter(name for name, _ in marks_of(folder))
    assert all(started[name] >= 2 for name in on_dead_node), started


def test_ctrl_c_cancels_the_remote_trials_and_keeps_the_finished(
    cluster: Cluster, tmp_path: Path
) -> None:
    stimuli = [f"fast{i}" for i in range(4)] + [f"slow{i}" for i in range(6)]
    folder = tmp_path / "spec"
    spec = write_eval(folder, stimuli, runs=1, agent=python_agent(tmp_path))
    proc = subprocess.Popen(
        eval_args(spec, tmp_path / "out", cluster, workers=4),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(),
    )
    try:
        def slow_running() -> list[int]:
            return [pid for name, pid in marks_of(folder) if name.startswith("slow")]

        wait_for(lambda: len(slow_running()) >= 4, "4 slow trials in flight", proc)
        proc.send_signal(signal.SIGINT)
        _stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stderr
    got = records(run_dir(tmp_path / "out"))
    status = {r["stimulusName"]: r["status"] for r in got}
    assert len(got) == len(status) == 8  # every started trial once; 2 never started
    assert all(status[f"fast{i}"] == "success" for i in range(4))
    assert sorted(s for s in status.values() if s == "cancelled") == ["cancelled"] * 4
    # each cancelled task closed its sandbox before the driver went on: no agent is left
    assert not [pid for pid in slow_running() if alive(pid)]


def test_an_experiment_runs_on_the_cluster(cluster: Cluster, tmp_path: Path) -> None:
    agent = ["sh", "-c", "cat; echo ok"]
    write_eval(tmp_path / "evals" / "dist", ["e0", "e1"], runs=2, agent=agent)
    (tmp_path / "experiment.yaml").write_text(textwrap.dedent("""\
        name: spread
        evals: [evals/*/eval.yaml]
        vary: [/defaults/timeout]
        baseline: a
        variants: {a: {}, b: {defaults: {timeout: 90s}}}
        """))
    done = subprocess.run(
        cluster.command([*VALLY, "experiment", "run", "experiment.yaml", "--run-id", "r",
                         "--output-dir", "out", "--runner", "ray",
                         "--ray-address", cluster.address]),
        cwd=tmp_path, capture_output=True, text=True, env=env(), timeout=240,
    )
    assert done.returncode == 0, done.stderr
    out = tmp_path / "out"
    folders = {p.parent.name: p.parent for p in out.rglob("results.jsonl")}
    assert set(folders) == {"a", "b"}
    for variant in ("a", "b"):
        got = records(folders[variant])
        assert sorted(r["trialId"] for r in got) == sorted(
            f"{variant}/dist/{s}/default/{i}" for s in ("e0", "e1") for i in range(2)
        )
        assert {r["experiment"]["variant"] for r in got} == {variant}
    nodes = {m["node"] for m in trial_metadata(out).values()}
    assert nodes <= set(cluster.nodes.values()) and nodes


def test_trials_on_nodes_that_cannot_see_the_spec_read_its_files(
    cluster: Cluster, tmp_path: Path
) -> None:
    folder = cluster.hidden / "fixtures-eval"
    (folder / "fixtures").mkdir(parents=True)
    (folder / "fixtures" / "greeting.txt").write_text("hello from the driver")
    (folder / "checks").mkdir()
    (folder / "checks" / "check.sh").write_text('grep -q "from the driver" greeting.txt\n')
    (folder / "eval.yaml").write_text(textwrap.dedent("""\
        name: shipped
        environment: {files: [{src: fixtures/greeting.txt, dest: greeting.txt}]}
        defaults:
          runs: 4
          executor:
            name: command
            config: {command: [sh, -c, "cat greeting.txt"], prompt_via: stdin}
        stimuli:
          - name: reads
            prompt: x
            graders:
              - {type: output-contains, config: {substring: hello from the driver}}
              - {type: run-command, config: {command: sh check.sh, files: [{src: checks/check.sh}]}}
        """))
    assert not any(cluster.sees(n, folder / "eval.yaml") for n in cluster.nodes)
    done = subprocess.run(
        eval_args(folder / "eval.yaml", tmp_path / "out", cluster, workers=4),
        capture_output=True, text=True, env=env(), timeout=240,
    )
    assert done.returncode == 0, done.stderr
    got = records(run_dir(tmp_path / "out"))
    assert len(got) == 4
    assert all(r["status"] == "success" and r["gradeResult"]["passed"] for r in got), got
    assert {r["evalFile"] for r in got} == {str(folder / "eval.yaml")}


LLM_SERVER = """
import json, sys
from tests.llm.chat_server import ChatServer, completion
server = ChatServer()
server.default = completion("done")
server.gate = int(sys.argv[1]) + 1  # opens only if the cap is exceeded
server.gate_timeout = 1.0  # otherwise each request is held this long, so calls overlap
server.start()
print(server.base_url, flush=True)
sys.stdin.read()
print(json.dumps({"max": server.max_in_flight, "count": len(server.requests)}), flush=True)
server.stop()
"""


def test_the_llm_concurrency_cap_holds_across_the_cluster(
    cluster: Cluster, tmp_path: Path
) -> None:
    cap = 2
    server = subprocess.Popen(
        cluster.command([sys.executable, "-c", LLM_SERVER, str(cap)]),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        cwd=Path(__file__).resolve().parents[2], env=env(),
    )
    try:
        assert server.stdout is not None
        base_url = server.stdout.readline().strip()
        (tmp_path / ".vally.yaml").write_text(
            f"llm: {{base_url: {base_url}, api_key_env: RAY_LLM_KEY, max_concurrency: {cap}}}\n"
        )
        (tmp_path / "eval.yaml").write_text(textwrap.dedent("""\
            name: chatty
            defaults:
              runs: 12
              model: m1
              executor: {name: chat-agent, config: {max_steps: 2}}
            stimuli:
              - {name: talk, prompt: say done,
                 graders: [{type: output-contains, config: {substring: done}}]}
            """))
        done = subprocess.run(
            cluster.command([*VALLY, "eval", "-e", "eval.yaml", "--output-dir", "out",
                             "--workers", "8", "--runner", "ray",
                             "--ray-address", cluster.address]),
            cwd=tmp_path, capture_output=True, text=True, env={**env(), "RAY_LLM_KEY": "k"},
            timeout=240,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        stats_line, _ = server.communicate("", timeout=30)
    finally:
        if server.poll() is None:
            server.kill()
    stats = json.loads(stats_line.strip().splitlines()[-1])
    assert stats["count"] == 12
    assert stats["max"] == cap, stats  # reached, never exceeded
    out = run_dir(tmp_path / "out")
    assert len({m["node"] for m in trial_metadata(out).values()}) == 2  # calls from both nodes


def test_a_trial_needing_a_custom_resource_runs_only_where_it_is(
    cluster: Cluster, tmp_path: Path
) -> None:
    spec = write_eval(tmp_path / "spec", [f"r{i}" for i in range(8)], runs=1,
                      agent=["sh", "-c", "cat; echo ok"])
    text = spec.read_text().replace(
        "  runs: 1\n", "  runs: 1\n  resources: {cpus: 0.5, custom: {w2: 0.1}}\n"
    )
    spec.write_text(text)
    done = subprocess.run(eval_args(spec, tmp_path / "out", cluster, workers=8),
                          capture_output=True, text=True, env=env(), timeout=240)
    assert done.returncode in (0, 1), done.stderr  # a third of the stimuli fail their grader
    out = run_dir(tmp_path / "out")
    assert {r["status"] for r in records(out)} == {"success"}
    nodes = Counter(m["node"] for m in trial_metadata(out).values())
    assert nodes == {cluster.nodes[2]: 8}

    spec.write_text(text.replace("w2: 0.1", "gpu: 1"))
    done = subprocess.run(eval_args(spec, tmp_path / "none", cluster, workers=8),
                          capture_output=True, text=True, env=env(), timeout=240)
    got = records(run_dir(tmp_path / "none"))
    assert {r["status"] for r in got} == {"error"}, done.stderr
    message = got[0]["error"]["message"]
    assert "needs gpu: 1" in message and "defaults.resources" in message, message


GRADER_PLUGIN = '''
from vally import BaseGrader, EmptyConfig, GraderMetadata


class Says{cls}(BaseGrader[EmptyConfig]):
    """Passes when the output says ok."""

    metadata = GraderMetadata(name="{name}", description="output says ok")
    Config = EmptyConfig

    async def grade(self, context):
        ok = "ok" in context.trajectory.output
        return self.result(context, passed=ok, evidence="{name}")


def register(registrar):
    registrar.grader(Says{cls})
'''


def test_plugins_reach_nodes_that_cannot_see_them(cluster: Cluster, tmp_path: Path) -> None:
    folder = cluster.hidden / "plugin-eval"
    (folder / "shipped_checks").mkdir(parents=True)
    (folder / "shipped_checks" / "__init__.py").write_text(
        GRADER_PLUGIN.format(cls="Module", name="module-says-ok"))
    (folder / "file_grader.py").write_text(GRADER_PLUGIN.format(cls="File", name="file-says-ok"))
    (folder / "ray-env.yaml").write_text("py_modules: [shipped_checks]\n")
    (folder / "eval.yaml").write_text(textwrap.dedent("""\
        name: plugged
        defaults:
          runs: 4
          executor: {name: command, config: {command: [sh, -c, "cat; echo ok"], prompt_via: stdin}}
        stimuli:
          - {name: p, prompt: x, graders: [{type: module-says-ok}, {type: file-says-ok}]}
        """))
    assert not any(cluster.sees(n, folder / "shipped_checks") for n in cluster.nodes)
    done = subprocess.run(
        cluster.command([*VALLY, "eval", "-e", "eval.yaml", "--output-dir", str(tmp_path / "out"),
                         "--grader-plugin", "shipped_checks:register",
                         "--grader-plugin", "./file_grader.py",
                         "--runner", "ray", "--ray-address", cluster.address,
                         "--runner-args", "runtime_env=ray-env.yaml"]),
        cwd=folder, capture_output=True, text=True, env=env(), timeout=240,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    got = records(run_dir(tmp_path / "out"))
    assert len(got) == 4
    assert all(r["status"] == "success" and r["gradeResult"]["passed"] for r in got), got
    types = {d["type"] for r in got for d in r["gradeResult"]["details"]}
    assert types == {"module-says-ok", "file-says-ok"}


def cache_entries(cluster: Cluster, number: int) -> list[str]:
    """The entries of worker node ``number``'s ``vally-spec-files`` cache (its temp dir is
    its private ``hidden`` folder in the test below)."""
    cache = cluster.hidden / "vally-spec-files"
    raylet = str(cluster.raylet_pid(number))
    done = subprocess.run(["nsenter", "-t", raylet, "-m", "ls", "-A", str(cache)],
                          capture_output=True, text=True, check=False)
    return done.stdout.split()


@pytest.mark.parametrize("per_worker", [1, 4])
def test_a_node_unpacks_a_large_spec_folder_once_for_trials_starting_at_once(
    cluster: Cluster, tmp_path: Path, per_worker: int
) -> None:
    # 16 trials of a 24 MiB spec folder start 8 at once over 2 nodes of 4 CPUs: each
    # node's first wave starts together (in 4 worker processes, or 4 trials in one), and
    # still each node unpacks the archive once.
    import hashlib

    folder = cluster.hidden / f"large-eval-{per_worker}"
    (folder / "data").mkdir(parents=True)
    digest = hashlib.sha256()
    for i in range(6):
        chunk = os.urandom(4 * 1024 * 1024)  # incompressible: packing and unpacking take a while
        (folder / "data" / f"part{i}.bin").write_bytes(chunk)
        digest.update(chunk)
    (folder / "eval.yaml").write_text(textwrap.dedent(f"""\
        name: large
        environment: {{files: [{{src: data, dest: data}}]}}
        defaults:
          runs: 16
          executor:
            name: command
            config: {{command: [sh, -c, "cat data/part*.bin | sha256sum"], prompt_via: stdin}}
        stimuli:
          - name: reads
            prompt: x
            graders: [{{type: output-contains, config: {{substring: {digest.hexdigest()}}}}}]
        """))
    assert not any(cluster.sees(n, folder / "eval.yaml") for n in cluster.nodes)
    before = {number: set(cache_entries(cluster, number)) for number in cluster.nodes}
    # The nodes' temp dir is their private `hidden` tmpfs: each node has a cache of its own.
    node_env = json.dumps({"env_vars": {"TMPDIR": str(cluster.hidden)}})
    done = subprocess.run(
        [*eval_args(folder / "eval.yaml", tmp_path / "out", cluster, workers=8),
         "--runner-args", f"runtime_env={node_env}",
         "--runner-args", f"trials_per_worker={per_worker}"],
        capture_output=True, text=True, env=env(), timeout=400,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = run_dir(tmp_path / "out")
    got = records(out)
    assert len(got) == 16
    assert all(r["status"] == "success" and r["gradeResult"]["passed"] for r in got), got
    nodes = Counter(m["node"] for m in trial_metadata(out).values())
    assert set(nodes) == set(cluster.nodes.values()), nodes
    for number in cluster.nodes:
        # one copy named by the archive's digest, and no staging folder of a second unpack
        entries = sorted(set(cache_entries(cluster, number)) - before[number])
        assert len(entries) == 1 and re.fullmatch(r"[0-9a-f]{64}", entries[0]), entries
