"""The docker backend's warm pool on a real Docker engine: trials take containers started
ahead, never one another trial used, and no container of a run survives its end, an error,
an interrupt or the death of the vally process."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from vally.contracts.protocols import TrialContext, TrialKey
from vally.errors import SetupError
from vally.models.spec import EnvironmentConfig, GitConfig
from vally_backends.docker.backend import DockerBackend
from vally_backends.docker.cgroups import CgroupLocator
from vally_backends.docker.config import Config
from vally_backends.docker.pool import WarmPool
from vally_backends.docker.sandbox import ContainerInfo

try:
    from tests.backends.docker_helpers import (
        busybox_image,
        containers_of_run,
        docker_api,
        run_container_ids,
    )
except ImportError:  # pragma: no cover - tests/backends is not a package
    from docker_helpers import (  # type: ignore[no-redef]
        busybox_image,
        containers_of_run,
        docker_api,
        run_container_ids,
    )

__all__ = ["busybox_image", "docker_api"]

pytestmark = [pytest.mark.anyio, pytest.mark.docker]

_RUN_COUNTER = iter(range(1_000_000))


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _trial(run_id: str, index: int, environment: EnvironmentConfig | None = None) -> TrialContext:
    return TrialContext(
        key=TrialKey("default", "pool", f"s{index}", "m", 0),
        run_id=run_id,
        environment=environment or EnvironmentConfig(),
        spec_dir=Path.cwd(),
    )


async def _backend(image: str, **args: Any) -> DockerBackend:
    backend = DockerBackend(Config.model_validate({"image": image, "pull": "never", **args}))
    await backend.start(f"test-pool-{os.getpid()}-{next(_RUN_COUNTER)}")
    return backend


def _pooled(api: Any, container: str) -> bool:
    labels = api.inspect_container(container)["Config"]["Labels"]
    return bool(labels.get("vally.pooled") == "1")


def _wait_for(predicate: Any, what: str, deadline: float = 60.0) -> None:
    """Poll ``predicate`` (a failsafe deadline, never a timing assertion)."""
    end = time.monotonic() + deadline
    while not predicate():
        if time.monotonic() > end:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.1)


# --------------------------------------------------------------------------- the pool alone


class _Recorder:
    """A pool over stand-in containers (``c0``, ``c1``, ...) that records what it made and
    what it discarded."""

    def __init__(self, limit: int) -> None:
        self.made: list[str] = []
        self.discarded: list[str] = []
        self.pool = WarmPool(self._make, lambda info: self.discarded.append(info.id), limit)

    def _make(self) -> ContainerInfo:
        self.made.append(f"c{len(self.made)}")
        return ContainerInfo(id=self.made[-1], image="i", user="1:1", uid=1, gid=1, started_at=0)

    async def settled(self) -> None:
        """Let the spare being made finish (and the next one start, and so on)."""
        for _ in range(100):
            pending = [t for t in self.pool._spares if not t.done()]
            if not pending:
                return
            await asyncio.wait(pending)


async def test_the_pool_keeps_no_more_spares_than_trials_seen_open_at_once() -> None:
    recorder = _Recorder(limit=3)
    pool = recorder.pool
    assert await pool.take() is None  # nothing was made ahead of the first trial
    await recorder.settled()
    assert pool.spares == 1  # one trial open: one spare
    second = await pool.take()
    assert second is not None and second.id == "c0"
    await recorder.settled()
    assert pool.spares == 2  # two open at once: two spares, made one after the other
    pool.release()
    pool.release()
    handed = {second.id}
    for _ in range(5):  # one trial at a time from now on: the peak (2) still bounds it
        taken = await pool.take()
        assert taken is not None and taken.id not in handed  # never a used container
        handed.add(taken.id)
        pool.release()
        await recorder.settled()
        assert pool.spares == 2
    assert await pool.close() == []
    assert sorted(recorder.discarded) == sorted(set(recorder.made) - handed)
    assert await pool.take() is None and pool.spares == 0  # closed: no refill


async def test_a_pool_told_how_many_trials_come_makes_no_spare_beyond_them() -> None:
    recorder = _Recorder(limit=4)
    pool = recorder.pool
    pool.expect(4)
    taken = [await pool.take()]  # four trials open at once, as a run of 4 workers does
    await recorder.settled()
    for _ in range(3):
        taken.append(await pool.take())
        await recorder.settled()
    assert taken[0] is None  # nothing was made ahead of the first trial
    served = [info.id for info in taken[1:] if info is not None]
    assert served == recorder.made == ["c0", "c1", "c2"]
    assert pool.spares == 0 and pool.target == 0  # the last trial took the last spare
    assert await pool.take() is None and recorder.made == ["c0", "c1", "c2"]  # a retry: its own
    assert await pool.close() == [] and recorder.discarded == []  # nothing made only to be removed


async def test_a_pool_the_engine_cannot_keep_ahead_of_keeps_fewer_spares() -> None:
    import threading

    finished = [threading.Event() for _ in range(16)]
    started: list[int] = []

    def make() -> ContainerInfo:  # a worker thread: ends when the test says so
        index = len(started)
        started.append(index)
        assert finished[index].wait(30)
        return ContainerInfo(id=f"c{index}", image="i", user="1:1", uid=1, gid=1, started_at=0)

    pool = WarmPool(make, lambda info: None, limit=4)
    assert await pool.take() is None  # the first trial: nothing made ahead yet
    for trial in (1, 2, 3):  # each next trial finds its spare still being made
        taking = asyncio.ensure_future(pool.take())
        await asyncio.sleep(0)
        finished[trial - 1].set()
        taken = await taking
        assert taken is not None and taken.id == f"c{trial - 1}"
    # Four trials open at once would allow four spares, but the engine kept ahead of none.
    assert pool.target == 1
    for trial, target in ((4, 2), (5, 3)):  # a spare ready when taken: one more each time
        finished[trial - 1].set()
        await asyncio.wait(list(pool._spares))
        taken = await pool.take()
        assert taken is not None and taken.id == f"c{trial - 1}"
        assert pool.target == target
    for event in finished:
        event.set()
    assert await pool.close() == []


async def test_a_disabled_pool_makes_nothing_ahead(docker_api: Any, busybox_image: str) -> None:
    backend = await _backend(busybox_image, pool="0")
    sandbox = await backend.open(_trial(backend.run_id, 0))
    try:
        assert run_container_ids(docker_api, backend.run_id) == {sandbox.container_id}
        assert not _pooled(docker_api, sandbox.container_id)
    finally:
        await sandbox.close()
        await backend.shutdown()


# --------------------------------------------------------------------------- isolation


async def test_a_trial_never_sees_what_another_trial_left(
    docker_api: Any, busybox_image: str
) -> None:
    backend = await _backend(busybox_image, pool="2")
    seen: set[str] = set()
    try:
        for index in range(4):
            sandbox = await backend.open(_trial(backend.run_id, index))
            try:
                assert sandbox.container_id not in seen
                seen.add(sandbox.container_id)
                if index > 0:  # the first trial had no spare to take
                    assert _pooled(docker_api, sandbox.container_id)
                assert await sandbox.list_files() == []
                check = await sandbox.exec(
                    ["sh", "-c", "ls /tmp; ps -o pid,args | grep -c 'sleep 99[9]'; true"]
                )
                assert check.stdout.split() == ["0"], check.stdout
                await sandbox.write_file("left.txt", b"by the previous trial")
                await sandbox.exec(["sh", "-c", "touch /tmp/left; sleep 999 &"])
            finally:
                await sandbox.close()
            assert sandbox.container_id not in run_container_ids(docker_api, backend.run_id)
    finally:
        await backend.shutdown()
    assert containers_of_run(docker_api, backend.run_id) == []


async def test_stopping_processes_spares_only_the_containers_own(
    docker_api: Any, busybox_image: str
) -> None:
    backend = await _backend(busybox_image, pool="1")
    opened = [await backend.open(_trial(backend.run_id, i)) for i in range(2)]
    try:
        for sandbox in opened:  # a new container and one from the pool
            await sandbox.exec(["sh", "-c", "setsid sleep 997 & sleep 998 &"])
            await sandbox.stop_processes()
            left = await sandbox.exec(["sh", "-c", "ps -o args | grep -c 'sleep 99[78]'; true"])
            assert left.stdout.strip() == "0"
            assert (await sandbox.exec(["true"])).exit_code == 0  # the container still idles
    finally:
        for sandbox in opened:
            await sandbox.close()
        await backend.shutdown()


def _execs_since(api: Any, container: str, since: float) -> list[str]:
    """The commands the engine was asked to exec in ``container`` since ``since``."""
    events = api.events(
        since=f"{since:.9f}",
        until=f"{time.time():.9f}",
        filters={"container": container, "event": "exec_create"},
        decode=True,
    )
    return [event["Action"] for event in events]


@pytest.mark.parametrize("counted", ["from-cgroup", "by-engine"])
@pytest.mark.parametrize("init", ["true", "false"])
async def test_stopping_processes_execs_only_when_the_container_runs_more_than_its_own(
    docker_api: Any,
    busybox_image: str,
    init: str,
    counted: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    backend = await _backend(busybox_image, pool="0", init=init)
    if counted == "by-engine":  # a host that shows no container's /proc: docker top
        monkeypatch.setattr(backend, "_cgroups", CgroupLocator(proc=str(tmp_path)))
    asked: list[str] = []
    top = backend.api.top

    def _top(container: str, **args: Any) -> Any:
        asked.append(container)
        return top(container, **args)

    monkeypatch.setattr(backend.api, "top", _top)
    sandbox = await backend.open(_trial(backend.run_id, 0))
    try:
        assert (await sandbox.exec(["true"])).exit_code == 0  # the agent: left nothing
        since = time.time()
        await sandbox.stop_processes()
        assert _execs_since(docker_api, sandbox.container_id, since) == []
        # A daemon: orphaned, it is reparented to process 1 (the init, or the keeper).
        await sandbox.exec(["sh", "-c", "setsid sh -c 'sleep 996 &' </dev/null >/dev/null 2>&1"])
        since = time.time()
        await sandbox.stop_processes()
        assert any(
            "stop-processes" in e for e in _execs_since(docker_api, sandbox.container_id, since)
        )
        left = await sandbox.exec(["sh", "-c", "ps -o args | grep -c '[s]leep 996'; true"])
        assert left.stdout.strip() == "0"
    finally:
        await sandbox.close()
        await backend.shutdown()
    if counted == "by-engine":
        assert asked == [sandbox.container_id] * 2
    else:  # the engine was not asked: the host's cgroup files were read
        if backend._cgroups.layout is None and not os.environ.get("VALLY_REQUIRE_DOCKER"):
            pytest.skip("the engine's cgroups are not visible from this host")
        assert backend._cgroups.layout is not None
        assert asked == []


async def test_the_trial_environment_reaches_commands_in_a_pooled_container(
    docker_api: Any, busybox_image: str
) -> None:
    backend = await _backend(busybox_image, pool="1")
    first = await backend.open(_trial(backend.run_id, 0))
    await first.close()
    environment = EnvironmentConfig(env={"TRIAL_VAR": "from-the-spec"})
    sandbox = await backend.open(_trial(backend.run_id, 1, environment))
    try:
        assert _pooled(docker_api, sandbox.container_id)
        out = await sandbox.exec(["sh", "-c", "echo $TRIAL_VAR"])
        assert out.stdout == "from-the-spec\n"
        own = await sandbox.exec(["sh", "-c", "echo $TRIAL_VAR"], env={"TRIAL_VAR": "mine"})
        assert own.stdout == "mine\n"
    finally:
        await sandbox.close()
        await backend.shutdown()


# --------------------------------------------------------------------------- cleanup


async def test_shutdown_removes_the_spares(docker_api: Any, busybox_image: str) -> None:
    backend = await _backend(busybox_image, pool="3")
    opened = [await backend.open(_trial(backend.run_id, i)) for i in range(3)]
    for sandbox in opened:
        await sandbox.close()

    def spares_exist() -> bool:
        return bool(run_container_ids(docker_api, backend.run_id))

    _wait_for(spares_exist, "the pool to make spares")
    await backend.shutdown()
    assert containers_of_run(docker_api, backend.run_id) == []


async def test_a_failed_open_leaves_no_container_once_the_run_ends(
    docker_api: Any, busybox_image: str, tmp_path: Path
) -> None:
    backend = await _backend(busybox_image, pool="2")
    first = await backend.open(_trial(backend.run_id, 0))
    await first.close()
    _wait_for(lambda: run_container_ids(docker_api, backend.run_id), "the pool to make a spare")
    broken = EnvironmentConfig(git=GitConfig(source=".", ref="no-such-ref"))
    trial = TrialContext(
        key=TrialKey("default", "pool", "git", "m", 0),
        run_id=backend.run_id,
        environment=broken,
        spec_dir=tmp_path,
    )
    before = run_container_ids(docker_api, backend.run_id)
    with pytest.raises(SetupError, match="no-such-ref"):
        await backend.open(trial)
    after = run_container_ids(docker_api, backend.run_id)
    assert not before & after  # the spare the failed trial took is gone
    await backend.shutdown()
    assert containers_of_run(docker_api, backend.run_id) == []


def test_the_next_run_sweeps_the_spares_of_a_killed_run(
    docker_api: Any, busybox_image: str
) -> None:
    run_id = f"test-pool-killed-{os.getpid()}-{next(_RUN_COUNTER)}"
    script = textwrap.dedent(
        f"""
        import asyncio, os, signal
        from pathlib import Path
        from vally.contracts.protocols import TrialContext, TrialKey
        from vally.models.spec import EnvironmentConfig
        from vally_backends.docker import Config, DockerBackend

        async def main():
            backend = DockerBackend(Config(image={busybox_image!r}, pull="never", pool=2))
            await backend.start({run_id!r})
            key = TrialKey("default", "pool", "s", "m", 0)
            trial = TrialContext(key, {run_id!r}, EnvironmentConfig(), Path.cwd())
            await backend.open(trial)
            label = {{"label": "vally.run-id={run_id}"}}
            while len(backend.api.containers(filters=label)) < 2:
                await asyncio.sleep(0.05)
            os.kill(os.getpid(), signal.SIGKILL)

        asyncio.run(main())
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    left = run_container_ids(docker_api, run_id)
    assert len(left) >= 2, left  # the trial's container and at least one spare

    async def next_run() -> None:
        backend = DockerBackend(Config(image=busybox_image, pull="never"))
        try:
            await backend.start(f"test-pool-next-{os.getpid()}-{next(_RUN_COUNTER)}")
        finally:
            await backend.shutdown()

    asyncio.run(next_run())
    assert run_container_ids(docker_api, run_id) == set()


