"""The Ray runner plugin (see :mod:`vally_ray`)."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field

from vally import (
    ConfigError,
    PluginMetadata,
    SetupError,
    StrictConfig,
    TrialDispatch,
    TrialResources,
    VallyError,
)
from vally_ray.hosts import Host, HostPool, TrialHost, node_capacity
from vally_ray.permits import ClusterLLMGate

CANCEL_GRACE_SECONDS = 10.0
"""How long an interrupted trial gets to close its sandbox; after that (and a margin) the
driver kills its host's worker process, whose agents' keepers then kill them."""


class RayRunnerConfig(StrictConfig):
    """``--runner-args`` of the Ray runner.

    Attributes:
        address: The cluster: ``auto`` (the one this machine belongs to), ``HOST:PORT`` of
            the head's GCS, or ``ray://HOST:PORT`` (Ray Client).
        num_cpus: CPUs each trial reserves on its node.
        memory: Bytes of memory each trial reserves (None: none reserved).
        resources: Custom resources each trial needs, as ``NAME:AMOUNT`` (``docker:1`` for
            nodes started with ``--resources '{"docker": 1}'``).
        max_retries: How often a trial runs again when its worker process or node dies.
        scheduling: ``SPREAD`` spreads the trial hosts over the nodes; ``DEFAULT`` packs
            them.
        namespace: The Ray namespace of the run's actors.
        ship_files: Ship the spec's files to the nodes (false: nodes read them at the
            driver's paths, from a shared file system).
        runtime_env: The Ray runtime environment of the run's trial hosts: a JSON object, or a
            YAML/JSON file holding one (``pip``, ``py_modules``, ``working_dir``,
            ``env_vars``, ...; local paths in a file are relative to it). None: the
            nodes' own Python environment.
        trials_per_worker: How many trials one Ray worker process (a trial host) runs at
            once; it reserves that many trials' resources on its node while the run lasts
            (fewer when no node holds that many).
    """

    address: str = "auto"
    num_cpus: float = Field(default=1.0, ge=0)
    memory: int | None = Field(default=None, ge=0)
    resources: list[str] = Field(default_factory=list)
    max_retries: int = Field(default=3, ge=0)
    scheduling: Literal["SPREAD", "DEFAULT"] = "SPREAD"
    namespace: str = "vally"
    ship_files: bool = True
    runtime_env: str | None = None
    trials_per_worker: int = Field(default=4, ge=1)


def parse_resources(items: list[str]) -> dict[str, float]:
    """``["docker:1", "gpu_box:0.5"]`` -> ``{"docker": 1.0, "gpu_box": 0.5}``.

    Raises:
        ConfigError: An item is not ``NAME:AMOUNT`` with a non-negative number.
    """
    out: dict[str, float] = {}
    for item in items:
        name, sep, amount = item.partition(":")
        try:
            value = float(amount)
        except ValueError:
            value = -1.0
        if not sep or not name or value < 0:
            raise ConfigError(
                f"--runner-args resources={item}: expected NAME:AMOUNT, e.g. docker:1",
                hint="repeat resources=NAME:AMOUNT for each custom resource a trial needs",
            )
        out[name] = value
    return out


PATH_KEYS = ("working_dir",)
"""Runtime-env keys holding one local path (resolved against the file that names them)."""

PATH_LIST_KEYS = ("py_modules",)
"""Runtime-env keys holding a list of local paths or URIs."""


def load_runtime_env(value: str) -> dict[str, Any]:
    """``--runner-args runtime_env=``: a JSON object, or a YAML/JSON file holding one
    (relative ``working_dir``/``py_modules`` paths in a file resolve against its folder).

    Raises:
        ConfigError: The value is neither, or does not hold a mapping.
    """
    import json

    import yaml

    where = f"--runner-args runtime_env={value}"
    text, base = value, None
    if not value.lstrip().startswith("{"):
        path = Path(value).expanduser()
        try:
            text, base = path.read_text(encoding="utf-8"), path.absolute().parent
        except OSError as exc:
            raise ConfigError(
                f"{where}: cannot read {path}: {exc.strerror or exc}",
                hint="give a JSON object ('{\"pip\": [\"requests\"]}') or a YAML file",
            ) from exc
    try:
        env = json.loads(text) if base is None else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise ConfigError(
            f"{where}: not valid {'JSON' if base is None else 'YAML'}: {exc}",
            hint="write a mapping such as {py_modules: [./my_plugins]}",
        ) from exc
    if not isinstance(env, dict):
        raise ConfigError(
            f"{where}: a runtime environment is a mapping, got {type(env).__name__}",
            hint="write a mapping such as {py_modules: [./my_plugins]}",
        )
    return env if base is None else _anchored(env, base)


def _anchored(env: dict[str, Any], base: Path) -> dict[str, Any]:
    def local(item: Any) -> Any:
        if isinstance(item, str) and "://" not in item and not Path(item).is_absolute():
            return str(base / item)
        return item

    out = dict(env)
    for key in PATH_KEYS:
        if key in out:
            out[key] = local(out[key])
    for key in PATH_LIST_KEYS:
        if isinstance(out.get(key), list):
            out[key] = [local(item) for item in out[key]]
    return out


class RayRunner:
    """Runs each trial attempt on a trial host (:mod:`vally_ray.hosts`): long-lived Ray
    actors, each running up to ``trials_per_worker`` trials at once; ``--workers`` caps the
    attempts in flight cluster-wide (the kernel never submits more)."""

    metadata: ClassVar[PluginMetadata] = PluginMetadata(
        name="ray",
        kind="runner",
        description="Run trials on a Ray cluster (pip install 'vally[ray]').",
    )
    Config = RayRunnerConfig
    runs_elsewhere: ClassVar[bool] = True

    def __init__(self, config: RayRunnerConfig | None = None) -> None:
        self.config = config or RayRunnerConfig()
        self.resources = parse_resources(self.config.resources)
        self.runtime_env = (
            load_runtime_env(self.config.runtime_env) if self.config.runtime_env else None
        )
        self._connected = False
        self._files: Any = None
        self._files_shipped = False
        self._files_lock = asyncio.Lock()
        self._llm_gate: ClusterLLMGate | None = None
        self._totals: dict[str, float] = {}
        self._nodes: list[dict[str, Any]] = []
        self._host_class: Any = None
        self._pools: dict[str, HostPool] = {}

    async def start(self, run_id: str) -> None:
        """Connect to the cluster and check that some node can take a trial.

        Raises:
            SetupError: Ray is not installed, no cluster answers at the address, or no node
                has the resources a trial needs.
        """
        try:
            import ray
        except ImportError as exc:
            raise SetupError(
                "the ray runner needs Ray, which is not installed",
                hint="install it with: pip install 'vally[ray]'",
            ) from exc
        try:
            self._connect(ray)  # in the main thread, where Ray can set its signal handlers
        except Exception as exc:
            with_env = " with the runtime environment" if self.runtime_env else ""
            raise SetupError(
                f"cannot connect to the Ray cluster at {self.config.address!r}{with_env}: "
                f"{type(exc).__name__}: {exc}",
                hint="start one with `ray start --head` (see docs/distributed.md) and pass "
                "its address with --ray-address HOST:PORT",
            ) from exc
        untyped: Any = ray  # cluster_resources() and nodes() have no annotations
        self._totals = dict(untyped.cluster_resources())
        self._nodes = list(untyped.nodes())
        self._check_capacity(self._totals)
        self._host_class = ray.remote(TrialHost)
        self._llm_gate = ClusterLLMGate(run_id, self.config.namespace)

    def _connect(self, ray: Any) -> None:
        # Ray sets its own SIGTERM handler in the main thread: keep the run's handlers (an
        # interrupt stops the run and cancels the trials).
        saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            self._init(ray)
        finally:
            for sig, handler in saved.items():
                if handler is not None:
                    signal.signal(sig, handler)

    def _init(self, ray: Any) -> None:
        ray.init(
            address=self.config.address,
            namespace=self.config.namespace,
            ignore_reinit_error=True,
            runtime_env=self.runtime_env,
            logging_level="WARNING",
            log_to_driver=False,
            configure_logging=False,
        )
        self._connected = True

    def _per_trial(self, spec: TrialResources | None) -> dict[str, float]:
        """What one trial reserves (``CPU``, ``memory``, custom resources): ``--runner-args``
        given explicitly win over the spec's ``defaults.resources``, which win over the
        runner's defaults."""
        given = self.config.model_fields_set
        num_cpus, memory = self.config.num_cpus, self.config.memory
        custom: dict[str, float] = {}
        if spec is not None:
            if spec.cpus is not None and "num_cpus" not in given:
                num_cpus = spec.cpus
            if spec.memory is not None and "memory" not in given:
                memory = int(spec.memory)
            custom.update(spec.custom)
        custom.update(self.resources)
        wanted = {"CPU": num_cpus, **custom}
        if memory is not None:
            wanted["memory"] = memory
        return wanted

    def _host_options(self, per_trial: dict[str, float], slots: int) -> dict[str, Any]:
        """The actor options of a host running ``slots`` trials needing ``per_trial``."""
        custom = {k: v * slots for k, v in per_trial.items() if k not in ("CPU", "memory")}
        options: dict[str, Any] = {
            "num_cpus": per_trial["CPU"] * slots,
            "max_concurrency": slots + 1,  # its trials and the ready() call
            "max_restarts": 0,  # the driver runs a dead host's trials on other hosts
            "scheduling_strategy": self.config.scheduling,
        }
        if custom:
            options["resources"] = custom
        if "memory" in per_trial:
            options["memory"] = int(per_trial["memory"] * slots)
        return options

    def _pool_for(self, dispatch: TrialDispatch) -> HostPool:
        """The hosts of the trial's resources (one pool per distinct setting).

        Raises:
            SetupError: No node of the cluster has what the trial needs.
        """
        spec: TrialResources | None = dispatch.resources
        key = "" if spec is None else spec.model_dump_json()
        pool = self._pools.get(key)
        if pool is None:
            per_trial = self._per_trial(spec)
            lower = "--runner-args num_cpus=/resources="
            if spec is not None:
                lower = "defaults.resources of the eval"
                self._check_capacity(self._totals, per_trial, lower)
            fits = node_capacity(self._nodes, per_trial)
            if fits < 1:
                needs = ", ".join(f"{k}: {v:g}" for k, v in per_trial.items() if v > 0)
                raise SetupError(
                    f"no node of the Ray cluster can run a trial: it needs {needs} on one "
                    "node, and the cluster has that only summed over its nodes",
                    hint=f"start a node with those resources, or lower {lower}",
                )
            slots = min(self.config.trials_per_worker, fits)
            files, gate, host = self._files, self._llm_gate, self._host_class

            def create(count: int) -> Any:
                return host.options(**self._host_options(per_trial, count)).remote(files, gate)

            pool = self._pools[key] = HostPool(create, slots)
        return pool

    def _check_capacity(
        self,
        total: dict[str, float],
        wanted: dict[str, float] | None = None,
        lower: str = "--runner-args num_cpus=/resources=",
    ) -> None:
        if wanted is None:
            wanted = {"CPU": self.config.num_cpus, **self.resources}
        missing = [f"{k}: {v:g}" for k, v in wanted.items() if v > 0 and total.get(k, 0.0) < v]
        if missing:
            have = ", ".join(f"{k}: {v:g}" for k, v in sorted(total.items())) or "nothing"
            raise SetupError(
                f"no node of the Ray cluster can run a trial: it needs {', '.join(missing)}, "
                f"the cluster has {have}",
                hint="start nodes with those resources (ray start --num-cpus/--resources), "
                f"or lower {lower}",
            )

    async def run_trial(self, dispatch: TrialDispatch) -> Any:
        """Run the attempt on a free slot of a trial host, await its outcome and hand it
        to the kernel; on an interrupt cancel it (its sandbox is closed on the node) and
        record it as cancelled. When the host's process or node dies, the attempt runs
        again on another host, up to ``max_retries`` times."""
        from ray.exceptions import RayActorError, RayError, TaskCancelledError

        try:
            await self._spec_files(dispatch)
            pool = self._pool_for(dispatch)
        except VallyError as exc:  # no node fits the trial; the spec's files cannot ship
            return dispatch.failed(exc.render())
        lost = ""
        for _ in range(self.config.max_retries + 1):
            try:
                host = await pool.take()
            except asyncio.CancelledError:
                _uncancel()
                return dispatch.cancelled()
            except RuntimeError as exc:
                return dispatch.failed(str(exc))
            try:
                ref = host.actor.run.remote(dispatch.job())
                try:
                    outcome = await ref
                except asyncio.CancelledError:
                    _uncancel()
                    await _cancel(ref, host)
                    return dispatch.cancelled()
            except TaskCancelledError:
                return dispatch.cancelled()
            except RayActorError as exc:
                host.dead = True
                lost = f"{type(exc).__name__}: {exc}"
                continue
            except RayError as exc:
                return dispatch.failed(f"the trial's Ray call failed: {type(exc).__name__}: {exc}")
            finally:
                pool.give_back(host)
            return await dispatch.accept(outcome)
        return dispatch.failed(
            f"every Ray worker that ran the trial died ({self.config.max_retries + 1} "
            f"attempts); the last: {lost}"
        )

    async def _spec_files(self, dispatch: TrialDispatch) -> Any:
        """The run's spec files in the object store (put once; every host gets the one
        reference, which Ray fetches once per node)."""
        if not self.config.ship_files:
            return None
        async with self._files_lock:
            if not self._files_shipped:
                import ray

                archive = await asyncio.to_thread(dispatch.spec_archive)
                self._files = ray.put(archive)
                self._files_shipped = True
            return self._files

    async def shutdown(self) -> None:
        """Stop the run's trial hosts, remove its LLM permits and disconnect from the
        cluster (the cluster keeps running)."""
        if self._connected:
            import ray

            for pool in self._pools.values():
                await pool.close()
            self._pools.clear()
            if self._llm_gate is not None:
                await asyncio.to_thread(self._llm_gate.remove)
            await asyncio.to_thread(ray.shutdown)
            self._connected = False


def _uncancel() -> None:
    task = asyncio.current_task()
    if task is not None:
        task.uncancel()


async def _cancel(ref: Any, host: Host) -> None:
    """Cancel a running attempt and wait for it to close its sandbox; when it has not
    stopped in time, kill its host's process (the keeper of every agent it started gets
    SIGHUP when it dies and kills the agent), which is then never handed out again."""
    import ray

    ray.cancel(ref)
    settling = asyncio.ensure_future(_settle(ref))
    done, _ = await asyncio.wait([settling], timeout=CANCEL_GRACE_SECONDS + 5)
    if not done:
        host.dead = True
        with contextlib.suppress(Exception):
            ray.kill(host.actor)


async def _settle(ref: Any) -> None:
    with contextlib.suppress(Exception):
        await ref
