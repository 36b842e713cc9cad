"""The ``docker`` backend on a real Docker engine (no mocks): isolation defaults, commands,
files, limits and cleanup. Images are built ``FROM scratch`` with busybox; nothing is pulled.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from vally.contracts.protocols import Sandbox, TrialContext, TrialKey
from vally.engine.records.run_folder import name_folder
from vally.errors import BackendError, ConfigError, PathEscapeError
from vally.models.spec import EnvironmentConfig, GitConfig
from vally_backends.docker.backend import DockerBackend
from vally_backends.docker.config import Config
from vally_backends.docker.errors import ImageError, OutOfMemoryError
from vally_backends.docker.sandbox import DockerSandbox

try:
    from tests.backends.docker_helpers import (
        busybox_image,
        containers_of_run,
        docker_api,
        nosh_image,
        rootonly_image,
        run_container_ids,
    )
except ImportError:  # pragma: no cover - tests/backends is not a package
    from docker_helpers import (  # type: ignore[no-redef]
        busybox_image,
        containers_of_run,
        docker_api,
        nosh_image,
        rootonly_image,
        run_container_ids,
    )

__all__ = ["busybox_image", "docker_api", "nosh_image", "rootonly_image"]

pytestmark = [pytest.mark.anyio, pytest.mark.docker]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


_RUN_COUNTER = iter(range(1_000_000))


def _run_id() -> str:
    return f"test-{os.getpid()}-{next(_RUN_COUNTER)}"


def _trial(
    run_id: str,
    environment: EnvironmentConfig | None = None,
    *,
    stimulus: str = "stim",
    spec_dir: Path | None = None,
    keep: Path | None = None,
) -> TrialContext:
    return TrialContext(
        key=TrialKey("default", "ev", stimulus, "m", 1),
        run_id=run_id,
        environment=environment or EnvironmentConfig(),
        spec_dir=spec_dir or Path.cwd(),
        keep_workspace=keep,
    )


_STARTED_RUNS: list[str] = []


@pytest.fixture(autouse=True)
def _remove_unused_spares() -> Iterator[None]:
    """Many tests close their sandbox but never shut their backend down (the run engine
    always does): remove the warm pool's spares those runs leave."""
    yield
    if not _STARTED_RUNS:
        return
    import docker

    client = docker.from_env()
    try:
        while _STARTED_RUNS:
            for item in containers_of_run(client.api, _STARTED_RUNS.pop()):
                with contextlib.suppress(Exception):
                    client.api.remove_container(item["Id"], force=True, v=True)
    finally:
        client.close()


async def _backend(image: str | None, **args: Any) -> DockerBackend:
    backend = DockerBackend(Config.model_validate({"image": image, "pull": "never", **args}))
    run_id = _run_id()
    _STARTED_RUNS.append(run_id)
    await backend.start(run_id)
    return backend


async def _sandbox(image: str, **args: Any) -> tuple[DockerBackend, DockerSandbox]:
    backend = await _backend(image, **args)
    sandbox = await backend.open(_trial(backend.run_id))
    return backend, sandbox


async def _sh(sandbox: Sandbox, script: str, **kwargs: Any) -> str:
    result = await sandbox.exec(["sh", "-c", script], **kwargs)
    assert result.exit_code == 0, (result.exit_code, result.stdout, result.stderr)
    return result.stdout


# --------------------------------------------------------------------------- config / import