FAIL_SPEC = """
name: poolfail
defaults:
  runs: 3
  executor: {name: command, config: {command: ["sh", "-c", "{prompt}"]}}
stimuli:
  - {name: ok, prompt: "echo fine"}
  - name: broken
    prompt: "echo never"
    environment: {commands: ["exit 3"]}
"""


def test_a_run_with_failing_trials_leaves_no_container(
    docker_api: Any, busybox_image: str, tmp_path: Path
) -> None:
    folder = tmp_path / "evals" / "poolfail"
    folder.mkdir(parents=True)
    (folder / "eval.yaml").write_text(FAIL_SPEC)
    (tmp_path / ".vally.yaml").write_text("paths: {evals: [evals]}\n")
    proc = subprocess.Popen(
        [
            sys.executable, "-c", "from vally.cli.app import main; main()", "eval",
            "-e", str(folder / "eval.yaml"), "--output-dir", str(tmp_path / "out"),
            "--workers", "3", "--backend", "docker",
            "--backend-args", f"image={busybox_image}", "--backend-args", "pull=never",
        ],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "NO_COLOR": "1"},
    )  # fmt: skip
    output, _ = proc.communicate(timeout=240)
    [run_dir] = [p for p in (tmp_path / "out").iterdir() if p.is_dir()]
    statuses = [
        line.split('"status":"', 1)[1].split('"', 1)[0]
        for line in (run_dir / "results.jsonl").read_text().splitlines()
    ]
    assert sorted(statuses) == ["error"] * 3 + ["success"] * 3, output
    assert docker_api.containers(all=True, filters={"label": f"vally.pid={proc.pid}"}) == []


