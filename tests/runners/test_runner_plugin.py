"""The runner plugin kind without a cluster: the ``local`` runner through the whole run API
(and the dispatch a distributed runner uses, run in this process), the flags' errors, and
the Ray runner's checks that need no cluster."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any, ClassVar

import pytest

from vally import (
    ConfigError,
    EmptyConfig,
    EvalRequest,
    PluginMetadata,
    PluginNotFoundError,
    RunnerChoice,
    SetupError,
    TrialDispatch,
    run_trial_job,
)
from vally.engine.evals import prepare_eval

SPEC = """\
name: dist
defaults:
  runs: 3
  executor: {name: mock, config: {output: "hello {prompt}"}}
stimuli:
  - {name: a, prompt: x, graders: [{type: output-contains, config: {substring: hello}}]}
  - {name: b, prompt: y, graders: [{type: output-contains, config: {substring: nope}}]}
"""


class InlineRemoteRunner:
    """Runs each attempt the way a distributed runner does, but in this process: ship the
    job (through pickle), run it with run_trial_job, accept the outcome."""

    metadata: ClassVar[PluginMetadata] = PluginMetadata(name="inline", kind="runner")
    Config = EmptyConfig
    runs_elsewhere: ClassVar[bool] = True  # the driver starts no backend of its own
    jobs: ClassVar[int] = 0

    def __init__(self, config: EmptyConfig | None = None) -> None:
        self.config = config

    async def start(self, run_id: str) -> None:
        pass

    async def run_trial(self, dispatch: TrialDispatch) -> Any:
        import pickle

        job = pickle.loads(pickle.dumps(dispatch.job()))
        InlineRemoteRunner.jobs += 1
        outcome = await run_trial_job(job, node="node-7")
        return await dispatch.accept(pickle.loads(pickle.dumps(outcome)))

    async def shutdown(self) -> None:
        pass


def run(tmp_path: Path, runner: str | None, **kwargs: Any) -> tuple[Any, Path]:
    spec = tmp_path / "eval.yaml"
    spec.write_text(SPEC)
    out = tmp_path / f"out-{runner}"
    opts = EvalRequest(
        eval_specs=[str(spec)], output_dir=str(out), console=False, runner=runner, **kwargs
    )
    prepared, output_dir = prepare_eval(opts)
    from vally.engine.records.run_folder import create_run_dir

    run_dir = create_run_dir(output_dir)
    return prepared.execute(run_dir), run_dir


def comparable(run_dir: Path) -> list[dict[str, Any]]:
    drop = {"runId", "startedAt", "completedAt", "durationMs", "timestamp", "id", "sessionId",
            "workDir", "wallTimeMs"}

    def clean(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items() if k not in drop}
        if isinstance(value, list):
            return [clean(v) for v in value]
        return value

    lines = (run_dir / "results.jsonl").read_text().splitlines()
    return sorted((clean(json.loads(x)) for x in lines), key=lambda r: r["trialId"])


def metadata(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in run_dir.rglob("metadata.json")]


def test_local_runner_and_a_remote_style_runner_write_what_no_runner_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    baseline, base_dir = run(tmp_path, None)
    _, local_dir = run(tmp_path, "local")
    # "inline" is no installed plugin: the run API builds it through a patched factory.
    monkeypatch.setattr(InlineRemoteRunner, "jobs", 0)
    from vally.engine.trials import components

    monkeypatch.setattr(components, "build_runner", lambda *a, **k: InlineRemoteRunner())
    remote, remote_dir = run(tmp_path, "inline")
    assert InlineRemoteRunner.jobs == 6
    assert comparable(local_dir) == comparable(base_dir) == comparable(remote_dir)
    assert [s.passed for s in remote.summaries] == [s.passed for s in baseline.summaries] == [3]
    assert {m["node"] for m in metadata(base_dir)} == {socket.gethostname()}
    assert {m["node"] for m in metadata(remote_dir)} == {"node-7"}
    # the trial folders came back with the records: the executor's events too
    assert len(list(remote_dir.rglob("events.jsonl"))) == 6


def test_runner_flags_say_what_is_wrong() -> None:
    with pytest.raises(ConfigError, match="--ray-address needs --runner"):
        EvalRequest(eval_specs=["x"], ray_address="127.0.0.1:1").runner_choice()
    with pytest.raises(ConfigError, match="--ray-address is for --runner ray"):
        EvalRequest(eval_specs=["x"], runner="local", ray_address="h:1").runner_choice()
    choice = EvalRequest(
        eval_specs=["x"], runner="ray", ray_address="h:1", runner_args=["num_cpus=0.5"]
    ).runner_choice()
    assert choice == RunnerChoice("ray", {"num_cpus": "0.5", "address": "h:1"})


def test_an_unknown_runner_names_the_installed_ones(tmp_path: Path) -> None:
    with pytest.raises(PluginNotFoundError) as caught:
        run(tmp_path, "nope")
    assert "--runner" in caught.value.message
    assert "local" in caught.value.render()


def test_the_cli_takes_runner_flags(tmp_path: Path) -> None:
    (tmp_path / "eval.yaml").write_text(SPEC)
    done = subprocess.run(
        [sys.executable, "-m", "vally", "eval", "-e", "eval.yaml", "--runner", "local",
         "--output-dir", "out"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    bad = subprocess.run(
        [sys.executable, "-m", "vally", "eval", "-e", "eval.yaml", "--ray-address", "h:1"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )
    assert bad.returncode == 1 and "--ray-address needs --runner" in bad.stderr


def test_ray_runner_checks_resources_and_capacity() -> None:
    pytest.importorskip("vally_ray")
    from vally_ray.runner import RayRunner, RayRunnerConfig, parse_resources

    assert parse_resources(["docker:1", "gpu_box:0.5"]) == {"docker": 1.0, "gpu_box": 0.5}
    for bad in ("docker", "docker:x", ":1", "docker:-1"):
        with pytest.raises(ConfigError, match="NAME:AMOUNT"):
            parse_resources([bad])
    runner = RayRunner(RayRunnerConfig(num_cpus=2, resources=["docker:1"]))
    with pytest.raises(SetupError, match="needs docker: 1") as caught:
        runner._check_capacity({"CPU": 8.0})
    assert "CPU: 8" in caught.value.message
    runner._check_capacity({"CPU": 8.0, "docker": 2.0})


def test_the_ray_runner_without_ray_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    from vally_ray.runner import RayRunner

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray fails
    with pytest.raises(SetupError, match="not installed") as caught:
        asyncio.run(RayRunner().start("r"))
    assert "vally[ray]" in (caught.value.hint or "")


def test_a_gated_llm_holds_a_permit_per_call_and_gives_it_back_on_errors() -> None:
    from vally import ChatRequest, LLMError
    from vally.engine.trials.llm_gate import GatedLLM

    events: list[str] = []

    class Gate:
        async def acquire(self, limit: int) -> None:
            events.append(f"acquire {limit}")

        async def release(self) -> None:
            events.append("release")

    class Failing:
        metadata = PluginMetadata(name="failing", kind="llm_provider")
        Config = EmptyConfig

        async def chat(self, request: ChatRequest) -> Any:
            events.append("chat")
            raise LLMError("down", retryable=False, error_class="server")

        async def aclose(self) -> None:
            pass

    llm = GatedLLM(Failing(), Gate(), 3)
    with pytest.raises(LLMError):
        asyncio.run(llm.chat(ChatRequest(model="m", messages=[])))
    assert events == ["acquire 3", "chat", "release"]
    assert llm.metadata.name == "failing"


def test_the_cluster_llm_gate_travels_without_its_actor_handle() -> None:
    import pickle

    pytest.importorskip("vally_ray")
    from vally_ray.permits import ClusterLLMGate

    gate = ClusterLLMGate("run-1", "ns")
    gate._handle = object()  # a live handle stays behind
    copy = pickle.loads(pickle.dumps(gate))
    assert (copy.name, copy.namespace, copy._handle) == ("vally-llm-permits-run-1", "ns", None)


def test_spec_resources_are_validated_with_where_and_what(tmp_path: Path) -> None:
    from vally import load_eval_file

    for bad, message in (
        ("{cpus: -1}", "greater than or equal to 0"),
        ("{memory: lots}", "memory"),
        ("{custom: {docker: -1}}", "amounts are 0 or more"),
        ("{gpus: 1}", "gpus"),
    ):
        spec = tmp_path / "eval.yaml"
        spec.write_text(SPEC.replace("  runs: 3\n", f"  runs: 3\n  resources: {bad}\n"))
        with pytest.raises(ConfigError) as caught:
            load_eval_file(spec)
        text = caught.value.render()
        assert message in text and "resources" in text and "eval.yaml" in text, text


def test_ray_trial_options_take_the_spec_resources_unless_flags_say_otherwise() -> None:
    pytest.importorskip("vally_ray")
    from vally_ray.runner import RayRunner, RayRunnerConfig

    from vally import TrialResources

    spec = TrialResources(cpus=0.5, memory="1KiB", custom={"docker": 1, "w1": 2})
    plain = RayRunner(RayRunnerConfig())._per_trial(spec)
    assert plain == {"CPU": 0.5, "memory": 1024, "docker": 1, "w1": 2}
    flagged = RayRunner(RayRunnerConfig(num_cpus=2, resources=["w1:1"]))._per_trial(spec)
    assert flagged == {"CPU": 2, "memory": 1024, "docker": 1, "w1": 1}
    assert RayRunner(RayRunnerConfig())._per_trial(None) == {"CPU": 1.0}
    # a host of 4 slots reserves 4 trials' worth for the run
    host = RayRunner(RayRunnerConfig())._host_options(plain, 4)
    assert (host["num_cpus"], host["memory"], host["resources"]) == (
        2.0, 4096, {"docker": 4, "w1": 8}
    )
    assert host["max_concurrency"] == 5 and host["max_restarts"] == 0


def test_a_host_holds_as_many_trials_as_the_largest_node_fits() -> None:
    pytest.importorskip("vally_ray")
    from vally_ray.hosts import node_capacity

    nodes = [
        {"Alive": True, "Resources": {"CPU": 4.0, "w1": 1.0}},
        {"Alive": True, "Resources": {"CPU": 8.0}},
        {"Alive": False, "Resources": {"CPU": 64.0, "w1": 9.0}},
    ]
    assert node_capacity(nodes, {"CPU": 1.0}) == 8
    assert node_capacity(nodes, {"CPU": 0.5, "w1": 0.1}) == 8  # 10 w1 slots, 8 CPU slots
    assert node_capacity(nodes, {"CPU": 1.0, "w1": 0.3}) == 3
    assert node_capacity(nodes, {"CPU": 1.0, "gpu": 1.0}) == 0
    assert node_capacity(nodes, {"CPU": 5.0}) == 1
    assert node_capacity(nodes, {"CPU": 0.0}) > 1000  # needs nothing: no limit from nodes


class FakeActor:
    """A host actor whose start the test decides."""

    def __init__(self, slots: int, started: asyncio.Future[str]) -> None:
        self.slots = slots
        self.started = started
        self.ready = self

    def remote(self) -> asyncio.Future[str]:
        return self.started


def test_the_host_pool_starts_hosts_only_while_attempts_wait_for_a_slot() -> None:
    pytest.importorskip("vally_ray")
    from vally_ray.hosts import HostPool

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        made: list[FakeActor] = []

        def create(slots: int) -> FakeActor:
            made.append(FakeActor(slots, loop.create_future()))
            return made[-1]

        pool = HostPool(create, slots=4)
        takes = [asyncio.ensure_future(pool.take()) for _ in range(6)]
        await asyncio.sleep(0)
        assert [a.slots for a in made] == [4, 4]  # 6 waiting: two hosts of 4, not six
        made[0].started.set_result("node-a")
        hosts = await asyncio.gather(*takes[:4])
        assert {h.actor for h in hosts} == {made[0]} and not any(t.done() for t in takes[4:])
        pool.give_back(hosts[0])
        assert (await takes[4]).actor is made[0]  # a freed slot goes to a waiting attempt
        made[1].started.set_exception(RuntimeError("no runtime env"))
        await asyncio.sleep(0)
        pool.give_back(hosts[1])  # a live host's slot still serves the waiting attempt
        assert (await takes[5]).actor is made[0]
        hosts[0].dead = True  # its node died: every slot of the host is gone
        pool.give_back(hosts[0])  # and not handed out again
        with pytest.raises(RuntimeError, match="could not start: RuntimeError: no runtime env"):
            await pool.take()  # no live host is left and no new one is started
        assert len(made) == 2

    asyncio.run(scenario())


def test_the_ray_runtime_env_is_json_or_a_file_with_paths_relative_to_it(tmp_path: Path) -> None:
    pytest.importorskip("vally_ray")
    from vally_ray.runner import load_runtime_env

    assert load_runtime_env('{"env_vars": {"A": "1"}}') == {"env_vars": {"A": "1"}}
    env_file = tmp_path / "ray-env.yaml"
    env_file.write_text("working_dir: .\npy_modules: [plugins, s3://b/m.zip]\npip: [x]\n")
    assert load_runtime_env(str(env_file)) == {
        "working_dir": str(tmp_path / "."),
        "py_modules": [str(tmp_path / "plugins"), "s3://b/m.zip"],
        "pip": ["x"],
    }
    for bad, message in (("{nope", "not valid JSON"), (str(tmp_path / "missing.yaml"),
                         "cannot read"), ("[1]", "cannot read")):
        with pytest.raises(ConfigError, match=message):
            load_runtime_env(bad)
    env_file.write_text("- a list\n")
    with pytest.raises(ConfigError, match="is a mapping, got list"):
        load_runtime_env(str(env_file))


def test_the_ray_runner_ships_no_spec_files_when_told_the_nodes_share_them() -> None:
    pytest.importorskip("vally_ray")
    from vally_ray.runner import RayRunner, RayRunnerConfig

    class NoPacking:
        def spec_archive(self) -> Any:
            raise AssertionError("packed although ship_files=false")

    runner = RayRunner(RayRunnerConfig(ship_files=False))
    assert asyncio.run(runner._spec_files(NoPacking())) is None  # type: ignore[arg-type]


def test_spec_files_that_cannot_ship_fail_each_trial_with_the_reason() -> None:
    pytest.importorskip("vally_ray")
    from vally_ray.runner import RayRunner

    class TooLarge:
        resources = None

        def spec_archive(self) -> Any:
            raise ConfigError("the spec's files are 300 MiB packed", hint="move data out")

        def failed(self, message: str) -> str:
            return f"failed: {message}"

    got = asyncio.run(RayRunner().run_trial(TooLarge()))  # type: ignore[arg-type]
    assert got == "failed: the spec's files are 300 MiB packed\n  hint: move data out"