def test_importing_the_package_does_not_import_the_docker_sdk() -> None:
    code = (
        "import sys, vally_backends.docker as d; "
        "assert 'docker' not in sys.modules and 'vally_backends.docker.backend' not in "
        "sys.modules, sorted(m for m in sys.modules if 'docker' in m); "
        "d.Config; assert 'docker' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_config_needs_an_image_and_accepts_cli_strings() -> None:
    with pytest.raises(ValidationError, match="image="):
        Config.model_validate({})
    with pytest.raises(ValidationError, match="not both"):
        Config.model_validate({"image": "x", "dockerfile": "Dockerfile"})
    with pytest.raises(ValidationError, match="memory"):
        Config.model_validate({"image": "x", "memory": "lots"})
    with pytest.raises(ValidationError, match="NAME"):
        Config.model_validate({"image": "x", "env": "A=b"})
    with pytest.raises(ValidationError, match="namespace"):
        Config.model_validate({"image": "x", "network": "host"})
    config = Config.model_validate(
        {"image": "x", "env": "OPENAI_API_KEY", "pids": "64", "read_only": "true", "cpus": "0.5"}
    )
    assert config.env == ["OPENAI_API_KEY"]
    assert (config.pids, config.read_only, config.cpus) == (64, True, 0.5)
    default = Config(image="x")
    assert (default.network, default.pids, default.memory, default.pull) == (
        "none",
        256,
        "1g",
        "missing",
    )
    assert default.workdir == "/workspace"


def test_the_entry_point_names_the_backend() -> None:
    from importlib.metadata import entry_points

    found = [ep for ep in entry_points(group="vally.backends") if ep.name == "docker"]
    assert found and found[0].value == "vally_backends.docker:DockerBackend"
    assert found[0].load() is DockerBackend


# --------------------------------------------------------------------------- lifecycle


async def test_container_is_labelled_and_removed_at_close(
    docker_api: Any, busybox_image: str
) -> None:
    # Without the warm pool the container is made for its trial and carries its id.
    backend, sandbox = await _sandbox(busybox_image, pool="0")
    assert isinstance(sandbox, Sandbox)
    assert sandbox.workdir == "/workspace" and sandbox.host_workdir is None
    [item] = containers_of_run(docker_api, backend.run_id)
    labels = item["Labels"]
    assert labels["vally.trial"] == "default/ev/stim/m/1"
    assert labels["vally.pid"] == str(os.getpid())
    assert labels["vally.host"] == socket.gethostname()
    assert item["State"] == "running"
    await sandbox.close()
    await sandbox.close()  # closing twice is harmless
    assert containers_of_run(docker_api, backend.run_id) == []
    await backend.shutdown()


async def test_close_removes_the_container_even_when_cancelled(
    docker_api: Any, busybox_image: str
) -> None:
    backend, sandbox = await _sandbox(busybox_image)
    task = asyncio.ensure_future(sandbox.close())
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert sandbox.container_id not in run_container_ids(docker_api, backend.run_id)
    await backend.shutdown()
    assert containers_of_run(docker_api, backend.run_id) == []


async def test_shutdown_removes_sandboxes_left_open(docker_api: Any, busybox_image: str) -> None:
    backend = await _backend(busybox_image)
    opened = [await backend.open(_trial(backend.run_id, stimulus=f"s{i}")) for i in range(2)]
    running = run_container_ids(docker_api, backend.run_id)
    assert {s.container_id for s in opened} <= running
    await backend.shutdown()
    assert containers_of_run(docker_api, backend.run_id) == []
    assert opened  # kept alive until here


async def test_start_sweeps_containers_of_dead_runs_only(
    docker_api: Any, busybox_image: str
) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    run = _run_id()

    def leftover(pid: int, host: str) -> str:
        created = docker_api.create_container(
            busybox_image,
            ["true"],
            labels={"vally.run-id": run, "vally.pid": str(pid), "vally.host": host},
        )
        return str(created["Id"])

    dead_here = leftover(dead.pid, socket.gethostname())
    alive_here = leftover(os.getpid(), socket.gethostname())
    dead_elsewhere = leftover(dead.pid, "some-other-host")
    try:
        backend = await _backend(busybox_image)
        left = {c["Id"] for c in containers_of_run(docker_api, run)}
        assert dead_here not in left
        assert {alive_here, dead_elsewhere} <= left
        await backend.shutdown()
    finally:
        for cid in (dead_here, alive_here, dead_elsewhere):
            with contextlib.suppress(Exception):
                docker_api.remove_container(cid, force=True)


async def test_missing_image_is_a_clear_error(busybox_image: str) -> None:
    backend = DockerBackend(Config(image="vally-test-absent:nope", pull="never"))
    with pytest.raises(ImageError, match="pull=never"):
        await backend.start(_run_id())
    # No registry answers on this loopback port: pulling fails fast with advice.
    backend = DockerBackend(Config(image="127.0.0.1:9/vally-absent:1", pull="missing"))
    with pytest.raises(ImageError, match="not available locally and could not be pulled"):
        await backend.start(_run_id())


async def test_unknown_network_is_a_config_error(busybox_image: str) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        await _backend(busybox_image, network="vally-no-such-network")


async def test_dockerfile_is_built_once_per_context(
    docker_api: Any, busybox_image: str, tmp_path: Path
) -> None:
    (tmp_path / "Dockerfile").write_text(f"FROM {busybox_image}\nRUN echo built > /built.txt\n")
    first = await _backend(None, dockerfile=str(tmp_path / "Dockerfile"))
    second = await _backend(None, dockerfile=str(tmp_path / "Dockerfile"))
    assert first.image == second.image
    assert first.image.startswith("vally-build:")
    sandbox = await first.open(_trial(first.run_id))
    try:
        assert await _sh(sandbox, "cat /built.txt") == "built\n"
    finally:
        await sandbox.close()
    (tmp_path / "Dockerfile").write_text(f"FROM {busybox_image}\nRUN echo v2 > /built.txt\n")
    third = await _backend(None, dockerfile=str(tmp_path / "Dockerfile"))
    assert third.image != first.image
    for image in {first.image, third.image}:
        docker_api.remove_image(image, force=True)


# --------------------------------------------------------------------------- safe defaults


async def test_defaults_isolate_the_container(docker_api: Any, busybox_image: str) -> None:
    _, sandbox = await _sandbox(busybox_image)
    try:
        assert (await _sh(sandbox, "ls /sys/class/net")).split() == ["lo"]
        assert (await _sh(sandbox, "id -u; id -g")).split() == ["1000", "1000"]
        status = await _sh(sandbox, "cat /proc/self/status")
        fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
        assert int(fields["CapEff"].strip(), 16) == 0
        assert int(fields["CapBnd"].strip(), 16) == 0
        assert fields["NoNewPrivs"].strip() == "1"
        host = docker_api.inspect_container(sandbox.container_id)["HostConfig"]
        assert host["NetworkMode"] == "none"
        assert host["PidsLimit"] == 256
        assert host["Memory"] == 1024**3
        assert host["MemorySwap"] == 1024**3
        # The only warning: what disk=4g cannot bound on an engine without storage quotas.
        disk = sandbox.metadata["disk"]
        assert disk["limit"] == "4g" and disk["enforcement"] in ("storage-quota", "tmpfs")
        warned = [] if disk["covers"] == ["/"] else ["disk=4g bounds only"]
        assert [w[:19] for w in sandbox.metadata["warnings"]] == warned
    finally:
        await sandbox.close()


async def test_image_without_a_user_runs_as_root_with_a_warning(rootonly_image: str) -> None:
    backend, sandbox = await _sandbox(rootonly_image)
    try:
        assert (await _sh(sandbox, "id -u")).strip() == "0"
        assert any("root" in w for w in sandbox.metadata["warnings"])
        assert backend.warnings
    finally:
        await sandbox.close()


async def test_user_argument_and_unknown_user(busybox_image: str) -> None:
    _, sandbox = await _sandbox(busybox_image, user="4321:4321")
    try:
        assert (await _sh(sandbox, "id -u; stat -c %u .")).split() == ["4321", "4321"]
    finally:
        await sandbox.close()
    with pytest.raises(ConfigError, match="does not exist in image"):
        await _backend(busybox_image, user="nobody-here")


async def test_host_environment_stays_out_unless_allowed(
    busybox_image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-host-secret")
    monkeypatch.setenv("VALLY_OTHER_HOST_VAR", "x")
    _, sandbox = await _sandbox(busybox_image)
    try:
        env = await _sh(sandbox, "env")
        assert "sk-host-secret" not in env and "VALLY_OTHER_HOST_VAR" not in env
    finally:
        await sandbox.close()
    _, sandbox = await _sandbox(busybox_image, env="OPENAI_API_KEY")
    try:
        env = await _sh(sandbox, "env")
        assert "OPENAI_API_KEY=sk-host-secret" in env
        assert "VALLY_OTHER_HOST_VAR" not in env
    finally:
        await sandbox.close()


async def test_fork_bomb_stops_at_the_pids_limit(busybox_image: str) -> None:
    _, sandbox = await _sandbox(busybox_image, pids=64)
    # Reads the cgroup's process count with shell built-ins only (no fork needed).
    count = (
        "f=/sys/fs/cgroup/pids/pids.current; [ -e $f ] || f=/sys/fs/cgroup/pids.current; "
        "read n < $f; echo $n"
    )
    try:
        result = await sandbox.exec(
            ["sh", "-c", "sleep 1005 & (while :; do sleep 1000 & done); wait"],
            timeout=3,
            output_limit=4096,
        )
        assert result.timed_out and result.exit_code is None
        assert "can't fork" in result.stderr  # the kernel refused forks at the limit
        # The bomb's whole process group goes (the kernel reaps killed processes a little
        # after the kill: poll, with a failsafe deadline).
        deadline = time.monotonic() + 30
        while int(await _sh(sandbox, count)) > 5:
            assert time.monotonic() < deadline, "the fork bomb's processes are still there"
        assert "sleep 100" not in await _sh(sandbox, "ps -o args")
    finally:
        await sandbox.close()


async def test_a_plain_sigkill_is_told_from_an_oom_kill_by_the_containers_counter(
    busybox_image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The engine's out-of-memory events are waited for only when the container's own
    # counter cannot be read; with a wait of an hour, this test ends only if it is read.
    monkeypatch.setattr("vally_backends.docker.sandbox.OOM_EVENT_WAIT_SECONDS", 3600.0)
    backend, sandbox = await _sandbox(busybox_image, memory="48m")
    try:
        first = await asyncio.wait_for(sandbox.exec(["sh", "-c", "kill -9 $$"]), 120)
        assert first.exit_code == 137 and first.signal == 9  # not an OutOfMemoryError
        with pytest.raises(OutOfMemoryError):
            await asyncio.wait_for(
                sandbox.exec(["sh", "-c", "head -c 300m /dev/zero | tail"], timeout=60), 120
            )
        again = await asyncio.wait_for(sandbox.exec(["sh", "-c", "kill -9 $$"]), 120)
        assert again.exit_code == 137  # the earlier kill is not counted twice
    finally:
        await sandbox.close()
        await backend.shutdown()


async def test_memory_hog_is_oom_killed_and_other_trials_go_on(busybox_image: str) -> None:
    backend = await _backend(busybox_image, memory="48m")
    hog = await backend.open(_trial(backend.run_id, stimulus="hog"))
    calm = await backend.open(_trial(backend.run_id, stimulus="calm"))

    async def hog_trial() -> None:
        await hog.exec(["sh", "-c", "head -c 300m /dev/zero | tail"], timeout=60)

    async def calm_trial() -> str:
        return await _sh(calm, "echo fine")

    try:
        outcomes = await asyncio.gather(hog_trial(), calm_trial(), return_exceptions=True)
        assert isinstance(outcomes[0], OutOfMemoryError), outcomes[0]
        assert outcomes[0].result.exit_code == 137
        assert "memory=" in outcomes[0].render()
        assert outcomes[1] == "fine\n"
        assert await _sh(hog, "echo survived") == "survived\n"  # the container lives on
    finally:
        await hog.close()
        await calm.close()
        await backend.shutdown()


async def test_read_only_root_keeps_the_workspace_writable(
    docker_api: Any, busybox_image: str
) -> None:
    _, sandbox = await _sandbox(busybox_image, read_only="true")
    try:
        await sandbox.write_file("in/a.txt", b"staged")
        out = await _sh(sandbox, "cat in/a.txt; echo more >> in/a.txt; touch /tmp/t && echo .")
        assert out == "staged.\n"
        assert await sandbox.read_file("in/a.txt") == b"stagedmore\n"
        denied = await sandbox.exec(["sh", "-c", "touch /etc/x"])
        assert denied.exit_code != 0
        mounts = docker_api.inspect_container(sandbox.container_id)["Mounts"]
        [volume] = [m["Name"] for m in mounts if m["Destination"] == "/workspace"]
    finally:
        await sandbox.close()
    assert not [v for v in docker_api.volumes()["Volumes"] or [] if v["Name"] == volume]


async def test_the_workspace_on_the_root_file_system_is_copied_into_no_trial(
    docker_api: Any, busybox_image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # disk=none: no workspace volume, the workspace is a folder of the container's own
    # file system. It comes with an image made once from the run's image, not with an
    # archive put into every container.
    backend = await _backend(busybox_image, disk="none", pool="0", user="4321:4321")
    made = backend.container_image
    assert made.startswith("vally-workspace:") and made != busybox_image
    puts: list[str] = []
    real_put = backend.api.put_archive

    def counted_put(container: str, path: str, data: Any) -> Any:
        puts.append(path)
        return real_put(container, path, data)

    monkeypatch.setattr(backend.api, "put_archive", counted_put)
    sandboxes = [await backend.open(_trial(backend.run_id, stimulus=f"s{i}")) for i in range(2)]
    try:
        assert puts == []
        for sandbox in sandboxes:
            assert sandbox.metadata["image"] == busybox_image
            assert docker_api.inspect_container(sandbox.container_id)["Config"]["Image"] == made
            out = await _sh(sandbox, "id -u; stat -c '%u %g %a' .; ls -A; echo x > f && cat f")
            assert out.split("\n") == ["4321", "4321 4321 755", "x", ""]
        # What one trial writes, the other does not see.
        await _sh(sandboxes[0], "echo only-here > mine")
        assert (await sandboxes[1].exec(["test", "-e", "mine"])).exit_code == 1
    finally:
        for sandbox in sandboxes:
            await sandbox.close()
    for sandbox in sandboxes:
        assert sandbox.container_id not in run_container_ids(docker_api, backend.run_id)
    await backend.shutdown()
    assert containers_of_run(docker_api, backend.run_id) == []
    # The image keeps the run image's configuration and none of the run's labels, and the
    # next run with the same image and user reuses it.
    config = docker_api.inspect_image(made)["Config"]
    source = docker_api.inspect_image(busybox_image)["Config"]
    assert config["Env"] == source["Env"] and config["User"] == source["User"]
    assert not any(config["Labels"].values())
    made_id = docker_api.inspect_image(made)["Id"]
    again = await _backend(busybox_image, disk="none", pool="0", user="4321:4321")
    assert again.container_image == made
    assert docker_api.inspect_image(made)["Id"] == made_id
    await again.shutdown()
    docker_api.remove_image(made, force=True)


async def test_without_a_workspace_image_each_container_gets_the_folder_put_in(
    docker_api: Any, busybox_image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import docker.api.client
    import docker.errors

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise docker.errors.APIError("commits are refused here")

    monkeypatch.setattr(docker.api.client.APIClient, "commit", refuse)
    backend = await _backend(busybox_image, disk="none", pool="0", user="4322:4322")
    assert backend.container_image == busybox_image
    sandbox = await backend.open(_trial(backend.run_id))
    try:
        assert (await _sh(sandbox, "stat -c '%u %g' .; touch f && echo ok")).split() == [
            "4322",
            "4322",
            "ok",
        ]
    finally:
        await sandbox.close()
    await backend.shutdown()
    assert containers_of_run(docker_api, backend.run_id) == []


# --------------------------------------------------------------------------- commands


async def test_exec_env_cwd_stdin_and_exit_codes(busybox_image: str) -> None:
    _, sandbox = await _sandbox(busybox_image)
    try:
        result = await sandbox.exec(
            ["sh", "-c", 'echo "$GREETING"; pwd; cat; echo err >&2; exit 3'],
            env={"GREETING": "hi there"},
            stdin=b"from stdin\n",
        )
        assert result.exit_code == 3
        assert result.stdout == "hi there\n/workspace\nfrom stdin\n"
        assert result.stderr == "err\n"
        assert not result.timed_out
        await sandbox.write_file("sub/x.txt", b"x")
        assert await _sh(sandbox, "pwd", cwd="sub") == "/workspace/sub\n"
        big = await sandbox.exec(["sh", "-c", "yes | head -c 300000"], output_limit=1000)
        assert big.truncated and len(big.stdout) == 1000 and big.exit_code == 0
        with pytest.raises(BackendError, match="not found"):
            await sandbox.exec(["no-such-program", "--flag"])
        with pytest.raises(PathEscapeError):
            await sandbox.exec(["pwd"], cwd="../..")
    finally:
        await sandbox.close()


async def test_timeout_kills_the_whole_process_tree(busybox_image: str) -> None:
    _, sandbox = await _sandbox(busybox_image)
    try:
        result = await sandbox.exec(
            ["sh", "-c", "sleep 1001 & (sleep 1002 &) ; echo started; sleep 1003"], timeout=1
        )
        assert result.timed_out and result.exit_code is None
        assert result.stdout == "started\n"
        processes = await _sh(sandbox, "ps -o args")
        assert "sleep 100" not in processes, processes
    finally:
        await sandbox.close()


async def test_cancelling_exec_kills_the_command(busybox_image: str) -> None:
    _, sandbox = await _sandbox(busybox_image)
    try:
        task = asyncio.ensure_future(sandbox.exec(["sh", "-c", "echo go; sleep 1004"]))
        await asyncio.sleep(0.5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert "sleep 1004" not in await _sh(sandbox, "ps -o args")
    finally:
        await sandbox.close()


async def test_spawned_process_talks_over_stdio(busybox_image: str) -> None:
    _, sandbox = await _sandbox(busybox_image)
    try:
        process = await sandbox.spawn(["sh", "-c", "while read line; do echo got:$line; done"])
        await process.write(b"one\n")
        assert await process.readline() == b"got:one\n"
        await process.write(b"two\n")
        assert await process.readline() == b"got:two\n"
        await process.terminate()
        assert "read line" not in await _sh(sandbox, "ps -o args")
    finally:
        await sandbox.close()


# --------------------------------------------------------------------------- files


async def test_files_round_trip_and_belong_to_the_user(busybox_image: str) -> None:
    _, sandbox = await _sandbox(busybox_image)
    try:
        await sandbox.write_file("deep/er/file.txt", b"content\n")
        assert await sandbox.read_file("deep/er/file.txt") == b"content\n"
        owners = await _sh(sandbox, "stat -c '%u %n' deep deep/er deep/er/file.txt .")
        assert {line.split()[0] for line in owners.splitlines()} == {"1000"}
        await _sh(sandbox, "echo agent >> deep/er/file.txt && mkdir deep/er/more")
        assert await sandbox.read_file("/workspace/deep/er/file.txt") == b"content\nagent\n"
        with pytest.raises(FileNotFoundError):
            await sandbox.read_file("absent.txt")
        with pytest.raises(IsADirectoryError):
            await sandbox.read_file("deep")
        with pytest.raises(PathEscapeError):
            await sandbox.read_file("../etc/passwd")
        with pytest.raises(PathEscapeError):
            await sandbox.write_file("/etc/evil", b"x")
        await _sh(sandbox, "ln -s /etc/passwd leak; ln -s deep/er/file.txt inside")
        with pytest.raises(PathEscapeError, match="outside"):
            await sandbox.read_file("leak")
        assert await sandbox.read_file("inside") == b"content\nagent\n"
    finally:
        await sandbox.close()


async def test_list_files_skips_links_git_and_node_modules(busybox_image: str) -> None:
    _, sandbox = await _sandbox(busybox_image)
    try:
        await _sh(
            sandbox,
            "mkdir -p src/.git node_modules/p .git a/node_modules && touch src/m.py top.txt "
            "src/.git/HEAD node_modules/p/i.js .git/config a/node_modules/x a/b && "
            "ln -s top.txt link.txt && ln -s /etc linkdir",
        )
        assert await sandbox.list_files() == ["a/b", "src/m.py", "top.txt"]
        assert await sandbox.list_files("src") == ["src/m.py"]
        assert await sandbox.list_files("top.txt") == ["top.txt"]
        assert await sandbox.list_files("nowhere") == []
    finally:
        await sandbox.close()


async def test_copy_in_and_copy_out_never_follow_links_outside(
    busybox_image: str, tmp_path: Path
) -> None:
    source = tmp_path / "src"
    (source / "pkg").mkdir(parents=True)
    (source / "pkg" / "mod.py").write_text("print('hi')\n")
    (source / "run.sh").write_text("#!/bin/sh\necho run\n")
    (source / "run.sh").chmod(0o755)
    _, sandbox = await _sandbox(busybox_image)
    try:
        await sandbox.copy_in(source, "project")
        await sandbox.copy_in(source / "run.sh", "bin/tool.sh")
        assert await _sh(sandbox, "./project/run.sh; bin/tool.sh; id -u > project/out") == (
            "run\nrun\n"
        )
        await _sh(
            sandbox,
            "cd project && ln -s /etc/passwd abs-leak && ln -s ../../etc/hostname rel-leak && "
            "ln -s pkg/mod.py ok-link && ln -s / root-link",
        )
        dest = tmp_path / "out"
        await sandbox.copy_out("project", dest)
        assert (dest / "pkg" / "mod.py").read_text() == "print('hi')\n"
        assert (dest / "out").read_text() == "1000\n"
        assert os.access(dest / "run.sh", os.X_OK)
        assert (dest / "ok-link").is_symlink() and os.readlink(dest / "ok-link") == "pkg/mod.py"
        for leak in ("abs-leak", "rel-leak", "root-link"):
            assert not (dest / leak).exists() and not (dest / leak).is_symlink()
        await sandbox.copy_out("project/pkg/mod.py", tmp_path / "single.py")
        assert (tmp_path / "single.py").read_text() == "print('hi')\n"
        with pytest.raises(PathEscapeError):
            await sandbox.copy_out("project/abs-leak", tmp_path / "leak")
        with pytest.raises(FileNotFoundError):
            await sandbox.copy_out("nothing", tmp_path / "nothing")
    finally:
        await sandbox.close()


async def test_kept_workspace_is_copied_out_at_close(busybox_image: str, tmp_path: Path) -> None:
    backend = await _backend(busybox_image)
    keep = tmp_path / "kept"
    keep.mkdir()
    (keep / "stale.txt").write_text("from an earlier run")
    sandbox = await backend.open(_trial(backend.run_id, keep=keep))
    assert not (keep / "stale.txt").exists()
    await sandbox.write_file("result.txt", b"done")
    await sandbox.close()
    assert (keep / "result.txt").read_bytes() == b"done"


async def test_git_environment_is_checked_out_into_the_container(
    busybox_image: str, tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
        ).stdout

    git("init", "-q")
    git("config", "user.email", "t@example.invalid")
    git("config", "user.name", "t")
    (repo / "app.py").write_text("v1\n")
    git("add", ".")
    git("commit", "-qm", "one")
    first = git("rev-parse", "HEAD").strip()
    (repo / "app.py").write_text("v2\n")
    git("commit", "-qam", "two")
    backend = await _backend(busybox_image)
    env = EnvironmentConfig(git=GitConfig(source=".", ref=first))
    sandbox = await backend.open(_trial(backend.run_id, env, spec_dir=repo))
    try:
        assert await sandbox.read_file("app.py") == b"v1\n"
        assert await sandbox.list_files() == ["app.py"]
        assert (await _sh(sandbox, "test -d .git && stat -c %u app.py")).strip() == "1000"
    finally:
        await sandbox.close()


# --------------------------------------------------------------------------- end to end

E2E_SPEC = """
name: dockere2e
environment:
  files: [{src: data/input.txt, dest: input.txt}]
  commands: ["echo setup-ran > setup.txt"]
defaults:
  runs: 1
  executor:
    name: command
    config:
      command: ["sh", "-c", "{prompt}"]
graders:
  - type: run-command
    name: verifier
    config:
      command: "sh check.sh"
      files:
        - {src: verifier/check.sh, dest: check.sh}
        - {src: verifier/expected.txt, dest: expected.txt}
stimuli:
  - name: honest
    prompt: "cat input.txt > out.txt; ls /sys/class/net; id -u; cat setup.txt"
    artifacts: [out.txt]
    graders:
      - {type: output-contains, config: {substring: setup-ran}}
      - {type: file-contains, config: {path: out.txt, value: right}}
  - name: cheater
    prompt: >-
      echo wrong > out.txt; echo wrong > expected.txt;
      printf 'echo FAKE-VERIFIER; exit 0' > check.sh; echo cheated
"""


def _write_e2e_project(root: Path) -> Path:
    folder = root / "evals" / "dockere2e"
    (folder / "data").mkdir(parents=True)
    (folder / "verifier").mkdir()
    (folder / "eval.yaml").write_text(E2E_SPEC)
    (folder / "data" / "input.txt").write_text("right\n")
    (folder / "verifier" / "expected.txt").write_text("right\n")
    (folder / "verifier" / "check.sh").write_text(
        "echo REAL-VERIFIER\ncmp -s out.txt expected.txt\n"
    )
    (root / ".vally.yaml").write_text("paths: {evals: [evals]}\n")
    return folder / "eval.yaml"


def test_vally_eval_runs_trials_in_containers_and_verifiers_cannot_be_faked(
    docker_api: Any, busybox_image: str, tmp_path: Path
) -> None:
    import json

    spec = _write_e2e_project(tmp_path)
    out = tmp_path / "out"
    env = {**os.environ, "NO_COLOR": "1", "OPENAI_API_KEY": "sk-host-secret"}
    proc = subprocess.run(
        [
            sys.executable, "-c", "from vally.cli.app import main; main()", "eval",
            "-e", str(spec), "--output-dir", str(out), "--workers", "2",
            "--backend", "docker",
            "--backend-args", f"image={busybox_image}", "--backend-args", "pull=never",
        ],
        cwd=tmp_path, capture_output=True, text=True, env=env, timeout=240,
    )  # fmt: skip
    [run_dir] = [p for p in out.iterdir() if p.is_dir()]
    lines = (run_dir / "results.jsonl").read_text().splitlines()
    records = {r["stimulusName"]: r for r in map(json.loads, lines)}
    assert set(records) == {"honest", "cheater"}, proc.stderr
    honest, cheater = records["honest"], records["cheater"]
    assert honest["status"] == "success", (honest.get("error"), proc.stderr)
    output = honest["trajectory"]["output"]
    assert output.split()[:3] == ["lo", "1000", "setup-ran"], output
    assert honest["gradeResult"]["passed"] is True, honest["gradeResult"]

    def verifier(record: dict[str, Any]) -> dict[str, Any]:
        found = [g for g in record["gradeResult"]["details"] if g["name"] == "verifier"] or [
            g for g in record["gradeResult"]["details"] if g["type"] == "run-command"
        ]
        return dict(found[0])

    assert "REAL-VERIFIER" in verifier(honest)["metadata"]["stdout"]
    fooled = verifier(cheater)
    assert fooled["passed"] is False, fooled
    assert "REAL-VERIFIER" in fooled["metadata"]["stdout"]
    assert "FAKE-VERIFIER" not in fooled["metadata"]["stdout"]
    trial = run_dir / name_folder("dockere2e") / name_folder("honest") / name_folder("default")
    artifact = trial / "trial-0" / "artifacts" / "out.txt"
    assert artifact.read_text() == "right\n"
    assert containers_of_run(docker_api, honest["runId"]) == []


HANG_SPEC = """
name: hang
defaults:
  runs: 2
  executor: {name: command, config: {command: ["sh", "-c", "echo started > mark; sleep 1006"]}}
stimuli:
  - {name: forever, prompt: wait}
"""


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_interrupting_a_run_removes_its_containers(
    docker_api: Any, busybox_image: str, tmp_path: Path, signum: signal.Signals
) -> None:
    folder = tmp_path / "evals" / "hang"
    folder.mkdir(parents=True)
    (folder / "eval.yaml").write_text(HANG_SPEC)
    # The backend comes from the project file here (the other end-to-end test uses flags).
    (tmp_path / ".vally.yaml").write_text(
        "paths: {evals: [evals]}\n"
        "defaults:\n  backend:\n    name: docker\n"
        f"    args: {{image: '{busybox_image}', pull: never}}\n"
    )
    with (tmp_path / "log.txt").open("w") as log:
        proc = subprocess.Popen(
            [
                sys.executable, "-c", "from vally.cli.app import main; main()", "eval",
                "-e", str(folder / "eval.yaml"), "--output-dir", str(tmp_path / "out"),
                "--workers", "2",
            ],
            cwd=tmp_path, stdout=log, stderr=log, env={**os.environ, "NO_COLOR": "1"},
        )  # fmt: skip
    label = {"label": f"vally.pid={proc.pid}"}

    def agents_running() -> bool:
        started = 0
        for item in docker_api.containers(filters=label):
            probe = docker_api.exec_create(item["Id"], ["cat", "/workspace/mark"])
            started += b"started" in docker_api.exec_start(probe)
        return started == 2

    try:
        _wait_for(agents_running, "both trials' agents to start in their containers")
        # The warm pool made containers ahead (spares, or one a trial took): they must go too.
        pooled = {"label": [f"vally.pid={proc.pid}", "vally.pooled=1"]}
        assert docker_api.containers(all=True, filters=pooled)
        proc.send_signal(signum)
        assert proc.wait(timeout=60) != 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert docker_api.containers(all=True, filters=label) == [], (tmp_path / "log.txt").read_text()


def test_prune_removes_only_containers_of_dead_runs(docker_api: Any, busybox_image: str) -> None:
    import typer
    from typer.testing import CliRunner

    from vally_backends.docker.cli import register

    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        """A stand-in for the vally CLI."""

    register(app)

    dead = subprocess.Popen(["true"])
    dead.wait()
    run = _run_id()
    made = []
    for pid in (dead.pid, os.getpid()):
        labels = {"vally.run-id": run, "vally.pid": str(pid), "vally.host": socket.gethostname()}
        made.append(docker_api.create_container(busybox_image, ["true"], labels=labels)["Id"])
    try:
        runner = CliRunner()
        dry = runner.invoke(app, ["docker", "prune", "--dry-run"])
        assert dry.exit_code == 0, dry.output
        assert f"would remove {made[0][:12]}" in dry.output
        assert made[1][:12] not in dry.output
        assert len(containers_of_run(docker_api, run)) == 2
        done = runner.invoke(app, ["docker", "prune"])
        assert done.exit_code == 0, done.output
        assert [c["Id"] for c in containers_of_run(docker_api, run)] == [made[1]]
    finally:
        for cid in made:
            with contextlib.suppress(Exception):
                docker_api.remove_container(cid, force=True)


def _wait_for(predicate: Any, what: str, deadline: float = 60.0) -> None:
    """Poll ``predicate`` (a failsafe deadline, never a timing assertion)."""
    end = time.monotonic() + deadline
    while not predicate():
        if time.monotonic() > end:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.1)


@pytest.mark.parametrize(("require", "outcome"), [("0", "1 skipped"), ("1", "1 error")])
def test_no_engine_skips_or_fails_when_required(tmp_path: Path, require: str, outcome: str) -> None:
    env = {
        **os.environ,
        "DOCKER_HOST": f"unix://{tmp_path}/no-docker.sock",
        "VALLY_REQUIRE_DOCKER": require,
    }
    proc = subprocess.run(
        [
            sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
            f"{__file__}::test_defaults_isolate_the_container",
        ],
        capture_output=True, text=True, env=env, cwd=Path(__file__).parents[2], timeout=120,
    )  # fmt: skip
    assert outcome in proc.stdout, proc.stdout
    if require == "1":
        assert "VALLY_REQUIRE_DOCKER=1" in proc.stdout


async def test_a_tiny_timeout_still_kills_the_command(busybox_image: str) -> None:
    _, sandbox = await _sandbox(busybox_image)
    try:
        result = await sandbox.exec(["sh", "-c", "sleep 1007 & sleep 1008"], timeout=0.001)
        assert result.timed_out
        assert "sleep 100" not in await _sh(sandbox, "ps -o args")
    finally:
        await sandbox.close()


async def test_limits_and_network_arguments_reach_the_container(
    docker_api: Any, busybox_image: str
) -> None:
    _, sandbox = await _sandbox(
        busybox_image, cpus="0.5", memory="256m", pids="100", network="bridge"
    )
    try:
        host = docker_api.inspect_container(sandbox.container_id)["HostConfig"]
        assert host["NanoCpus"] == 500_000_000
        assert host["Memory"] == 256 * 1024**2
        assert host["PidsLimit"] == 100
        assert "eth0" in (await _sh(sandbox, "ls /sys/class/net")).split()
    finally:
        await sandbox.close()


async def test_failed_git_setup_leaves_no_container(
    docker_api: Any, busybox_image: str, tmp_path: Path
) -> None:
    from vally.errors import SetupError

    backend = await _backend(busybox_image, pool="0")
    env = EnvironmentConfig(git=GitConfig(source=".", ref="no-such-ref"))
    with pytest.raises(SetupError, match="no-such-ref"):
        await backend.open(_trial(backend.run_id, env, spec_dir=tmp_path))
    assert containers_of_run(docker_api, backend.run_id) == []


async def test_image_without_a_shell_is_refused_clearly(nosh_image: str) -> None:
    with pytest.raises(ImageError, match="no /bin/sh"):
        await _backend(nosh_image)


async def test_a_failed_close_is_a_cleanup_error_and_still_removes_the_container(
    docker_api: Any, busybox_image: str, tmp_path: Path
) -> None:
    from vally.errors import CleanupError

    backend = await _backend(busybox_image)
    keep = tmp_path / "kept"
    sandbox = await backend.open(_trial(backend.run_id, keep=keep))
    await sandbox.write_file("result.txt", b"done")
    keep.rmdir()
    keep.write_text("a file where the kept workspace should go")
    with pytest.raises(CleanupError, match="cannot copy the workspace"):
        await sandbox.close()
    assert sandbox.container_id not in run_container_ids(docker_api, backend.run_id)
    await backend.shutdown()
    assert containers_of_run(docker_api, backend.run_id) == []


OOM_SPEC = """
name: oom
defaults:
  executor: {name: command, config: {command: ["sh", "-c", "{prompt}"]}}
stimuli:
  - {name: hog, prompt: "head -c 300m /dev/zero | tail"}
  - name: calm
    prompt: "echo fine"
    graders: [{type: output-contains, config: {substring: fine}}]
"""


def test_an_oom_killed_agent_is_that_trials_error_only(busybox_image: str, tmp_path: Path) -> None:
    import json

    folder = tmp_path / "evals" / "oom"
    folder.mkdir(parents=True)
    (folder / "eval.yaml").write_text(OOM_SPEC)
    (tmp_path / ".vally.yaml").write_text("paths: {evals: [evals]}\n")
    out = tmp_path / "out"
    proc = subprocess.run(
        [
            sys.executable, "-c", "from vally.cli.app import main; main()", "eval",
            "-e", str(folder / "eval.yaml"), "--output-dir", str(out), "--workers", "2",
            "--backend", "docker", "--backend-args", f"image={busybox_image}",
            "--backend-args", "pull=never", "--backend-args", "memory=48m",
        ],
        cwd=tmp_path, capture_output=True, text=True, env={**os.environ, "NO_COLOR": "1"},
        timeout=240,
    )  # fmt: skip
    [run_dir] = [p for p in out.iterdir() if p.is_dir()]
    lines = (run_dir / "results.jsonl").read_text().splitlines()
    records = {r["stimulusName"]: r for r in map(json.loads, lines)}
    assert records["hog"]["status"] == "error", (records["hog"], proc.stderr)
    assert records["hog"]["error"]["code"] == "VALLY_DOCKER_OOM", records["hog"]["error"]
    assert "out-of-memory" in records["hog"]["error"]["message"]
    assert records["calm"]["status"] == "success"
    assert records["calm"]["gradeResult"]["passed"] is True