COUNT_SPEC = """
name: poolcount
defaults:
  runs: 5
  executor: {name: command, config: {command: ["true"]}}
stimuli:
  - {name: s, prompt: go}
"""


def test_a_run_makes_one_container_per_trial_and_no_spare_beyond(
    docker_api: Any, busybox_image: str, tmp_path: Path
) -> None:
    from vally import EvalRequest, run_eval

    spec = tmp_path / "eval.yaml"
    spec.write_text(COUNT_SPEC)
    since = int(time.time()) - 1
    result = run_eval(
        EvalRequest(
            eval_specs=[str(spec)],
            output_dir=str(tmp_path / "out"),
            workers=2,
            backend="docker",
            backend_args=[f"image={busybox_image}", "pull=never"],
            console=False,
        )
    )
    assert [r.status for r in result.records] == ["success"] * 5
    run_id = result.run.run_id
    events = docker_api.events(
        since=since,
        until=f"{time.time():.9f}",
        filters={"type": "container", "event": "create", "label": f"vally.run-id={run_id}"},
        decode=True,
    )
    labels = [event["Actor"]["Attributes"] for event in events]
    # Containers for trials: a spare of the pool, or one a trial made itself (the backend's
    # start also makes a probe, which is neither).
    created = [label for label in labels if "vally.pooled" in label or "vally.trial" in label]
    # Spares were made ahead (the pool is on) but the engine told the backend how many
    # trials come: every container made served a trial, none was made only to be removed.
    assert len(created) == 5, created
    assert run_container_ids(docker_api, run_id) == set()
